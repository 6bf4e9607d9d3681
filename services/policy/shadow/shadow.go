// Package shadow runs a candidate policy beside the policy in force: every
// live decision is offered to it, it decides the same call on its own
// goroutine, and where the two disagree a divergence is recorded. The
// candidate decides nothing: the live decision is made, sealed and
// published without waiting for it, and whatever the candidate does (fail,
// panic, take too long, fall behind) changes no live decision. It knows
// nothing of NATS; the policy service wires it to the bucket and stream.
package shadow

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// Candidate is a compiled candidate policy ready to decide.
type Candidate struct {
	// Digest names the candidate (decide.Code's hash).
	Digest string
	// Decide decides call as the candidate would, given the live decision
	// (for the standing grant it used). It must not spend anything or
	// publish anything.
	Decide func(ctx context.Context, call *airlockv1.ToolCall, live *airlockv1.Decision, now time.Time) (*airlockv1.Decision, error)
}

// Divergence is one live call the candidate decided otherwise.
type Divergence struct {
	Call            *airlockv1.ToolCall
	Live, Candidate *airlockv1.Decision
	Digest          string
}

// Diverges reports whether the candidate's decision differs from the live
// one in what happens to the call: allowed, asked about or denied.
func Diverges(live, candidate *airlockv1.Decision) bool {
	return live.GetAction() != candidate.GetAction()
}

// Stats counts what a Runner has done since it was made.
type Stats struct {
	// Evaluated calls the candidate decided; Diverged of them differed;
	// Failed the candidate could not decide (error, panic, deadline);
	// Dropped were never offered to it because the queue was full.
	Evaluated, Diverged, Failed, Dropped uint64
}

// Options tune a Runner; the zero value is fine.
type Options struct {
	// Queue bounds the decisions waiting for the candidate (default 1024);
	// beyond it decisions are dropped, never waited for.
	Queue int
	// Timeout bounds one candidate decision (default 250ms).
	Timeout time.Duration
	// Now is the clock (default time.Now), for a live decision that carries
	// no decided_at.
	Now func() time.Time
}

type job struct {
	lane int
	cand *Candidate
	call *airlockv1.ToolCall
	live *airlockv1.Decision
	at   time.Time
}

// Runner runs the candidate in force, if any, on the decisions offered to
// it. Offer is safe to call from any goroutine; Run drains the queue.
type Runner struct {
	cand   atomic.Pointer[Candidate]
	jobs   chan job
	opts   Options
	log    *slog.Logger
	record func(context.Context, Divergence) error

	// lanes count the queued decisions of the agents that hash to each
	// lane: one agent flooding its own calls fills at most a quarter of
	// the queue, so it cannot keep the candidate from other agents' calls.
	lanes   [laneCount]atomic.Int64
	perLane int64

	evaluated, diverged, failed, dropped atomic.Uint64
	pending                              atomic.Int64 // offered and not yet decided
}

// New returns a Runner that calls record for each divergence (from Run's
// goroutine; an error is logged and the divergence not retried).
func New(log *slog.Logger, record func(context.Context, Divergence) error, opts Options) *Runner {
	if opts.Queue <= 0 {
		opts.Queue = 1024
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 250 * time.Millisecond
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Runner{jobs: make(chan job, opts.Queue), opts: opts, log: log, record: record, perLane: int64(max(opts.Queue/4, 1))}
}

// laneCount is how many lanes agents are spread over.
const laneCount = 16

// laneOf is the lane of an agent (FNV-1a of its id).
func laneOf(agent string) int {
	h := uint32(2166136261)
	for i := 0; i < len(agent); i++ {
		h = (h ^ uint32(agent[i])) * 16777619
	}
	return int(h % laneCount)
}

// Set puts c in shadow; nil turns shadow evaluation off. Decisions already
// queued are decided by the candidate that was in force when they were
// offered.
func (r *Runner) Set(c *Candidate) { r.cand.Store(c) }

// Current is the candidate in shadow, nil when off.
func (r *Runner) Current() *Candidate { return r.cand.Load() }

// Offer hands a live decision to the candidate in force, if any, and
// returns at once: when the queue is full the decision is dropped and
// counted, as it is when the agent's lane holds a quarter of the queue
// already. call and live are only read afterwards; the caller must not
// change them once offered.
func (r *Runner) Offer(call *airlockv1.ToolCall, live *airlockv1.Decision) {
	c := r.cand.Load()
	if c == nil {
		return
	}
	lane := laneOf(call.GetAgentId())
	if r.lanes[lane].Add(1) > r.perLane {
		r.lanes[lane].Add(-1)
		r.dropped.Add(1)
		return
	}
	// The candidate decides at the live decision's own time (its input.time),
	// so a policy that reads the time never diverges from itself.
	var at time.Time
	if t := live.GetDecidedAt(); t != nil {
		at = t.AsTime()
	} else {
		at = r.opts.Now()
	}
	r.pending.Add(1)
	select {
	case r.jobs <- job{lane: lane, cand: c, call: call, live: live, at: at}:
	default:
		r.lanes[lane].Add(-1)
		r.pending.Add(-1)
		r.dropped.Add(1)
	}
}

// Idle reports whether the candidate is deciding nothing and nothing waits
// for it.
func (r *Runner) Idle() bool { return r.pending.Load() == 0 }

// Stats returns the counters.
func (r *Runner) Stats() Stats {
	return Stats{Evaluated: r.evaluated.Load(), Diverged: r.diverged.Load(), Failed: r.failed.Load(), Dropped: r.dropped.Load()}
}

// Run decides queued decisions with their candidate until ctx ends.
//
// While decisions keep coming it takes the queue in turns, drainEvery
// apart, instead of waiting on it: a Run waiting on the queue makes each
// Offer wake it, and the wake-up (a system call when the other core is
// idle) is paid by the live decision, about a third of its cost. After
// quietTurns turns with nothing queued it waits on the queue again, so an
// idle runner wakes for nothing; then the first offer wakes it.
func (r *Runner) Run(ctx context.Context) error {
	turn := time.NewTimer(drainEvery)
	defer turn.Stop()
	quiet := 0
	for {
		if r.drain(ctx) > 0 {
			quiet = 0
		} else {
			quiet++
		}
		if quiet < quietTurns {
			turn.Reset(drainEvery)
			select {
			case <-ctx.Done():
				return nil
			case <-turn.C:
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case j := <-r.jobs:
			r.done(ctx, j)
			quiet = 0
		}
	}
}

// drainEvery is how long the queue fills between turns while decisions
// come (a live decision takes microseconds, so a turn takes hundreds, well
// within a lane's quarter of the default queue); quietTurns how many empty
// turns end that.
const (
	drainEvery = time.Millisecond
	quietTurns = 100
)

// drain decides what is queued until the queue is empty or ctx ends, and
// returns how many it decided.
func (r *Runner) drain(ctx context.Context) int {
	n := 0
	for ; ctx.Err() == nil; n++ {
		select {
		case j := <-r.jobs:
			r.done(ctx, j)
		default:
			return n
		}
	}
	return n
}

// done decides j and takes it off the queue's counts.
func (r *Runner) done(ctx context.Context, j job) {
	r.one(ctx, j)
	r.lanes[j.lane].Add(-1)
	r.pending.Add(-1)
}

func (r *Runner) one(ctx context.Context, j job) {
	d, err := r.decide(ctx, j)
	if err != nil {
		r.failed.Add(1)
		r.log.Warn("the candidate policy in shadow could not decide a call; the live decision stands", "candidate", j.cand.Digest,
			"agent", j.call.GetAgentId(), "call", j.call.GetCallId(), "err", err)
		return
	}
	r.evaluated.Add(1)
	if !Diverges(j.live, d) {
		return
	}
	r.diverged.Add(1)
	if err := r.record(ctx, Divergence{Call: j.call, Live: j.live, Candidate: d, Digest: j.cand.Digest}); err != nil {
		r.log.Error("could not record a shadow divergence", "candidate", j.cand.Digest, "call", j.call.GetCallId(), "err", err)
	}
}

// decide runs the candidate with a deadline, a panic turned into an error.
func (r *Runner) decide(ctx context.Context, j job) (d *airlockv1.Decision, err error) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			d, err = nil, fmt.Errorf("the candidate panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return j.cand.Decide(ctx, j.call, j.live, j.at)
}
