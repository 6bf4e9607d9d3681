package approval

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/approval/internal/domain"
	"github.com/airlock-gate/airlock/services/shared/bus"
)

// release gives the thread of rec (a call of a queue_per_thread rule) its
// next turn, if its current one is over: the first-received queued call of
// the thread is released and announced. Which call holds the turn is a
// lock in the approvals bucket (domain.QueueKey), moved with
// compare-and-set, so however many replicas and handlers release the same
// thread at once, one call is released at a time. It is called when a
// queued call arrives, when a call of the thread is decided, expires or is
// canceled, and by the sweeper (which also repairs a release a crash cut
// short).
func (s *Service) release(ctx context.Context, rec *airlockv1.ApprovalRecord) error {
	if !domain.InQueue(rec) {
		return nil
	}
	call := rec.GetCall()
	keys := map[string]bool{domain.RefOf(rec).Key(): true}
	for _, r := range s.index.page(call.GetAgentId(), nil, 0, func(r *entry) bool {
		return r.pending() && r.ref.Agent == call.GetAgentId() && r.thread == call.GetThreadId() && r.inQueue
	}) {
		keys[domain.RefOf(r).Key()] = true
	}
	// The index follows the bucket a moment late: decide on fresh records.
	var fresh []*airlockv1.ApprovalRecord
	for key := range keys {
		r, _, err := s.store.get(ctx, key)
		if errors.Is(err, errNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		fresh = append(fresh, r)
	}
	next, ok := domain.Turn(fresh)
	if !ok {
		return nil
	}
	key := domain.RefOf(next).Key()
	won, err := s.takeTurn(ctx, domain.QueueKey(next), key)
	if err != nil || !won {
		return err
	}
	// The release names this replica the call's announcer in the same
	// write, so a replica that stops before every channel answered leaves
	// it to another (takeOver). Taken before the write: a record naming
	// this replica whose key is free is an orphan.
	if !s.announcing.take(key) {
		return nil // this process announces it already; the sweeper retries
	}
	released, wrote, _, err := mutate(ctx, s.store, key, func(cur *airlockv1.ApprovalRecord) (*airlockv1.ApprovalRecord, struct{}, error) {
		next := domain.Release(cur)
		if next != nil {
			next.Announcer = s.instance
		}
		return next, struct{}{}, nil
	})
	if err != nil || !wrote {
		s.announcing.drop(key)
		return err
	}
	s.deps.Log.Info("queued call released: its turn in the thread", "key", key, "thread", call.GetThreadId())
	s.announceOwned(key, released)
	return nil
}

// takeTurn moves the queue's lock to key, unless it names a call whose
// turn is not over (still pending and released). It reports whether this
// caller moved it.
func (s *Service) takeTurn(ctx context.Context, lockKey, key string) (bool, error) {
	e, err := s.store.kv.Get(ctx, lockKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		// A lock leaves the bucket after the retention, as an ended record
		// does (every move of the turn writes it again): a thread whose last
		// call ended long ago keeps no key, so an agent opening a thread per
		// call fills nothing for ever (its locks count toward its share).
		var opts []jetstream.KVCreateOpt
		if s.store.endedTTL > 0 {
			opts = append(opts, jetstream.KeyTTL(s.store.endedTTL))
		}
		if _, err := s.store.kv.Create(ctx, lockKey, []byte(key), opts...); err != nil {
			if bus.Conflict(err) {
				return false, nil
			}
			return false, fmt.Errorf("take the turn of %s: %w", lockKey, err)
		}
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("read the turn of %s: %w", lockKey, err)
	}
	if holder := string(e.Value()); holder != key {
		cur, _, err := s.store.get(ctx, holder)
		switch {
		case err == nil && cur.GetState() == domain.Pending && !cur.GetQueued():
			return false, nil // its turn is not over
		case err != nil && !errors.Is(err, errNotFound):
			return false, err
		}
	}
	if err := s.store.update(ctx, lockKey, []byte(key), e.Revision(), true); err != nil {
		if bus.Conflict(err) {
			return false, nil
		}
		return false, fmt.Errorf("take the turn of %s: %w", lockKey, err)
	}
	return true, nil
}

// releaseQueues gives every thread with queued calls its next turn (the
// sweeper's repair pass).
func (s *Service) releaseQueues(ctx context.Context, pending []*airlockv1.ApprovalRecord) {
	seen := map[string]bool{}
	for _, rec := range pending {
		if !rec.GetQueued() || !domain.InQueue(rec) || seen[domain.QueueKey(rec)] {
			continue
		}
		seen[domain.QueueKey(rec)] = true
		if err := s.release(ctx, rec); err != nil {
			s.deps.Log.Warn("releasing a thread's next queued call failed; will retry", "queue", domain.QueueKey(rec), "err", err)
		}
	}
}
