package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// ClaimStore holds one ExecutionRecord per call revision with
// compare-and-set semantics (JetStream KV in production, see KVStore).
type ClaimStore interface {
	// Create stores rec under key only if key does not exist yet; otherwise
	// it returns an error wrapping ErrClaimExists.
	Create(ctx context.Context, key string, rec *airlockv1.ExecutionRecord) (rev uint64, err error)
	// Get returns the record and its revision.
	Get(ctx context.Context, key string) (*airlockv1.ExecutionRecord, uint64, error)
	// Update replaces the record only if its revision is still rev;
	// otherwise it returns an error wrapping ErrClaimChanged.
	Update(ctx context.Context, key string, rec *airlockv1.ExecutionRecord, rev uint64) (uint64, error)
}

var (
	// ErrClaimExists: another message or replica claimed the call revision first.
	ErrClaimExists = errors.New("the call revision is already claimed")
	// ErrClaimChanged: the record changed since it was read (a concurrent
	// claim, heartbeat or finish won the compare-and-set).
	ErrClaimChanged = errors.New("the execution record changed concurrently")
)

// Verdict says what a handler must do after claiming.
type Verdict int

const (
	// Run: this executor owns the claim and must start the tool.
	Run Verdict = iota + 1
	// Done: the call revision has ended (or is settled by someone else); nothing to run.
	Done
	// Busy: a live executor is running it; look again later.
	Busy
	// Orphaned: the claim is RUNNING but its owner stopped heart-beating
	// (it died mid-run). The caller retries it (idempotent tools, Retry) or
	// ends it indeterminate (Abandon).
	Orphaned
)

func (v Verdict) String() string {
	switch v {
	case Run:
		return "run"
	case Done:
		return "done"
	case Busy:
		return "busy"
	case Orphaned:
		return "orphaned"
	}
	return fmt.Sprintf("verdict(%d)", int(v))
}

// Claim is the outcome of claiming: the verdict and the record as last seen.
type Claim struct {
	Verdict Verdict
	Record  *airlockv1.ExecutionRecord
	Rev     uint64
}

// ClaimRequest identifies what is claimed.
type ClaimRequest struct {
	// Key is "<call>.<revision>".
	Key            string
	CallID         string
	Revision       uint32
	Digest         string
	IdempotencyKey string
}

// Claimer is the exactly-once logic, independent of the broker: a call
// revision is claimed by creating its record (whoever creates it runs the
// tool), the owner heart-beats the record while the tool runs, and a claim
// that stops changing while RUNNING is orphaned.
//
// Why a heartbeat rather than "a redelivery means the owner died": the same
// call revision can arrive in several messages at once (duplicate approvals,
// an allowed and an approved), handled by different replicas; only a
// record that stops changing tells that its owner is gone.
type Claimer struct {
	store      ClaimStore
	executorID string
	// watch is how long a RUNNING record is observed for a heartbeat; it
	// must exceed the heartbeat period (see Heartbeat) with margin.
	watch time.Duration
	now   func() time.Time
	wait  func(ctx context.Context, d time.Duration) error
}

// NewClaimer returns a Claimer for executorID whose owners heart-beat every
// heartbeat and whose observers presume an owner dead after 2 × heartbeat without change.
func NewClaimer(store ClaimStore, executorID string, heartbeat time.Duration) *Claimer {
	return &Claimer{store: store, executorID: executorID, watch: 2 * heartbeat, now: time.Now, wait: sleepCtx}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Terminal reports whether rec has ended (completed or failed).
func Terminal(rec *airlockv1.ExecutionRecord) bool {
	s := rec.GetState()
	return s == airlockv1.ExecutionState_EXECUTION_STATE_COMPLETED || s == airlockv1.ExecutionState_EXECUTION_STATE_FAILED
}

// Claim creates the record as RUNNING, attempt 1, owned by this executor
// (verdict Run). When the record exists it inspects it: ended → Done;
// changing (its owner heart-beats or finishes) → Busy; unchanged for the
// watch period → Orphaned.
func (c *Claimer) Claim(ctx context.Context, r ClaimRequest) (Claim, error) {
	now := timestamppb.New(c.now())
	rec := &airlockv1.ExecutionRecord{
		CallId: r.CallID, Revision: r.Revision, State: airlockv1.ExecutionState_EXECUTION_STATE_RUNNING,
		ExecutorId: c.executorID, Attempt: 1, IdempotencyKey: r.IdempotencyKey, ArgumentsDigest: r.Digest,
		ClaimedAt: now, StartedAt: now,
	}
	rev, err := c.store.Create(ctx, r.Key, rec)
	if err == nil {
		return Claim{Verdict: Run, Record: rec, Rev: rev}, nil
	}
	if !errors.Is(err, ErrClaimExists) {
		return Claim{}, fmt.Errorf("claim %s: %w", r.Key, err)
	}
	return c.Inspect(ctx, r.Key)
}

// Inspect looks at an existing claim: ended → Done; changing (its owner
// heart-beats or finishes) → Busy; unchanged for the watch period → Orphaned.
func (c *Claimer) Inspect(ctx context.Context, key string) (Claim, error) {
	rec, rev, err := c.store.Get(ctx, key)
	if err != nil {
		return Claim{}, fmt.Errorf("read claim %s: %w", key, err)
	}
	if Terminal(rec) {
		return Claim{Verdict: Done, Record: rec, Rev: rev}, nil
	}
	// Look several times during the watch period, so that a duplicate of a
	// call that is about to finish does not wait the whole period.
	const looks = 8
	for i := 0; i < looks; i++ {
		if err := c.wait(ctx, c.watch/looks); err != nil {
			return Claim{}, err
		}
		rec2, rev2, err := c.store.Get(ctx, key)
		if err != nil {
			return Claim{}, fmt.Errorf("read claim %s: %w", key, err)
		}
		switch {
		case Terminal(rec2):
			return Claim{Verdict: Done, Record: rec2, Rev: rev2}, nil
		case rev2 != rev:
			return Claim{Verdict: Busy, Record: rec2, Rev: rev2}, nil
		}
		rec, rev = rec2, rev2
	}
	return Claim{Verdict: Orphaned, Record: rec, Rev: rev}, nil
}

// Refuse claims the call revision as already FAILED with reason, so that
// it never runs, whatever message arrives later. Verdict Run means this
// caller settled it and must publish the failure; Done means the revision
// was claimed before (by a run or another refusal) and nothing is to be done
// by this caller beyond making sure a terminal record has its event.
func (c *Claimer) Refuse(ctx context.Context, r ClaimRequest, reason string) (Claim, error) {
	now := timestamppb.New(c.now())
	rec := &airlockv1.ExecutionRecord{
		CallId: r.CallID, Revision: r.Revision, State: airlockv1.ExecutionState_EXECUTION_STATE_FAILED,
		ExecutorId: c.executorID, IdempotencyKey: r.IdempotencyKey, ArgumentsDigest: r.Digest,
		ClaimedAt: now, FinishedAt: now, Outcome: reason,
	}
	rev, err := c.store.Create(ctx, r.Key, rec)
	if err == nil {
		return Claim{Verdict: Run, Record: rec, Rev: rev}, nil
	}
	if !errors.Is(err, ErrClaimExists) {
		return Claim{}, fmt.Errorf("claim %s: %w", r.Key, err)
	}
	existing, erev, err := c.store.Get(ctx, r.Key)
	if err != nil {
		return Claim{}, fmt.Errorf("read claim %s: %w", r.Key, err)
	}
	return Claim{Verdict: Done, Record: existing, Rev: erev}, nil
}

// Retry takes over an orphaned claim for another attempt with the same
// idempotency key. Verdict Run: this executor now owns attempt+1. Busy:
// another replica took it over first.
func (c *Claimer) Retry(ctx context.Context, key string, orphan Claim) (Claim, error) {
	rec := proto.Clone(orphan.Record).(*airlockv1.ExecutionRecord)
	rec.Attempt++
	rec.ExecutorId = c.executorID
	rec.StartedAt = timestamppb.New(c.now())
	rev, err := c.store.Update(ctx, key, rec, orphan.Rev)
	if errors.Is(err, ErrClaimChanged) {
		return Claim{Verdict: Busy, Record: orphan.Record, Rev: orphan.Rev}, nil
	}
	if err != nil {
		return Claim{}, fmt.Errorf("take over claim %s: %w", key, err)
	}
	return Claim{Verdict: Run, Record: rec, Rev: rev}, nil
}

// Abandon ends an orphaned claim FAILED with outcome indeterminate: the
// tool may or may not have run, and it is not safe to run again. Verdict
// Run: this caller settled it and must publish the failure; Busy: another
// replica settled or took it first.
func (c *Claimer) Abandon(ctx context.Context, key string, orphan Claim) (Claim, error) {
	rev, rec, err := c.Finish(ctx, key, orphan, airlockv1.ExecutionState_EXECUTION_STATE_FAILED, ReasonIndeterminate)
	if errors.Is(err, ErrClaimChanged) {
		return Claim{Verdict: Busy, Record: orphan.Record, Rev: orphan.Rev}, nil
	}
	if err != nil {
		return Claim{}, err
	}
	return Claim{Verdict: Run, Record: rec, Rev: rev}, nil
}

// Finish records the end of the claim cl. It fails with ErrClaimChanged
// when the claim was taken over meanwhile.
func (c *Claimer) Finish(ctx context.Context, key string, cl Claim, state airlockv1.ExecutionState, outcome string) (uint64, *airlockv1.ExecutionRecord, error) {
	rec := proto.Clone(cl.Record).(*airlockv1.ExecutionRecord)
	rec.State, rec.Outcome, rec.FinishedAt = state, outcome, timestamppb.New(c.now())
	rev, err := c.store.Update(ctx, key, rec, cl.Rev)
	if err != nil {
		return 0, nil, fmt.Errorf("finish claim %s: %w", key, err)
	}
	return rev, rec, nil
}

// Heartbeat rewrites the claim unchanged so that its revision moves on,
// which is how observers tell a live owner from a dead one. It returns the
// new revision, or an error wrapping ErrClaimChanged when the claim was
// taken over (the owner has lost it and must not publish a result).
func (c *Claimer) Heartbeat(ctx context.Context, key string, cl Claim) (uint64, error) {
	rev, err := c.store.Update(ctx, key, cl.Record, cl.Rev)
	if err != nil {
		return 0, fmt.Errorf("heartbeat claim %s: %w", key, err)
	}
	return rev, nil
}
