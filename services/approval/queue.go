package approval

import (
	"context"
	"errors"
	"fmt"
	"slices"

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
	var known []string
	for _, r := range s.index.page(call.GetAgentId(), nil, 0, func(r *entry) bool {
		return r.pending() && r.ref.Agent == call.GetAgentId() && r.thread == call.GetThreadId() && r.inQueue
	}) {
		known = append(known, domain.RefOf(r).Key())
	}
	return s.releaseAmong(ctx, rec, known)
}

// releaseAmong is release deciding among rec and the calls of its thread
// the index shows pending (known). The index follows the bucket a moment
// late, so a call may be missing from known; the thread's lock is what
// keeps such a call's turn.
func (s *Service) releaseAmong(ctx context.Context, rec *airlockv1.ApprovalRecord, known []string) error {
	call := rec.GetCall()
	keys := map[string]bool{domain.RefOf(rec).Key(): true}
	for _, key := range known {
		keys[key] = true
	}
	// Decide on fresh records, not on the index's.
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
		if !slices.ContainsFunc(fresh, func(r *airlockv1.ApprovalRecord) bool { return r.GetState() == domain.Pending }) {
			return s.retireTurn(ctx, domain.QueueKey(rec))
		}
		return nil
	}
	key, err := s.takeTurn(ctx, domain.QueueKey(next), domain.RefOf(next).Key())
	if err != nil || key == "" {
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
// turn is not over. It returns the call whose release is due from this
// caller: key once the lock names it; the lock's holder when that is a
// pending call still queued (a releaser won the turn for it and has not
// written its release yet, or stopped before it: releasing it is safe,
// Release changes only a queued record, and leaves the thread one call at
// a time); "" when a released call still holds the turn. The lock never
// moves off a pending call: a releaser whose index was a moment late, not
// yet showing the holder, moved it to the call it saw and released that
// beside the holder. A conflict is looked at again: it may be another
// caller taking the turn or the thread's last call retiring the lock
// (retireTurn), which leaves the turn free.
func (s *Service) takeTurn(ctx context.Context, lockKey, key string) (string, error) {
	for range maxCASAttempts {
		turn, conflict, err := s.tryTurn(ctx, lockKey, key)
		if !conflict {
			return turn, err
		}
	}
	return "", fmt.Errorf("take the turn of %s: gave up after %d conflicting writes", lockKey, maxCASAttempts)
}

// tryTurn is one attempt of takeTurn; conflict says another writer moved
// the lock first. The lock is written without a TTL: while it names a
// pending call it must stay, however long that call waits (a lock that
// expired under a call waiting past approval.ended_retention let a
// releaser that did not see that call release another beside it).
func (s *Service) tryTurn(ctx context.Context, lockKey, key string) (turn string, conflict bool, err error) {
	e, err := s.store.kv.Get(ctx, lockKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		if _, err := s.store.kv.Create(ctx, lockKey, []byte(key)); err != nil {
			if bus.Conflict(err) {
				return "", true, nil
			}
			return "", false, fmt.Errorf("take the turn of %s: %w", lockKey, err)
		}
		return key, false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read the turn of %s: %w", lockKey, err)
	}
	// A retired lock (retireTurn) names no turn: its thread had nothing pending.
	if holder, retired := domain.LockHolder(e.Value()); !retired && holder != key {
		cur, _, err := s.store.get(ctx, holder)
		switch {
		case err == nil && cur.GetState() == domain.Pending && cur.GetQueued():
			return holder, false, nil // its release is due, not key's
		case err == nil && cur.GetState() == domain.Pending:
			return "", false, nil // its turn is not over
		case err != nil && !errors.Is(err, errNotFound):
			return "", false, err
		}
	}
	if err := s.store.update(ctx, lockKey, []byte(key), e.Revision(), false); err != nil {
		if bus.Conflict(err) {
			return "", true, nil
		}
		return "", false, fmt.Errorf("take the turn of %s: %w", lockKey, err)
	}
	return key, false, nil
}

// retireTurn gives a thread's lock the ended records' TTL
// (approval.ended_retention) once no call of the thread is pending: the
// server then removes it, as it removes the records, unless a new call of
// the thread takes the turn first (tryTurn writes it without a TTL). An
// agent opening a fresh thread per call otherwise left a lock per call in
// the bucket for ever (its locks count toward its share). The rewrite is
// a compare-and-set: a turn taken meanwhile wins. The rewritten lock is
// marked retired (domain.RetiredLock), and a retired lock is never
// rewritten here: the sweeper retiring the locks no release retired
// (retireStranded) gives each its TTL once, not a later expiry at every
// round. A bucket provisioned before it took per-key TTLs keeps the lock,
// as it keeps ended records.
func (s *Service) retireTurn(ctx context.Context, lockKey string) error {
	if s.store.endedTTL <= 0 {
		return nil
	}
	e, err := s.store.kv.Get(ctx, lockKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the turn of %s: %w", lockKey, err)
	}
	holder, retired := domain.LockHolder(e.Value())
	if retired {
		return nil // it has its TTL already
	}
	cur, _, err := s.store.get(ctx, holder)
	switch {
	case err == nil && cur.GetState() == domain.Pending:
		return nil // taken meanwhile
	case err != nil && !errors.Is(err, errNotFound):
		return err
	}
	if err := s.store.update(ctx, lockKey, domain.RetiredLock(holder), e.Revision(), true); err != nil && !bus.Conflict(err) {
		return fmt.Errorf("retire the turn of %s: %w", lockKey, err)
	}
	return nil
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

// retireStranded retires (retireTurn) the locks the index shows with
// nothing of their thread pending that no release retired: the release
// after the thread's last call failed or was cut short (its replica
// stopped between ending the call and releasing), and the lock, without a
// TTL, would stay in the bucket counting toward its agent's share until a
// later call of the thread ended — for a thread never used again, for
// ever. The index follows the bucket a moment late; retireTurn decides on
// the bucket.
func (s *Service) retireStranded(ctx context.Context) {
	if s.store.endedTTL <= 0 {
		return // the bucket takes no per-key TTL: locks stay, as ended records do
	}
	for _, lockKey := range s.index.strandedLocks() {
		if ctx.Err() != nil {
			return
		}
		if err := s.retireTurn(ctx, lockKey); err != nil {
			s.deps.Log.Warn("retiring a thread's lock failed; will retry", "queue", lockKey, "err", err)
		}
	}
}
