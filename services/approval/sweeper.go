package approval

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/approval/internal/domain"
	"github.com/airlock-gate/airlock/services/shared/envelope"
)

// settleGrace is how long after a decision the sweeper waits before checking
// that its event reached the stream (the deciding replica publishes it
// within milliseconds); settleHorizon is how far back a restarted replica
// checks.
const (
	settleGrace   = 3 * time.Second
	settleHorizon = 24 * time.Hour
)

// sweep runs every approval.sweep_interval until ctx ends. Every timer is
// derived from the records (deadline, created_at + remind_after /
// escalate_after, the reminded / escalated flags), so a restarted replica
// picks them up, and with several replicas each firing is one CAS write that
// only one of them wins.
func (s *Service) sweep(ctx context.Context) {
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.sweepOnce(ctx)
		}
	}
}

// sweepOnce expires the records whose deadline passed and fires the
// reminders and escalations that fell due: it looks only at the records
// due (index.dueRecords), never at every pending one.
func (s *Service) sweepOnce(ctx context.Context) {
	now := s.now()
	s.pending.Set(float64(s.index.pendingCount()))
	if _, err := s.pastRefusalMark(ctx); err != nil && ctx.Err() == nil {
		// One miss is a server still starting (its first sweep can come
		// before JetStream answers: "no responders"); a second in a row is
		// worth an operator's look.
		if s.fillMisses.Add(1) > 1 {
			s.deps.Log.Warn("reading how full the approvals bucket is failed; will retry", "err", err, "misses_in_a_row", s.fillMisses.Load())
		}
	} else {
		s.fillMisses.Store(0)
	}
	for _, rec := range s.index.dueRecords(now) {
		if ctx.Err() != nil {
			return
		}
		key := domain.RefOf(rec).Key()
		if !now.Before(domain.Deadline(rec)) {
			if _, _, _, err := s.transition(ctx, key, func(cur *airlockv1.ApprovalRecord) (domain.Outcome, error) {
				return domain.Expire(cur, s.now()), nil
			}); err != nil && !errors.Is(err, errNotFound) {
				s.deps.Log.Warn("expiring a call failed; will retry", "key", key, "err", err)
			}
			continue
		}
		if _, _, due := domain.DueTimer(rec, now); due {
			s.fireTimer(ctx, key)
		}
	}
	s.releaseQueues(ctx, s.index.queuedRecords())
	s.retireStranded(ctx)
	s.takeOver(ctx)
	s.settle(ctx)
	s.sweepGrants(ctx)
	s.sweepInDoubt(ctx)
}

// fireTimer marks the due reminder or escalation done with CAS and, if this
// replica won, re-notifies every channel. An escalation of a call no
// replica is announcing names this replica its announcer in the same
// write, so the escalation channels are told even if it stops meanwhile
// (takeOver).
func (s *Service) fireTimer(ctx context.Context, key string) {
	var fired domain.Timer
	// held: key taken in s.announcing (before the write naming this
	// replica), until announceOwned takes it over.
	held := s.announcing.take(key)
	owned := false
	rec, wrote, _, err := mutate(ctx, s.store, key, func(cur *airlockv1.ApprovalRecord) (*airlockv1.ApprovalRecord, struct{}, error) {
		next, t, _ := domain.DueTimer(cur, s.now())
		fired = t
		owned = held && next != nil && t == domain.Escalate && !next.GetQueued() && next.GetAnnouncer() == ""
		if owned {
			next.Announcer = s.instance
		}
		return next, struct{}{}, nil
	})
	if !owned && held {
		s.announcing.drop(key)
	}
	if err != nil {
		if owned {
			s.announcing.drop(key)
		}
		s.deps.Log.Warn("reminder or escalation failed; will retry", "key", key, "err", err)
		return
	}
	if !wrote {
		if owned {
			s.announcing.drop(key)
		}
		return
	}
	s.deps.Log.Info("call still pending", "key", key, "timer", fired, "approvers", rec.GetDecision().GetApprovers())
	if rec.GetQueued() {
		// A call waiting its thread's turn is on no channel yet: it is
		// announced when its turn comes, to the widened approvers and the
		// escalation channels too (release).
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		s.fan.remind(context.Background(), rec, string(fired))
		if fired != domain.Escalate {
			return
		}
		// Channels routed only on escalation ("escalate:pagerduty") are
		// told now, and their refs stored so the outcome reaches them.
		if owned {
			s.announceOwned(key, rec)
			return
		}
		if err := <-s.announce(key, rec); err != nil {
			s.deps.Log.Warn("announcing an escalated call to its escalation channels failed", "key", key, "err", err)
		}
	}()
}

// settle makes sure every decision reached the events stream: a replica
// that wrote a decision and died before publishing its event leaves a
// decided record without one. Records this process published itself are
// skipped; for the others the stream is asked and the event (deterministic
// id) published if missing.
func (s *Service) settle(ctx context.Context) {
	now := s.now()
	recs := s.index.takeUnsettled(now.Add(-settleGrace))
	if len(recs) == 0 {
		return
	}
	stream, err := s.deps.JS.Stream(ctx, s.deps.Config.Stream.Name)
	if err != nil {
		s.deps.Log.Warn("cannot check decision events; the sweeper will retry", "err", err)
		for _, rec := range recs {
			s.index.unsettle(rec)
		}
		return
	}
	for _, rec := range recs {
		if rec.GetUpdatedAt().AsTime().Before(now.Add(-settleHorizon)) {
			continue
		}
		// The index holds records abridged: the event carries the call whole.
		key := domain.RefOf(rec).Key()
		full, _, err := s.store.get(ctx, key)
		if err != nil {
			if !errors.Is(err, errNotFound) {
				s.deps.Log.Warn("cannot read a decided record; the sweeper will retry", "key", key, "err", err)
				s.index.unsettle(rec)
			}
			continue
		}
		rec = full
		ev, err := domain.FinalEvent(rec)
		if err != nil || ev == nil {
			continue
		}
		stored, err := eventStored(ctx, stream, ev)
		if err != nil {
			// Check again at the next sweep: forgetting it would leave the
			// decision out of the stream until this replica restarts.
			s.deps.Log.Warn("cannot check a decision event; the sweeper will retry", "call", ev.CallId, "err", err)
			s.index.unsettle(rec)
			continue
		}
		if stored {
			continue
		}
		// Sealed as publishDecision seals it: an unsealed `approved` is
		// refused by the executor and the approved call would never run.
		if err := s.decisions.SealDecision(ev); err != nil {
			s.deps.Log.Error("sealing a missing decision event failed", "call", ev.CallId, "err", err)
			continue
		}
		if err := s.publish(ctx, ev); err != nil {
			s.deps.Log.Error("republishing a decision event failed; the sweeper will retry", "call", ev.CallId, "type", envelope.TypeOf(ev), "err", err)
			s.index.unsettle(rec)
			continue
		}
		s.deps.Log.Warn("published a decision event that was missing (its writer stopped before publishing)", "call", ev.CallId, "type", envelope.TypeOf(ev))
		s.updateChannels(rec)
	}
}

// eventStored reports whether the stream holds ev (or a later revision's
// event of the same type, which implies ev's revision was dealt with).
func eventStored(ctx context.Context, stream jetstream.Stream, ev *airlockv1.Event) (bool, error) {
	subj, err := envelope.Subject(ev)
	if err != nil {
		return false, err
	}
	m, err := stream.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up %s: %w", subj, err)
	}
	if m.Header.Get(jetstream.MsgIDHeader) == ev.EventId {
		return true, nil
	}
	last, err := envelope.Decode(m.Data, m.Header)
	if err != nil {
		return false, nil
	}
	return last.GetRevision() >= ev.GetRevision(), nil
}
