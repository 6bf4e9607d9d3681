package approval

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/approval/internal/domain"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/consume"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/preview"
	"github.com/airlock-gate/airlock/services/shared/quota"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// handle takes one approval_requested, allowed, denied, started, completed
// or failed event.
// Redelivery is harmless: the record is created with KV Create (an existing
// record means "already done") and every later step is a CAS transition that
// changes nothing the second time.
func (s *Service) handle(ctx context.Context, m jetstream.Msg) error {
	p, err := subject.Parse(m.Subject())
	if err != nil {
		return consume.Permanent(err)
	}
	ev, err := envelope.Decode(m.Data(), m.Headers())
	if err != nil {
		return consume.Permanent(fmt.Errorf("%s: %w", m.Subject(), err))
	}
	if ev.GetCallId() != p.Call || ev.GetAgentId() != p.Agent || envelope.TypeOf(ev) != p.Type {
		return consume.Permanent(fmt.Errorf("%s: the event's ids or type do not match its subject", m.Subject()))
	}
	switch b := ev.Body.(type) {
	case *airlockv1.Event_ApprovalRequested:
		if c := b.ApprovalRequested.GetCall(); c.GetCallId() != p.Call || c.GetAgentId() != p.Agent {
			return consume.Permanent(fmt.Errorf("%s: the call in the event is %s of agent %s", m.Subject(), c.GetCallId(), c.GetAgentId()))
		}
		var seq uint64
		stored := s.now()
		if meta, err := m.Metadata(); err == nil {
			seq, stored = meta.Sequence.Stream, meta.Timestamp
		}
		if ended, err := s.endedWhileBehind(ctx, ev, stored); err != nil || ended {
			return err
		}
		return s.requested(ctx, ev, seq)
	case *airlockv1.Event_Allowed:
		// A later revision decided without a person still supersedes an
		// earlier one waiting for approval: only the newest revision may run.
		return s.supersedeBy(ctx, b.Allowed.GetCall())
	case *airlockv1.Event_Denied:
		return s.supersedeBy(ctx, b.Denied.GetCall())
	case *airlockv1.Event_Started:
		return s.executed(ctx, ev, func(r *airlockv1.ApprovalRecord) *airlockv1.ApprovalRecord { return domain.Started(r, s.now()) })
	case *airlockv1.Event_Completed:
		return s.executed(ctx, ev, func(r *airlockv1.ApprovalRecord) *airlockv1.ApprovalRecord { return domain.Finished(r, true, s.now()) })
	case *airlockv1.Event_Failed:
		err := s.executed(ctx, ev, func(r *airlockv1.ApprovalRecord) *airlockv1.ApprovalRecord { return domain.Finished(r, false, s.now()) })
		if b.Failed.GetOutcome() == calls.FailureIndeterminate {
			// Whatever happened to the record, a person is asked whether it ran.
			err = errors.Join(err, s.inDoubtOpened(ctx, ev))
		}
		return err
	}
	return nil
}

// endedWhileBehind reports whether ev, an approval_requested stored at
// stored, ended while this consumer was behind and its record has left
// the bucket since (approval.ended_retention): withdrawn by its agent
// (withdraw records it canceled before the consumer reaches it), decided,
// or refused, then read again by a consumer made anew. Recorded again it
// would be put to people after its end. Only a request stored longer ago
// than half the retention is looked up (its record can have left only
// after the whole retention): the trail is read for no fresh request.
func (s *Service) endedWhileBehind(ctx context.Context, ev *airlockv1.Event, stored time.Time) (bool, error) {
	keep := s.cfg.EndedRetention
	if keep <= 0 || s.now().Sub(stored) < keep/2 {
		return false, nil
	}
	ref := callref.OfEvent(ev)
	ended, err := s.endedInTrail(ctx, ref)
	if err != nil {
		return false, fmt.Errorf("whether %s, asked about %s ago, ended meanwhile: %w", ref, s.now().Sub(stored).Round(time.Second), err)
	}
	if ended != nil {
		s.deps.Log.Info("a call asked about long ago ended meanwhile and is not put to people again", "key", ref.Key(), "ended", envelope.TypeOf(ended), "revision", ended.GetRevision())
	}
	return ended != nil, nil
}

// requested creates the pending record, naming this replica its
// announcer, supersedes earlier revisions and announces it after the
// message is acknowledged (announcer.go). A redelivered event finds the
// record and supersedes again: one being announced is left to its
// announcer (or, once that replica is gone, to takeOver); one naming this
// replica that this process is not announcing (an attempt failed after
// storing it) and one stored without an announcer and never announced (by
// an earlier version) are announced now. A call of a queue_per_thread rule
// is created queued and announced when its thread's turn comes (queue.go);
// seq, the event's stream sequence, orders the queue.
func (s *Service) requested(ctx context.Context, ev *airlockv1.Event, seq uint64) error {
	rec, err := domain.NewRecord(ev, s.settings, s.now())
	if err != nil {
		return consume.Permanent(err)
	}
	rec.RequestedSeq, rec.Queued = seq, domain.InQueue(rec)
	key := domain.RefOf(rec).Key()
	// An agent may keep only its share of calls waiting for a person: past
	// it the call is canceled at once, and the agent reads why. Its
	// records may hold only its share of the bucket's bytes: at it, the
	// call is refused without a record (refusals would grow them).
	share := s.deps.Config.ApprovalBytesPerAgent()
	v := s.index.admit(key, rec.GetCall().GetAgentId(), s.deps.Config.Approval.MaxPendingPerAgent, share, proto.Size(rec))
	admitted, known := v.admitted, v.known
	if !known {
		// Past the refusal mark of the bucket every agent's records share,
		// no new record is written at all (not even a refusal), so that
		// what is left takes every decision on the calls already waiting.
		// It is the backstop of the agents' shares: they add up to more
		// than the bucket, and each replica counts only what it has seen.
		var refusal, why string
		if v.overBytes {
			refusal = overByteShare(rec, v.heldBytes, share)
			why = fmt.Sprintf("its agent holds %d of its %d bytes of the approvals bucket (approval.max_bytes_per_agent)", v.heldBytes, share)
		} else {
			full, err := s.pastRefusalMark(ctx)
			if (err != nil || full != "") && admitted {
				s.index.forget(key)
			}
			if err != nil {
				return err
			}
			if full != "" {
				refusal, why = bucketFull(rec), "the approvals bucket is past its refusal mark: it "+full
			}
		}
		if refusal != "" {
			// A record written before (a redelivered request) is taken as
			// it is, never contradicted by a second outcome.
			_, _, err := s.store.get(ctx, key)
			if !errors.Is(err, errNotFound) {
				if err != nil {
					return err
				}
				known = true
			} else {
				return s.refuseUnrecorded(ctx, rec, refusal, why)
			}
		}
	}
	switch {
	case known:
		// A redelivered request: its record exists (create finds it), so
		// its preview is not asked for again.
	case !admitted:
		out, err := domain.Cancel(rec, &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "approval"}, overShare(rec, s.deps.Config.Approval.MaxPendingPerAgent), s.dir, s.now())
		if err != nil {
			return consume.Permanent(err)
		}
		rec = out.Record
	default:
		rec.Preview = s.preview(ctx, rec.GetCall())
		if !rec.GetQueued() {
			rec.Announcer = s.instance
		}
	}
	// held: this handler has key in s.announcing, from before the record
	// naming this replica is written until announceOwned takes it over; a
	// failure meanwhile frees it, so the message delivered again (or the
	// sweeper) finds the record nobody's and announces it.
	held := rec.GetAnnouncer() == s.instance && s.announcing.take(key)
	defer func() {
		if held {
			s.announcing.drop(key)
		}
	}()
	// announce: this handler announces the call once earlier revisions
	// are superseded.
	announce := held
	if _, err := s.store.create(ctx, rec); err != nil {
		announce = false
		if !known {
			s.index.forget(key)
		}
		if bus.Full(err) && !known {
			// Full before the mark was seen (several writers at once, or
			// a bound under one record): refused as past the mark.
			return s.refuseUnrecorded(ctx, rec, bucketFull(rec), fmt.Sprintf("the approvals bucket is full (%v)", err))
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return err
		}
		if !held {
			// Taken before the record is read: this process's
			// announcement clears the name before it frees the key.
			held = s.announcing.take(key)
		}
		if rec, _, err = s.store.get(ctx, key); err != nil {
			return err
		}
		// Earlier revisions are superseded whatever the announcement's
		// state: the attempt that stored the record may have failed
		// before it superseded them.
		switch {
		case rec.GetState() != domain.Pending:
			return nil
		case rec.GetAnnouncer() == s.instance:
			// Held, it is nobody's: stored by an attempt of this replica
			// that failed after (a later write, or the create's answer
			// timed out), and announced now.
			announce = held
		case rec.GetAnnouncer() != "" || len(rec.GetNotifications()) > 0:
			// Announced, or being announced (by a replica gone, takeOver
			// finishes it).
		case !rec.GetQueued() && held:
			// Never announced nor named an announcer (stored by an
			// earlier version, which left that to this message).
			claimed, err := s.claimAnnouncement(ctx, key, "")
			if err != nil {
				return err
			}
			if claimed != nil {
				rec, announce = claimed, true
			}
		}
	} else if !admitted {
		s.deps.Log.Warn("call refused: its agent has its share of calls waiting for a person", "key", key, "max_pending_per_agent", s.deps.Config.Approval.MaxPendingPerAgent)
		// The record is written; a failed publish is repaired by the
		// sweeper's settle pass.
		if err := s.publishDecision(ctx, rec); err != nil {
			s.deps.Log.Error("cancellation stored but its event is not published yet; the sweeper will retry", "key", key, "err", err)
		}
		return nil
	} else {
		s.deps.Log.Info("call waits for approval", "key", key, "approvers", rec.GetDecision().GetApprovers(), "deadline", rec.GetDeadline().AsTime(), "queued", rec.GetQueued())
	}
	if err := s.supersede(ctx, rec); err != nil {
		return err
	}
	if rec.GetQueued() {
		return s.release(ctx, rec)
	}
	if !announce || !held {
		return nil // announced, or another handler of this process announces it
	}
	// The record is stored and shown, and names this replica its
	// announcer: the message is acknowledged now, and the channels are
	// told without holding this worker (a replica that stops or dies
	// meanwhile leaves the call to be announced by another, takeOver).
	held = false // announceOwned frees it
	s.announceOwned(key, rec)
	return nil
}

// maxUnavailable bounds why a call has no preview (the text may quote a
// tool's error, which the agent can shape).
const maxUnavailable = 400

// preview asks an executor what call would do, waiting at most
// approval.preview_timeout. A preview that fails or comes late gives one
// that says why there is none: the call is put to reviewers all the same.
// What is stored is bounded (executor.max_preview_bytes) and its digest
// computed here, over exactly what reviewers will see.
func (s *Service) preview(ctx context.Context, call *airlockv1.ToolCall) *airlockv1.Preview {
	if call.GetAgentRuns() {
		return preview.Unavailable("the agent runs this tool itself")
	}
	p, err := s.askPreview(ctx, call)
	var busy *previewsBusy
	switch {
	case errors.As(err, &busy):
		return preview.Unavailable(busy.Error())
	case err != nil:
		s.deps.Log.Warn("no preview for a call waiting for a person", "agent", call.GetAgentId(), "call", call.GetCallId(), "err", err)
		if apierr.CodeOf(err) == apierr.Unavailable {
			return preview.Unavailable(fmt.Sprintf("the preview did not come within %s (approval.preview_timeout)", s.cfg.PreviewTimeout))
		}
		return preview.Unavailable(preview.Bound("the preview request failed: "+err.Error(), maxUnavailable))
	case p == nil:
		return preview.Unavailable("the executor answered no preview")
	case p.GetUnavailable() != "":
		return preview.Unavailable(preview.Bound(p.GetUnavailable(), maxUnavailable))
	}
	return preview.Finish(&airlockv1.Preview{Kind: p.GetKind(), Text: p.GetText(), Truncated: p.GetTruncated(),
		Precondition: p.GetPrecondition(), At: p.GetAt()}, s.deps.Config.Executor.MaxPreviewBytes)
}

// previewsBusy: the agent's call got a short deadline, since another
// preview of the same agent was being made, and missed it.
type previewsBusy struct{ agent string }

func (b *previewsBusy) Error() string {
	return fmt.Sprintf("the preview did not come within %s, the time a call gets while another preview of agent %s is being made", overflowPreview, b.agent)
}

// overflowPreview is how long a call may wait for its preview while
// another preview of the same agent is being made.
const overflowPreview = 250 * time.Millisecond

// perAgent gives each agent one preview at a time the whole of ask's
// deadline (approval.preview_timeout) and every other preview it makes
// meanwhile overflowPreview: a preview holds a worker of the approval
// service, and the workers are shared by call, so one agent's slow
// previews must not hold them all, and with them every other agent's calls.
func perAgent(ask func(context.Context, *airlockv1.ToolCall) (*airlockv1.Preview, error)) func(context.Context, *airlockv1.ToolCall) (*airlockv1.Preview, error) {
	busy := quota.New(1)
	return func(ctx context.Context, call *airlockv1.ToolCall) (*airlockv1.Preview, error) {
		agent := call.GetAgentId()
		if busy.Take(agent) {
			defer busy.Give(agent)
			return ask(ctx, call)
		}
		short, cancel := context.WithTimeout(ctx, overflowPreview)
		defer cancel()
		p, err := ask(short, call)
		if err != nil && ctx.Err() == nil && short.Err() != nil {
			return nil, &previewsBusy{agent: agent}
		}
		return p, err
	}
}

// pastRefusalMark says how full the approvals bucket is when it holds more
// than config.ApprovalRefusalMark of its bound ("" below it, or when the
// bucket has no bound), and sets airlock_approvals_bucket_fill.
func (s *Service) pastRefusalMark(ctx context.Context) (string, error) {
	held, bound, err := s.store.fill(ctx)
	if err != nil {
		return "", fmt.Errorf("how full the approvals bucket is: %w", err)
	}
	if bound <= 0 {
		return "", nil
	}
	s.bucketFill.Set(float64(held) / float64(bound))
	if float64(held) < config.ApprovalRefusalMark*float64(bound) {
		if s.refusing.CompareAndSwap(true, false) {
			s.deps.Log.Info("the approvals bucket is under its refusal mark again: new calls are put to reviewers", "held_bytes", held, "max_bytes", bound)
		}
		return "", nil
	}
	if s.refusing.CompareAndSwap(false, true) {
		s.deps.Log.Warn("the approvals bucket is past its refusal mark: new calls that need a person are canceled at once until ended records leave it (approval.ended_retention); raise approval.max_bytes (then run `airlock provision`) or lower approval.ended_retention",
			"held_bytes", held, "max_bytes", bound, "mark", config.ApprovalRefusalMark)
	}
	return fmt.Sprintf("holds %d of its %d bytes", held, bound), nil
}

// refuseUnrecorded cancels rec, a call with no record, for reason (what
// the agent reads) without writing one to the approvals bucket (why says
// for the log why not): the canceled event, which the agent reads, and
// the audit trail carry the refusal. A rec already canceled (past its
// agent's share of waiting calls) keeps its own reason.
func (s *Service) refuseUnrecorded(ctx context.Context, rec *airlockv1.ApprovalRecord, reason, why string) error {
	key := domain.RefOf(rec).Key()
	if !domain.Final(rec) {
		out, err := domain.Cancel(rec, &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "approval"}, reason, s.dir, s.now())
		if err != nil {
			return consume.Permanent(err)
		}
		rec = out.Record
	}
	ev, err := domain.FinalEvent(rec)
	if err != nil {
		return consume.Permanent(err)
	}
	// Not published, the request is delivered again (there is no record
	// for the sweeper's settle pass to repair from).
	if err := s.publish(ctx, ev); err != nil {
		return fmt.Errorf("publish the cancellation of %s (refused with no record: %s): %w", key, why, err)
	}
	s.deps.Log.Info("call refused with no record", "key", key, "why", why)
	return nil
}

// overByteShare is the reason an agent reads when rec came while its
// records held held bytes of the approvals bucket, at or past its share.
func overByteShare(rec *airlockv1.ApprovalRecord, held, share int64) string {
	agent := rec.GetCall().GetAgentId()
	return fmt.Sprintf("agent %s holds %d of its %d bytes of approval records (its waiting and recently ended calls, each with its arguments), so call %s was not put to reviewers: "+
		"its new calls are refused until older records expire after approval.ended_retention, or ask the operator to raise approval.max_bytes_per_agent",
		agent, held, share, rec.GetCall().GetCallId())
}

// bucketFull is the reason an agent reads when rec came while the approvals
// bucket was past its refusal mark.
func bucketFull(rec *airlockv1.ApprovalRecord) string {
	return fmt.Sprintf("airlock's store of calls waiting for a person is nearly full (past %d%% of approval.max_bytes), so call %s of agent %s was not put to reviewers: "+
		"submit it again later with a new call id; if this persists, ask the operator to raise approval.max_bytes or lower approval.ended_retention",
		int(config.ApprovalRefusalMark*100), rec.GetCall().GetCallId(), rec.GetCall().GetAgentId())
}

// overShare is the reason an agent reads when rec came past its share of
// calls waiting for a person.
func overShare(rec *airlockv1.ApprovalRecord, max int) string {
	return fmt.Sprintf("agent %s already has %d calls waiting for a person (approval.max_pending_per_agent), so this one was not put to reviewers: wait until some are decided, then submit it again with a new call id",
		rec.GetCall().GetAgentId(), max)
}

// supersedeBy cancels earlier pending revisions of call, which policy
// decided without a person (revision 1 has none).
func (s *Service) supersedeBy(ctx context.Context, call *airlockv1.ToolCall) error {
	if call.GetRevision() <= 1 {
		return nil
	}
	return s.supersede(ctx, &airlockv1.ApprovalRecord{Call: call})
}

// supersede cancels earlier revisions of the call that are still pending:
// once the agent submitted a new revision, only that one may run.
func (s *Service) supersede(ctx context.Context, rec *airlockv1.ApprovalRecord) error {
	ref := domain.RefOf(rec)
	for _, o := range s.index.earlierPending(ref) {
		by := &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "approval"}
		reason := fmt.Sprintf("superseded by revision %d", ref.Rev)
		key := domain.RefOf(o).Key()
		if _, _, _, err := s.transition(ctx, key, func(cur *airlockv1.ApprovalRecord) (domain.Outcome, error) {
			return domain.Cancel(cur, by, reason, s.dir, s.now())
		}); err != nil {
			return fmt.Errorf("cancel superseded %s: %w", key, err)
		}
	}
	return nil
}

// announce tells the channels and stores where they put their messages,
// as the fan-out hands them over (see settleWindow), in the background:
// the returned channel yields the outcome once every channel answered or
// timed out. Channels that answer after the call was decided are shown the
// outcome at once (the decision found no reference of theirs to update).
func (s *Service) announce(key string, rec *airlockv1.ApprovalRecord) <-chan error {
	done := make(chan error, 1)
	ctx := s.life
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		var errs []error
		s.fan.announce(ctx, rec, func(refs []*airlockv1.NotificationRef) {
			if err := s.storeRefs(ctx, key, refs); err != nil {
				errs = append(errs, err)
			}
		})
		if ctx.Err() != nil {
			// Stopped meanwhile: channels may not have been told, so the
			// announcement is made again (takeOver, when it was this
			// replica's to make).
			errs = append(errs, fmt.Errorf("announce %s: the service is stopping: %w", key, ctx.Err()))
		}
		done <- errors.Join(errs...)
	}()
	return done
}

// storeRefs adds refs to the record of key and, if the call is already
// decided, shows those channels the outcome.
func (s *Service) storeRefs(ctx context.Context, key string, refs []*airlockv1.NotificationRef) error {
	var added []*airlockv1.NotificationRef
	stored, wrote, _, err := mutate(ctx, s.store, key, func(cur *airlockv1.ApprovalRecord) (*airlockv1.ApprovalRecord, struct{}, error) {
		next := proto.Clone(cur).(*airlockv1.ApprovalRecord)
		added = added[:0]
		for _, ref := range refs {
			if !announced(next, ref.GetChannel()) {
				next.Notifications = append(next.Notifications, ref)
				added = append(added, ref)
			}
		}
		if len(added) == 0 {
			return nil, struct{}{}, nil
		}
		return next, struct{}{}, nil
	})
	if err != nil {
		return fmt.Errorf("store notification refs of %s: %w", key, err)
	}
	if wrote && domain.Final(stored) {
		only := proto.Clone(stored).(*airlockv1.ApprovalRecord)
		only.Notifications = added
		s.updateChannels(only)
	}
	return nil
}

// executed applies the executor's progress to the record of the event's
// revision. Calls that policy allowed have no record: nothing to do.
func (s *Service) executed(ctx context.Context, ev *airlockv1.Event, step func(*airlockv1.ApprovalRecord) *airlockv1.ApprovalRecord) error {
	key := callref.OfEvent(ev).Key()
	rec, wrote, _, err := mutate(ctx, s.store, key, func(cur *airlockv1.ApprovalRecord) (*airlockv1.ApprovalRecord, struct{}, error) {
		return step(cur), struct{}{}, nil
	})
	if errors.Is(err, errNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if wrote && (rec.GetState() == domain.Completed || rec.GetState() == domain.Failed) {
		s.updateChannels(rec)
	}
	return nil
}
