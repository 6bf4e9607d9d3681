package approval

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/approval/internal/domain"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/ingress"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// defaultInDoubtLimit bounds a list of in-doubt tasks.
const defaultInDoubtLimit = 200

// inDoubtOpened creates the "did it happen?" task of a call revision that
// ended failed with outcome indeterminate. Create-if-absent: a redelivered
// failure finds the task and changes nothing. An agent can end calls in
// doubt at will (a webhook answering 5xx to its arguments), and only a
// person closes a task, so an agent with approval.max_in_doubt_per_agent
// open tasks gets no new one, and neither does any call once the bucket
// holds config.InDoubtRefusalMark of buckets.in_doubt_max_bytes: the
// call's failed event still says indeterminate; the miss is logged and
// counted, and the message is acknowledged (asking again would find the
// same). A failure handled again while its agent is taken to be at its
// share (inDoubtShareMemo) is counted again, though its task may exist.
func (s *Service) inDoubtOpened(ctx context.Context, ev *airlockv1.Event) error {
	ref := callref.OfEvent(ev)
	key := ref.Key()
	t := s.taskOf(ctx, ev) // outside the lock: it may wait for the stream
	s.inDoubtMu.Lock()
	defer s.inDoubtMu.Unlock()
	if at, ok := s.inDoubtFull[ref.Agent]; ok && s.now().Sub(at) < inDoubtShareMemo {
		// Found at its share a moment ago: only people's answers lower
		// that, so its flood costs no read of its tasks each.
		s.untracked.WithLabelValues("agent_share").Inc()
		return nil
	}
	delete(s.inDoubtFull, ref.Agent)
	open, exists, err := s.openInDoubt(ctx, ref.Agent, key)
	if err != nil {
		return fmt.Errorf("count the in-doubt tasks of agent %s: %w", ref.Agent, err)
	}
	if exists {
		return nil
	}
	if most := s.cfg.MaxInDoubtPerAgent; open >= most {
		s.inDoubtFull[ref.Agent] = s.now()
		s.untracked.WithLabelValues("agent_share").Inc()
		s.deps.Log.Warn("a call ended in doubt and gets no task asking whether it happened: its agent has approval.max_in_doubt_per_agent tasks open; "+
			"answer them (console In doubt page, `airlock approvals in-doubt`) or raise the setting", "call", ref.String(), "open", open, "max", most)
		return nil
	}
	// Past the mark the rest is kept for answers, which grow a task (a
	// full bucket refuses them too, and answering is how it empties).
	if held, bound, err := s.inDoubt.fill(ctx); err != nil {
		return fmt.Errorf("record the in-doubt task of %s: %w", ref, err)
	} else if bound > 0 && float64(held) >= config.InDoubtRefusalMark*float64(bound) {
		return s.bucketFull(ref, fmt.Errorf("it holds %d of its %d bytes", held, bound))
	}
	// A call people answered already is not asked about again: its task
	// may have left (an answered one does after the retention) when the
	// failure is handled again (the consumer made anew reads the stream
	// from its start).
	if answered, err := s.answeredInDoubt(ctx, ref); err != nil {
		return fmt.Errorf("record the in-doubt task of %s: %w", ref, err)
	} else if answered {
		return nil
	}
	data, err := proto.Marshal(t)
	if err != nil {
		return err
	}
	if _, err := s.inDoubt.kv.Create(ctx, key, data); err != nil {
		switch {
		case errors.Is(err, jetstream.ErrKeyExists):
			return nil
		case bus.Full(err):
			return s.bucketFull(ref, err)
		}
		return fmt.Errorf("record the in-doubt task of %s: %w", ref, err)
	}
	return nil
}

// taskOf is the "did it happen?" task of ev, a call's failed event with
// outcome indeterminate: the failure, and the tool from the call's
// record or its allowed event.
func (s *Service) taskOf(ctx context.Context, ev *airlockv1.Event) *airlockv1.InDoubtTask {
	f := ev.GetFailed()
	ref := callref.OfEvent(ev)
	t := &airlockv1.InDoubtTask{AgentId: ref.Agent, CallId: ref.Call, Revision: ref.Rev, ThreadId: ev.GetThreadId(),
		Reason: f.GetReason(), Message: calls.Cut(f.GetMessage(), ingress.MaxReasonLen), FailedAt: ev.GetTime()}
	if call := s.callOf(ctx, ref); call != nil {
		t.Server, t.Tool = call.GetServer(), call.GetTool()
		if t.ThreadId == "" {
			t.ThreadId = call.GetThreadId()
		}
	}
	return t
}

// inDoubtSweepEvery is how many sweeps pass between looks for answered
// in-doubt tasks past the retention (every 10 minutes at the default
// sweep_interval of 1 s, and at a replica's first sweep).
const inDoubtSweepEvery = 600

// sweepInDoubt removes answered tasks older than the retention that carry
// no TTL of their own: those answered before the bucket took per-key TTLs
// (an upgraded data dir), or whose TTL was not set after the answer
// (answeredLeaves), which would otherwise stay for ever. An answer not yet
// in the trail is recorded there first. The purge is a compare-and-set,
// so a task changed meanwhile stays.
func (s *Service) sweepInDoubt(ctx context.Context) {
	now := s.now()
	if !s.inDoubtSwept.IsZero() && now.Sub(s.inDoubtSwept) < inDoubtSweepEvery*s.cfg.SweepInterval {
		return
	}
	s.inDoubtSwept = now
	type answered struct {
		key  string
		rev  uint64
		task *airlockv1.InDoubtTask
	}
	var past []answered
	err := bus.ReadAll(ctx, s.inDoubt.kv, ">", func(e jetstream.KeyValueEntry) {
		t := &airlockv1.InDoubtTask{}
		if proto.Unmarshal(e.Value(), t) == nil && t.GetResolved() && now.Sub(t.GetResolvedAt().AsTime()) >= s.cfg.EndedRetention {
			past = append(past, answered{e.Key(), e.Revision(), t})
		}
	})
	if err != nil {
		s.deps.Log.Warn("cannot read the in-doubt tasks to remove answered ones past approval.ended_retention; will retry", "err", err)
		return
	}
	for _, a := range past {
		ref, err := callref.ParseKey(a.key)
		if err != nil {
			continue
		}
		if inTrail, err := s.answeredInDoubt(ctx, ref); err != nil || !inTrail {
			if err == nil {
				err = s.publishResolved(ctx, a.task)
			}
			if err != nil {
				s.deps.Log.Warn("an answered in-doubt task past approval.ended_retention stays until its answer is in the trail; will retry", "key", a.key, "err", err)
				continue
			}
		}
		opts := []jetstream.KVDeleteOpt{jetstream.LastRevision(a.rev)}
		if s.inDoubt.endedTTL > 0 {
			opts = append(opts, jetstream.PurgeTTL(bus.KeyMarkerTTL)) // the marker leaves too
		}
		if err := s.inDoubt.kv.Purge(ctx, a.key, opts...); err != nil && !bus.Conflict(err) {
			s.deps.Log.Warn("removing an answered in-doubt task past approval.ended_retention failed; will retry", "key", a.key, "err", err)
		}
	}
}

// bucketFull records that ref's call gets no task because the in-doubt
// bucket is full (or past its mark), and lets its message be acknowledged.
func (s *Service) bucketFull(ref callref.Ref, why error) error {
	s.untracked.WithLabelValues("bucket_full").Inc()
	s.deps.Log.Error("a call ended in doubt and gets no task asking whether it happened: the in-doubt bucket is full (buckets.in_doubt_max_bytes, the rest kept for answers); "+
		"answer open tasks (answered ones leave after approval.ended_retention), or raise the setting and run `airlock provision`", "call", ref.String(), "err", why)
	return nil
}

// answeredInDoubt reports whether the trail holds a person's answer about
// ref (its call's last outcome_resolved is ref's revision's).
func (s *Service) answeredInDoubt(ctx context.Context, ref callref.Ref) (bool, error) {
	ev, _, err := s.lastEventOf(ctx, ref, subject.OutcomeResolved)
	return ev != nil, err
}

// inDoubtShareMemo is how long an agent found at its share of open tasks
// is taken to be still there without reading its tasks again (an answer
// given through this replica ends it at once; one through another replica
// frees the place for this one's calls after it).
const inDoubtShareMemo = 2 * time.Second

// openInDoubt counts agent's open tasks, and says whether key (a task of
// agent's) is stored already, open or answered. It reads the agent's
// tasks: at most max_in_doubt_per_agent open ones, and the answered ones
// people closed within approval.ended_retention.
func (s *Service) openInDoubt(ctx context.Context, agent, key string) (open int, exists bool, err error) {
	err = bus.ReadAll(ctx, s.inDoubt.kv, agent+".*.*", func(e jetstream.KeyValueEntry) {
		if e.Key() == key {
			exists = true
		}
		t := &airlockv1.InDoubtTask{}
		if proto.Unmarshal(e.Value(), t) != nil || !t.GetResolved() {
			open++ // a task that does not decode cannot be answered either
		}
	})
	return open, exists, err
}

// callOf is the call a revision ran: from its approval record, or from the
// policy's allowed event; nil when neither can be read (the task then
// names no tool, and its call page shows the rest).
func (s *Service) callOf(ctx context.Context, ref callref.Ref) *airlockv1.ToolCall {
	if rec, _, err := s.store.get(ctx, ref.Key()); err == nil {
		return rec.GetCall()
	}
	ev, _, _ := s.lastEventOf(ctx, ref, subject.Allowed)
	return ev.GetAllowed().GetCall()
}

// getInDoubt reads one task with its KV revision; revision 0 of ref means
// the call's newest task.
func (s *Service) getInDoubt(ctx context.Context, ref callref.Ref, newest bool) (*airlockv1.InDoubtTask, uint64, error) {
	key := ref.Key()
	if newest {
		keys, err := bus.Keys(ctx, s.inDoubt.kv, ref.CallKey()+".*")
		if err != nil {
			return nil, 0, err
		}
		var best uint32
		for _, k := range keys {
			if r, err := callref.ParseKey(k); err == nil && r.Rev > best {
				best, key = r.Rev, k
			}
		}
		if best == 0 {
			return s.untrackedTask(ctx, ref, "call "+ref.Agent+"/"+ref.Call)
		}
	}
	e, err := s.inDoubt.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return s.untrackedTask(ctx, ref, "call "+ref.String())
	}
	if err != nil {
		return nil, 0, err
	}
	t := &airlockv1.InDoubtTask{}
	if err := proto.Unmarshal(e.Value(), t); err != nil {
		return nil, 0, fmt.Errorf("in-doubt task %s: %w", key, err)
	}
	return t, e.Revision(), nil
}

// untrackedTask is the task of a call (named name) that has none stored:
// one that ended in doubt past a bound (its agent's share of open tasks,
// a full bucket) and was never answered, made from its trail, with KV
// revision 0 (not stored: an answer creates it, ResolveInDoubt). So a
// reviewer who learns of such a call (its page, its failed event, the
// airlock_in_doubt_untracked_total count) can still answer it, and its
// agent's AwaitResolution gets that answer. Otherwise the not_found
// answer of noTask. ref.Rev 0: the call's newest.
func (s *Service) untrackedTask(ctx context.Context, ref callref.Ref, name string) (*airlockv1.InDoubtTask, uint64, error) {
	failed, _, err := s.lastEventOf(ctx, ref, subject.Failed)
	if err != nil {
		return nil, 0, apierr.Wrap(apierr.Unavailable, err, "whether %s ended in doubt could not be read; try again", name)
	}
	if failed == nil || failed.GetFailed().GetOutcome() != calls.FailureIndeterminate {
		return nil, 0, s.noTask(ctx, ref, name)
	}
	revision := callref.OfEvent(failed)
	if answered, err := s.answeredInDoubt(ctx, revision); err != nil {
		return nil, 0, apierr.Wrap(apierr.Unavailable, err, "whether %s was answered could not be read; try again", name)
	} else if answered {
		return nil, 0, s.noTask(ctx, revision, name)
	}
	return s.taskOf(ctx, failed), 0, nil
}

// noTask is the not_found answer about a call (named name) that has no
// in-doubt task and none to make, saying from its trail why: answered (the
// task left after the retention), or not in doubt at all. ref.Rev 0: the
// call's newest.
func (s *Service) noTask(ctx context.Context, ref callref.Ref, name string) error {
	last := func(typ string) *airlockv1.Event {
		ev, _, _ := s.lastEventOf(ctx, ref, typ) // unread, the answer is the last one below
		return ev
	}
	if ev := last(subject.OutcomeResolved); ev != nil {
		return apierr.New(apierr.NotFound, "%s was answered already by %s (%s): its task left after approval.ended_retention, and the answer is in its trail",
			name, ev.GetActor().GetId(), calls.Happened(ev.GetOutcomeResolved().GetHappened()))
	}
	return apierr.New(apierr.NotFound, "%s did not end in doubt: there is nothing to resolve", name)
}

// ListInDoubt returns the tasks (endpoint "in_doubt.list"): open ones
// oldest first, agents taking turns (takingTurns), then (include_resolved)
// resolved ones newest first.
func (s *Service) ListInDoubt(ctx context.Context, req *airlockv1.ListInDoubtRequest) (*airlockv1.ListInDoubtResponse, error) {
	limit := int(req.GetLimit())
	if limit <= 0 || limit > defaultInDoubtLimit {
		limit = defaultInDoubtLimit
	}
	var open, done []*airlockv1.InDoubtTask
	openOf := map[string]int{}
	err := bus.ReadAll(ctx, s.inDoubt.kv, ">", func(e jetstream.KeyValueEntry) {
		t := &airlockv1.InDoubtTask{}
		if err := proto.Unmarshal(e.Value(), t); err != nil {
			s.deps.Log.Error("an in-doubt task does not decode; it is left out of the list", "key", e.Key(), "err", err)
			return
		}
		if !t.GetResolved() {
			open = append(open, t)
			openOf[t.GetAgentId()]++
		} else if req.GetIncludeResolved() {
			done = append(done, t)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("list in-doubt tasks: %w", err)
	}
	resp := &airlockv1.ListInDoubtResponse{MaxPerAgent: uint32(s.cfg.MaxInDoubtPerAgent)}
	// What the list cannot show: the calls that ended in doubt and got no
	// task (inDoubtOpened), so that a reviewer knows to look in the trail.
	for agent, n := range openOf {
		if n >= s.cfg.MaxInDoubtPerAgent {
			resp.AgentsAtShare = append(resp.AgentsAtShare, agent)
		}
	}
	slices.Sort(resp.AgentsAtShare)
	if held, bound, err := s.inDoubt.fill(ctx); err == nil && bound > 0 {
		resp.BucketPastMark = float64(held) >= config.InDoubtRefusalMark*float64(bound)
	}
	open = takingTurns(open)
	slices.SortFunc(done, func(a, b *airlockv1.InDoubtTask) int {
		return b.GetResolvedAt().AsTime().Compare(a.GetResolvedAt().AsTime())
	})
	all := append(open, done...)
	resp.Tasks = all
	if len(all) > limit {
		resp.Tasks, resp.Truncated = all[:limit], true
	}
	return resp, nil
}

// takingTurns orders open tasks oldest first within each agent, the agents
// taking turns (each one's oldest, then each one's second, ...; agents in
// the order of their oldest task), so that one agent at its share of open
// tasks cannot push another's off the page a list shows.
func takingTurns(open []*airlockv1.InDoubtTask) []*airlockv1.InDoubtTask {
	older := func(a, b *airlockv1.InDoubtTask) int {
		return a.GetFailedAt().AsTime().Compare(b.GetFailedAt().AsTime())
	}
	slices.SortStableFunc(open, older)
	var agents []string
	byAgent := map[string][]*airlockv1.InDoubtTask{}
	for _, t := range open {
		if _, seen := byAgent[t.GetAgentId()]; !seen {
			agents = append(agents, t.GetAgentId())
		}
		byAgent[t.GetAgentId()] = append(byAgent[t.GetAgentId()], t)
	}
	out := make([]*airlockv1.InDoubtTask, 0, len(open))
	for turn := 0; len(out) < len(open); turn++ {
		for _, a := range agents {
			if tasks := byAgent[a]; turn < len(tasks) {
				out = append(out, tasks[turn])
			}
		}
	}
	return out
}

// GetInDoubt returns one task (endpoint "in_doubt.get").
func (s *Service) GetInDoubt(ctx context.Context, req *airlockv1.GetInDoubtRequest) (*airlockv1.GetInDoubtResponse, error) {
	ref, err := callref.New(req.GetAgentId(), req.GetCallId(), req.GetRevision())
	if err != nil {
		return nil, apierr.New(apierr.InvalidRequest, "name the call by agent_id and call_id: %v", err)
	}
	t, _, err := s.getInDoubt(ctx, ref, req.GetRevision() == 0)
	if err != nil {
		return nil, err
	}
	return &airlockv1.GetInDoubtResponse{Task: t}, nil
}

// ResolveInDoubt records a person's answer to "did it happen?" (endpoint
// "in_doubt.resolve", sealed by a front-end, which lets only reviewers
// reach it): once per task, with compare-and-set on the task, then the
// outcome_resolved event (its id fixed per revision, so a retry stores it
// once). The same person repeating the same answer changes nothing and
// republishes the event, which repairs a publish that failed before.
func (s *Service) ResolveInDoubt(ctx context.Context, req *airlockv1.ResolveInDoubtRequest) (*airlockv1.ResolveInDoubtResponse, error) {
	actor, err := human(ctx, req.GetPrincipal())
	if err != nil {
		return nil, err
	}
	ref, err := callref.New(req.GetAgentId(), req.GetCallId(), req.GetRevision())
	if err != nil {
		return nil, apierr.New(apierr.InvalidRequest, "name the call by agent_id and call_id: %v", err)
	}
	note := strings.TrimSpace(req.GetNote())
	if len(note) > ingress.MaxReasonLen || !utf8.ValidString(note) {
		return nil, apierr.New(apierr.InvalidRequest, "the note must be UTF-8 text of at most %d bytes", ingress.MaxReasonLen)
	}
	for range 5 {
		t, rev, err := s.getInDoubt(ctx, ref, req.GetRevision() == 0)
		if err != nil {
			return nil, err
		}
		if err := s.mayResolve(ctx, t, actor); err != nil {
			return nil, err
		}
		if t.GetResolved() {
			if t.GetResolvedBy().GetId() != actor.GetId() || t.GetHappened() != req.GetHappened() {
				return nil, apierr.New(apierr.AlreadyDecided, "call %s/%s was resolved already by %s: %s", t.GetAgentId(), t.GetCallId(), t.GetResolvedBy().GetId(), calls.Happened(t.GetHappened()))
			}
			return &airlockv1.ResolveInDoubtResponse{Task: t}, s.publishResolved(ctx, t)
		}
		t.Resolved, t.Happened, t.Note, t.ResolvedBy, t.ResolvedAt = true, req.GetHappened(), note, actor, timestamppb.New(s.now())
		data, err := proto.Marshal(t)
		if err != nil {
			return nil, err
		}
		key, _ := callref.New(t.GetAgentId(), t.GetCallId(), t.GetRevision())
		// The answer is kept without a TTL until the trail holds it: a lost
		// publish is repaired by the same answer again or by the sweeper
		// (sweepInDoubt), never lost with a task that left. A task of a call
		// past a bound, never stored (rev 0), is stored answered: a person
		// chose to answer it, so no agent's share applies.
		var answered uint64
		if rev == 0 {
			answered, err = s.inDoubt.kv.Create(ctx, key.Key(), data)
		} else {
			answered, err = s.inDoubt.kv.Update(ctx, key.Key(), data, rev)
		}
		if err != nil {
			if bus.Conflict(err) || errors.Is(err, jetstream.ErrKeyExists) {
				continue // made or resolved meanwhile: look again
			}
			if bus.Full(err) {
				return nil, apierr.Wrap(apierr.Unavailable, err, "the in-doubt bucket is full (buckets.in_doubt_max_bytes): raise it and run `airlock provision`, then answer again")
			}
			return nil, fmt.Errorf("resolve %s: %w", key, err)
		}
		s.inDoubtMu.Lock()
		delete(s.inDoubtFull, t.GetAgentId()) // a place freed: look again at the next
		s.inDoubtMu.Unlock()
		if err := s.publishResolved(ctx, t); err != nil {
			return nil, err
		}
		s.answeredLeaves(ctx, key.Key(), data, answered)
		return &airlockv1.ResolveInDoubtResponse{Task: t, Changed: true}, nil
	}
	return nil, apierr.New(apierr.Conflict, "call %s kept changing while it was resolved: try again", ref)
}

// mayResolve holds an answer to "did it happen?" to the rules of the call's
// approval: whoever may not decide a call (not among its approvers, the
// person the agent acts for under an ordinary rule) may not say whether it
// ran either, and the attempt is recorded like a refused decision. A call
// the policy allowed without a person has no approval record: any reviewer
// the front-end lets through may answer.
func (s *Service) mayResolve(ctx context.Context, t *airlockv1.InDoubtTask, actor *airlockv1.Actor) error {
	ref, err := callref.New(t.GetAgentId(), t.GetCallId(), t.GetRevision())
	if err != nil {
		return apierr.New(apierr.InvalidRequest, "in-doubt task names no call: %v", err)
	}
	rec, _, err := s.store.get(ctx, ref.Key())
	if errors.Is(err, errNotFound) {
		return nil
	}
	if err != nil {
		return apierr.Wrap(apierr.Unavailable, err, "read the approval of call %s", ref)
	}
	if refusal := domain.Authorize(rec, s.dir.Vouched(actor), actor.GetId(), "resolve"); refusal != nil {
		return s.domainErr(ctx, rec, actor, refusal)
	}
	return nil
}

// answeredLeaves gives an answered task, stored at revision rev, the
// retention as its TTL once its answer is in the trail. A failure leaves
// it for the sweeper, which removes answered tasks past the retention.
func (s *Service) answeredLeaves(ctx context.Context, key string, data []byte, rev uint64) {
	if s.inDoubt.endedTTL <= 0 {
		return // a bucket without per-key TTLs: the sweeper removes it
	}
	if err := s.inDoubt.update(ctx, key, data, rev, true); err != nil && !bus.Conflict(err) {
		s.deps.Log.Warn("an answered in-doubt task keeps no TTL; the sweeper removes it after approval.ended_retention", "key", key, "err", err)
	}
}

// publishResolved records a resolution in the trail, where the agent sees it.
func (s *Service) publishResolved(ctx context.Context, t *airlockv1.InDoubtTask) error {
	ref, err := callref.New(t.GetAgentId(), t.GetCallId(), t.GetRevision())
	if err != nil {
		return err
	}
	ev := &airlockv1.Event{EventId: ref.EventID(subject.OutcomeResolved), AgentId: ref.Agent, CallId: ref.Call, Revision: ref.Rev,
		ThreadId: t.GetThreadId(), Actor: t.GetResolvedBy(),
		Body: &airlockv1.Event_OutcomeResolved{OutcomeResolved: &airlockv1.OutcomeResolved{Happened: t.GetHappened(), Note: t.GetNote()}}}
	if err := s.publish(ctx, ev); err != nil {
		return fmt.Errorf("the answer about %s is kept, but recording it in the trail failed: %w (resolve it again with the same answer to record it)", ref, err)
	}
	return nil
}
