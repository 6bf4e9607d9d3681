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
	"github.com/airlock-gate/airlock/services/shared/envelope"
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
// holds buckets.in_doubt_max_bytes: the call's failed event still says
// indeterminate; the miss is logged and counted, and the message is
// acknowledged (asking again would find the same).
func (s *Service) inDoubtOpened(ctx context.Context, ev *airlockv1.Event) error {
	f := ev.GetFailed()
	ref := callref.OfEvent(ev)
	key := ref.Key()
	s.inDoubtMu.Lock()
	defer s.inDoubtMu.Unlock()
	open, exists, err := s.openInDoubt(ctx, ref.Agent, key)
	if err != nil {
		return fmt.Errorf("count the in-doubt tasks of agent %s: %w", ref.Agent, err)
	}
	if exists {
		return nil
	}
	if most := s.cfg.MaxInDoubtPerAgent; open >= most {
		s.untracked.WithLabelValues("agent_share").Inc()
		s.deps.Log.Warn("a call ended in doubt and gets no task asking whether it happened: its agent has approval.max_in_doubt_per_agent tasks open; "+
			"answer them (console In doubt page, `airlock approvals in-doubt`) or raise the setting", "call", ref.String(), "open", open, "max", most)
		return nil
	}
	t := &airlockv1.InDoubtTask{AgentId: ref.Agent, CallId: ref.Call, Revision: ref.Rev, ThreadId: ev.GetThreadId(),
		Reason: f.GetReason(), Message: calls.Cut(f.GetMessage(), ingress.MaxReasonLen), FailedAt: ev.GetTime()}
	if call := s.callOf(ctx, ref); call != nil {
		t.Server, t.Tool = call.GetServer(), call.GetTool()
		if t.ThreadId == "" {
			t.ThreadId = call.GetThreadId()
		}
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
			s.untracked.WithLabelValues("bucket_full").Inc()
			s.deps.Log.Error("a call ended in doubt and gets no task asking whether it happened: the in-doubt bucket holds buckets.in_doubt_max_bytes; "+
				"answer open tasks (answered ones leave after approval.ended_retention), or raise the setting and run `airlock provision`", "call", ref.String(), "err", err)
			return nil
		}
		return fmt.Errorf("record the in-doubt task of %s: %w", ref, err)
	}
	return nil
}

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
	subj, err := subject.Event(ref.Agent, ref.Call, subject.Allowed)
	if err != nil {
		return nil
	}
	gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	m, err := bus.LastStored(gctx, s.deps.NC, s.deps.Config.Stream.Name, subj)
	if err != nil || m == nil {
		return nil
	}
	ev, err := envelope.Decode(m.Data, m.Header)
	if err != nil || ev.GetRevision() != ref.Rev {
		return nil
	}
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
			return nil, 0, apierr.New(apierr.NotFound, "call %s/%s has no in-doubt task: it did not end in doubt, or its task was answered more than approval.ended_retention ago (the answer is in its trail)", ref.Agent, ref.Call)
		}
	}
	e, err := s.inDoubt.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, apierr.New(apierr.NotFound, "call %s has no in-doubt task: it did not end in doubt, or its task was answered more than approval.ended_retention ago (the answer is in its trail)", ref)
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

// ListInDoubt returns the tasks (endpoint "in_doubt.list"): open ones
// oldest first, then (include_resolved) resolved ones newest first.
func (s *Service) ListInDoubt(ctx context.Context, req *airlockv1.ListInDoubtRequest) (*airlockv1.ListInDoubtResponse, error) {
	limit := int(req.GetLimit())
	if limit <= 0 || limit > defaultInDoubtLimit {
		limit = defaultInDoubtLimit
	}
	var open, done []*airlockv1.InDoubtTask
	err := bus.ReadAll(ctx, s.inDoubt.kv, ">", func(e jetstream.KeyValueEntry) {
		t := &airlockv1.InDoubtTask{}
		if err := proto.Unmarshal(e.Value(), t); err != nil {
			s.deps.Log.Error("an in-doubt task does not decode; it is left out of the list", "key", e.Key(), "err", err)
			return
		}
		if !t.GetResolved() {
			open = append(open, t)
		} else if req.GetIncludeResolved() {
			done = append(done, t)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("list in-doubt tasks: %w", err)
	}
	slices.SortFunc(open, func(a, b *airlockv1.InDoubtTask) int {
		return a.GetFailedAt().AsTime().Compare(b.GetFailedAt().AsTime())
	})
	slices.SortFunc(done, func(a, b *airlockv1.InDoubtTask) int {
		return b.GetResolvedAt().AsTime().Compare(a.GetResolvedAt().AsTime())
	})
	all := append(open, done...)
	resp := &airlockv1.ListInDoubtResponse{Tasks: all}
	if len(all) > limit {
		resp.Tasks, resp.Truncated = all[:limit], true
	}
	return resp, nil
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
		// Answered, the task leaves after the retention (its answer is in
		// the trail): what is left counts toward no agent's share.
		if err := s.inDoubt.update(ctx, key.Key(), data, rev, true); err != nil {
			if bus.Conflict(err) {
				continue // resolved meanwhile: look again
			}
			return nil, fmt.Errorf("resolve %s: %w", key, err)
		}
		return &airlockv1.ResolveInDoubtResponse{Task: t, Changed: true}, s.publishResolved(ctx, t)
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
