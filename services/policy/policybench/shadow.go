package policybench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/policy/decide"
	"github.com/airlock-gate/airlock/services/policy/shadow"
)

// shadowCandidate is the candidate shadow mode runs: code with demo's echo
// asking instead of allowing, so one of the two cases diverges on every
// call and the other never does.
func shadowCandidate(code *decide.Code) (*decide.Code, error) {
	raw, err := json.Marshal(code.Data)
	if err != nil {
		return nil, err
	}
	var data map[string]any
	if err := json.Unmarshal(raw, &data); err != nil {
		return nil, err
	}
	rules, _ := data["airlock"].(map[string]any)["rules"].([]any)
	changed := false
	for _, x := range rules {
		if r, ok := x.(map[string]any); ok && r["id"] == "demo-echo" {
			r["effect"], changed = "ask", true
		}
	}
	if !changed {
		return nil, fmt.Errorf("the default policy has no rule demo-echo for the candidate to change")
	}
	return decide.NewCode(code.Modules, data)
}

// runShadow times, for each case of size, the live decision as the policy
// service makes it (Evaluate, then the offer to the shadow runner) with no
// candidate and with one in shadow, alternating in rounds. Before each
// round without a candidate the runner is left to finish, so that round
// pays for nothing the candidate does.
func runShadow(ctx context.Context, code *decide.Code, size *Size, rules, n int) error {
	live, err := decide.NewEvaluator(ctx, code, decide.BenchRules(rules), nil)
	if err != nil {
		return err
	}
	candCode, err := shadowCandidate(code)
	if err != nil {
		return err
	}
	cand, err := decide.NewEvaluator(ctx, candCode, decide.BenchRules(rules), nil)
	if err != nil {
		return err
	}
	r := shadow.New(slog.New(slog.NewTextHandler(io.Discard, nil)), func(context.Context, shadow.Divergence) error { return nil }, shadow.Options{})
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = r.Run(rctx) }()
	c := &shadow.Candidate{Digest: candCode.Hash, Decide: func(ctx context.Context, call *airlockv1.ToolCall, _ *airlockv1.Decision, now time.Time) (*airlockv1.Decision, error) {
		return cand.Evaluate(ctx, call, now)
	}}
	now := time.Now()
	for i, bc := range cases() {
		call := bc.call
		decideOnce := func() error {
			d, err := live.Evaluate(ctx, call, now)
			if err != nil {
				return err
			}
			r.Offer(call, d)
			return nil
		}
		before := r.Stats()
		off, on, err := alternate(r, c, decideOnce, n)
		if err != nil {
			return fmt.Errorf("%s: %w", bc.name, err)
		}
		after := r.Stats()
		f := &ShadowFigures{Off: off, On: on, RatioP50: on.P50us / off.P50us,
			Evaluated: after.Evaluated - before.Evaluated, Diverged: after.Diverged - before.Diverged, Dropped: after.Dropped - before.Dropped}
		f.MeetsP50 = f.RatioP50 <= GoalShadowP50Ratio
		size.Cases[i].Shadow = f
	}
	return nil
}

// alternate times n runs of f without a candidate and n with c in shadow,
// in rounds of n/20 each, after a warm-up.
func alternate(r *shadow.Runner, c *shadow.Candidate, f op, n int) (off, on Latency, err error) {
	const rounds = 20
	per := max(n/rounds, 1)
	r.Set(c)
	for range max(n/10, 10) {
		if err := f(); err != nil {
			return off, on, err
		}
	}
	var offLat, onLat []time.Duration
	timed := func(into *[]time.Duration) error {
		for range per {
			t0 := time.Now()
			if err := f(); err != nil {
				return err
			}
			*into = append(*into, time.Since(t0))
		}
		return nil
	}
	for range rounds {
		r.Set(nil)
		for !r.Idle() {
			runtime.Gosched()
		}
		if err := timed(&offLat); err != nil {
			return off, on, err
		}
		r.Set(c)
		if err := timed(&onLat); err != nil {
			return off, on, err
		}
	}
	r.Set(nil)
	for !r.Idle() {
		runtime.Gosched()
	}
	return summarise(offLat), summarise(onLat), nil
}
