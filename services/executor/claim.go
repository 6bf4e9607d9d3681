package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/ledger"
)

// Liveness holds the heartbeat of long executions (the executions bucket).
type Liveness interface {
	// Beat records that the handling holding claim is alive.
	Beat(ctx context.Context, ref callref.Ref, rec *airlockv1.ExecutionRecord) error
	// Look returns a value that changes with every Beat of ref (0: none yet).
	Look(ctx context.Context, ref callref.Ref) (uint64, error)
}

// Verdict says what a handler must do after claiming.
type Verdict int

const (
	// Run: this handling owns the execution and must start the tool.
	Run Verdict = iota + 1
	// Done: the revision has ended; nothing to do.
	Done
	// Busy: a live handling owns it; look again later.
	Busy
	// Orphaned: a `started` has no end and its owner shows no sign of life
	// (it died mid-run): the caller runs an idempotent tool again (TakeOver)
	// or ends the call indeterminate.
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

// Claim is the outcome of claiming: the verdict, the state as last seen,
// and for Run the sequence of the `started` this handling stored.
type Claim struct {
	Verdict Verdict
	State   ledger.State
	Seq     uint64
}

// maxAppendAttempts bounds compare-and-append retries; each conflict means
// another event of the call (a notification, a refused decision) was stored.
const maxAppendAttempts = 50

// attemptTimeout bounds one append to or one read of the ledger when an
// end is recorded: a connection to a hung or paused node is left for
// another within a few seconds (bus.MaxPingsOutstanding pings), and the
// next attempt goes there.
const attemptTimeout = 5 * time.Second

// retryPause separates attempts that failed other than by a conflict.
const retryPause = 200 * time.Millisecond

// Claimer is the exactly-once logic, independent of the broker:
//
//   - a revision is claimed by appending its `started` event (attempt 1,
//     a claim token random per handling) with compare-and-append: of any
//     number of handlings, one appends it and runs the tool;
//   - a terminal event (completed / failed) is appended only after checking
//     that none is stored and that the `started` is still this handling's,
//     again with compare-and-append, so a revision ends exactly once;
//   - an owner that runs for long heart-beats its liveness record; a
//     `started` without an end whose liveness record does not change for the
//     watch period belonged to a handling that died.
type Claimer struct {
	ledger   ledger.Ledger
	liveness Liveness
	// watch is how long an owner is observed for a heartbeat; it must exceed
	// the heartbeat period with margin.
	watch time.Duration
	wait  func(ctx context.Context, d time.Duration) error
	// attemptTimeout bounds each append and read of End (attemptTimeout).
	attemptTimeout time.Duration
}

// NewClaimer returns a Claimer whose owners heart-beat every heartbeat and
// whose observers presume an owner dead after 2 × heartbeat without one.
func NewClaimer(l ledger.Ledger, liveness Liveness, heartbeat time.Duration) *Claimer {
	return &Claimer{ledger: l, liveness: liveness, watch: 2 * heartbeat, wait: sleepCtx, attemptTimeout: attemptTimeout}
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

// Claim appends started (whose Started.claim is this handling's token) to
// the empty ledger: a call runs at most one revision (a revision follows
// only changes requested on the previous one, which never ran), so its
// first executor event is its only claim. When the ledger is not empty it
// reads the revision: ended (or refused) → Done; started by this handling
// (a publish whose ack was lost) → Run; started by another → Busy or
// Orphaned after watching its owner.
func (c *Claimer) Claim(ctx context.Context, ref callref.Ref, started *airlockv1.Event) (Claim, error) {
	var after uint64
	for range maxAppendAttempts {
		seq, err := c.ledger.Append(ctx, started, after)
		if err == nil {
			return Claim{Verdict: Run, Seq: seq}, nil
		}
		if !errors.Is(err, ledger.ErrConflict) {
			return Claim{}, fmt.Errorf("claim %s: %w", ref, err)
		}
		st, err := c.ledger.Inspect(ctx, ref)
		if err != nil {
			return Claim{}, fmt.Errorf("claim %s: %w", ref, err)
		}
		switch {
		case st.Ended:
			return Claim{Verdict: Done, State: st}, nil
		case st.Started != nil && st.Started.GetClaim() == started.GetStarted().GetClaim():
			return Claim{Verdict: Run, State: st, Seq: st.StartedSeq}, nil
		case st.Started != nil:
			return c.observe(ctx, ref, st)
		}
		after = st.Last
	}
	return Claim{}, fmt.Errorf("claim %s: the call kept changing; will retry", ref)
}

// Inspect reads the revision and, when a `started` has no end, watches its
// owner: Done, Busy, Orphaned, or Run (nothing started yet: State.Last is
// where a claim would be appended).
func (c *Claimer) Inspect(ctx context.Context, ref callref.Ref) (Claim, error) {
	st, err := c.ledger.Inspect(ctx, ref)
	if err != nil {
		return Claim{}, fmt.Errorf("inspect %s: %w", ref, err)
	}
	switch {
	case st.Ended:
		return Claim{Verdict: Done, State: st}, nil
	case st.Started != nil:
		return c.observe(ctx, ref, st)
	}
	return Claim{Verdict: Run, State: st}, nil
}

// observe watches the owner of st.Started for the watch period: it ends →
// Done; its liveness record changes → Busy; nothing → Orphaned.
func (c *Claimer) observe(ctx context.Context, ref callref.Ref, st ledger.State) (Claim, error) {
	first, err := c.liveness.Look(ctx, ref)
	if err != nil {
		return Claim{}, fmt.Errorf("observe %s: %w", ref, err)
	}
	// Look several times, so that a duplicate of a call about to finish
	// does not wait the whole period.
	const looks = 8
	for range looks {
		if err := c.wait(ctx, c.watch/looks); err != nil {
			return Claim{}, err
		}
		now, err := c.ledger.Inspect(ctx, ref)
		if err != nil {
			return Claim{}, fmt.Errorf("observe %s: %w", ref, err)
		}
		switch {
		case now.Ended:
			return Claim{Verdict: Done, State: now}, nil
		case now.StartedSeq != st.StartedSeq:
			return Claim{Verdict: Busy, State: now}, nil // taken over meanwhile
		}
		beat, err := c.liveness.Look(ctx, ref)
		if err != nil {
			return Claim{}, fmt.Errorf("observe %s: %w", ref, err)
		}
		if beat != first {
			return Claim{Verdict: Busy, State: now}, nil
		}
		st = now
	}
	return Claim{Verdict: Orphaned, State: st}, nil
}

// TakeOver appends ev — a `started` of the next attempt (an idempotent tool
// run again) or a `failed` (the call ends indeterminate) — after the
// orphaned state it follows. Run: this handling took it over (ev is stored,
// at Seq). Busy: something else was stored first; look again.
func (c *Claimer) TakeOver(ctx context.Context, orphan ledger.State, ev *airlockv1.Event) (Claim, error) {
	seq, err := c.ledger.Append(ctx, ev, orphan.Last)
	if errors.Is(err, ledger.ErrConflict) {
		return Claim{Verdict: Busy, State: orphan}, nil
	}
	if err != nil {
		return Claim{}, err
	}
	return Claim{Verdict: Run, State: orphan, Seq: seq}, nil
}

// Refuse ends a revision that must not run (arguments not approved, tool
// unknown) with failed, unless it was claimed or ended before: a refused
// revision never runs later. Run: the refusal is stored. Otherwise the
// verdict of what is there (Done, Busy, Orphaned).
func (c *Claimer) Refuse(ctx context.Context, ref callref.Ref, failed *airlockv1.Event) (Claim, error) {
	var after uint64
	for range maxAppendAttempts {
		seq, err := c.ledger.Append(ctx, failed, after)
		if err == nil {
			return Claim{Verdict: Run, Seq: seq}, nil
		}
		if !errors.Is(err, ledger.ErrConflict) {
			return Claim{}, fmt.Errorf("refuse %s: %w", ref, err)
		}
		st, err := c.ledger.Inspect(ctx, ref)
		if err != nil {
			return Claim{}, fmt.Errorf("refuse %s: %w", ref, err)
		}
		switch {
		case st.Ended:
			return Claim{Verdict: Done, State: st}, nil
		case st.Started != nil:
			return c.observe(ctx, ref, st)
		}
		after = st.Last
	}
	return Claim{}, fmt.Errorf("refuse %s: the call kept changing; will retry", ref)
}

// End appends terminal (completed or failed, carrying this handling's
// claim token) for the handling that stored the `started` at startedSeq.
// It returns false when the revision was ended or taken over by another
// handling meanwhile: the stream keeps theirs and this result is dropped.
//
// ctx is the whole budget; each append and each read of the ledger gets at
// most attemptTimeout of it. An append that fails other than by a conflict
// (a stalled connection, a stream without a leader for a moment) may still
// have landed, its ack lost: the ledger is read back, the end recognised by
// this handling's claim token, and otherwise appended again after what the
// read found. So the owner's result lands as soon as the bus answers again,
// instead of one append holding the whole budget while an observer presumes
// the owner dead and ends the call indeterminate. Appending again is safe:
// every attempt expects the sequence it read, so of all of them and any
// take-over at most one is stored.
func (c *Claimer) End(ctx context.Context, ref callref.Ref, terminal *airlockv1.Event, startedSeq uint64) (bool, error) {
	after := startedSeq
	mine := ledger.ClaimOf(terminal)
	var failure error // the last failure that was not a conflict
	for conflicts := 0; conflicts < maxAppendAttempts; {
		actx, cancel := context.WithTimeout(ctx, c.attemptTimeout)
		_, err := c.ledger.Append(actx, terminal, after)
		cancel()
		if err == nil {
			return true, nil
		}
		if errors.Is(err, ledger.ErrConflict) {
			conflicts++
		} else {
			failure = err
			if werr := c.pause(ctx); werr != nil {
				return false, fmt.Errorf("end %s: %w", ref, failure)
			}
		}
		rctx, cancel := context.WithTimeout(ctx, c.attemptTimeout)
		st, err := c.ledger.Inspect(rctx, ref)
		cancel()
		switch {
		case err != nil:
			// Unreadable for now: append again after the same sequence
			// (refused if anything landed since, then read again).
			failure = err
			if werr := c.pause(ctx); werr != nil {
				return false, fmt.Errorf("end %s: %w", ref, failure)
			}
		case st.Last < startedSeq:
			// A read that misses this handling's own `started` is older
			// than the ledger (a lagging replica): it decides nothing.
			if werr := c.pause(ctx); werr != nil {
				return false, fmt.Errorf("end %s: the ledger read back is older than this handling's claim", ref)
			}
		case st.Ended || st.StartedSeq != startedSeq:
			// Ended (by a take-over, or by this very end whose ack was
			// lost), or taken over for another attempt.
			return st.Ended && st.EndedBy == mine, nil
		default:
			after = st.Last
		}
	}
	return false, fmt.Errorf("end %s: the call kept changing; will retry", ref)
}

// pause waits a moment between attempts that failed other than by a
// conflict (an error returned at once must not spin), or returns ctx's
// error when the budget is spent.
func (c *Claimer) pause(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return c.wait(ctx, retryPause)
}
