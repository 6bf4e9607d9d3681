// Package policybench measures airlock's policy goal: one decision in
// process, as the policy service makes it, against OPA's own floor — a
// prepared query of a constant policy, given the same input — measured in
// the same run, at several rule counts.
package policybench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/policy/decide"
)

// Goals (docs/benchmarks.md), as ratios to the floor of the same run, and
// for shadow mode as the ratio of the live decision's p50 with a candidate
// in shadow to its p50 without, in the same run.
const (
	GoalP50Ratio       = 1.5
	GoalP99Ratio       = 10.0
	GoalShadowP50Ratio = 1.3
)

// Missed names each goal the run missed, empty when both were met.
func (r *Result) Missed() []string {
	var missed []string
	if !r.MeetsP50 {
		missed = append(missed, fmt.Sprintf("decision p50 %.2f× the floor, goal ≤ %.1f×", r.WorstP50, r.GoalP50))
	}
	if !r.MeetsP99 {
		missed = append(missed, fmt.Sprintf("decision p99 %.2f× the floor, goal ≤ %.0f×", r.WorstP99, r.GoalP99))
	}
	if r.Shadow && !r.MeetsShadow {
		missed = append(missed, fmt.Sprintf("decision p50 with a candidate in shadow %.2f× without, goal ≤ %.1f×", r.WorstShadowP50, GoalShadowP50Ratio))
	}
	return missed
}

// FloorPolicy is the cheapest policy there is: every call gets the same
// decision. OPA evaluating it is the floor every decision pays.
const FloorPolicy = `package airlock

decision := {"action": "allow", "rule_id": "floor", "reason": "constant", "risk": "low", "redact": []}
`

// Options of one run.
type Options struct {
	// Sizes are the numbers of run-time rules added to the default policy
	// (default 100 and 10,000).
	Sizes []int
	// Decisions timed per measured case and size (default 20,000).
	Decisions int
	// Shadow also times each case's live decision with a candidate policy
	// in shadow against the same decision without, in the same run.
	Shadow bool
}

// Latency is a distribution summary in microseconds.
type Latency struct {
	P50us float64 `json:"p50_us"`
	P99us float64 `json:"p99_us"`
}

// Case is one call decided with one policy size.
type Case struct {
	// Name says which path the call takes ("one rule matches", ...).
	Name   string `json:"name"`
	Call   string `json:"call"`
	Action string `json:"action"`
	RuleID string `json:"rule_id"`
	Latency
	RatioP50 float64 `json:"ratio_p50"`
	RatioP99 float64 `json:"ratio_p99"`
	MeetsP50 bool    `json:"meets_p50"`
	MeetsP99 bool    `json:"meets_p99"`
	// Shadow is set in shadow mode.
	Shadow *ShadowFigures `json:"shadow,omitempty"`
}

// ShadowFigures compare one case's live decision (Evaluate, then the offer
// to the shadow runner) without and with a candidate in shadow.
type ShadowFigures struct {
	Off      Latency `json:"off"`
	On       Latency `json:"on"`
	RatioP50 float64 `json:"ratio_p50"`
	MeetsP50 bool    `json:"meets_p50"`
	// What the candidate did meanwhile: decided, of which diverged, and
	// offers dropped because it was behind (the live loop never waits).
	Evaluated uint64 `json:"candidate_evaluated"`
	Diverged  uint64 `json:"candidate_diverged"`
	Dropped   uint64 `json:"candidate_dropped"`
}

// Size holds the figures of one policy size.
type Size struct {
	// Rules is how many run-time rules were added to the default policy.
	Rules          int    `json:"rules"`
	PolicyRevision string `json:"policy_revision"`
	// Floor is OPA alone deciding with FloorPolicy (prepared query, input
	// already parsed), timed interleaved with the cases.
	Floor Latency `json:"floor"`
	// FloorLean is the floor evaluated with the options airlock's
	// evaluator uses (no metrics, no per-evaluation goroutine, result kept
	// as AST): for reading the floor, not a goal.
	FloorLean Latency `json:"floor_lean_options"`
	// Wrapped is airlock's Evaluate with FloorPolicy: what building the
	// input, reading the document and stamping the decision add to OPA.
	Wrapped Latency `json:"airlock_constant_policy"`
	// Topdown is the first case's call decided through topdown
	// (decide.WithTopdown), where the default policy's decision is taken
	// from the compiled rules without it: for reading, not a goal.
	Topdown Latency `json:"one_rule_through_topdown"`
	Cases   []Case  `json:"cases"`
}

// Result is every figure of a run; `airlock bench policy --json` prints it.
type Result struct {
	Decisions int     `json:"decisions_per_case"`
	Sizes     []Size  `json:"sizes"`
	GoalP50   float64 `json:"goal_p50_ratio_max"`
	GoalP99   float64 `json:"goal_p99_ratio_max"`
	// WorstP50 and WorstP99 are the highest ratios of any case and size.
	WorstP50 float64 `json:"worst_p50_ratio"`
	WorstP99 float64 `json:"worst_p99_ratio"`
	MeetsP50 bool    `json:"meets_p50_goal"`
	MeetsP99 bool    `json:"meets_p99_goal"`
	// Shadow mode: the worst ratio of any case and size, and the goal.
	Shadow         bool    `json:"shadow"`
	WorstShadowP50 float64 `json:"worst_shadow_p50_ratio,omitempty"`
	MeetsShadow    bool    `json:"meets_shadow_goal"`
}

// benchCase is a call and the path it is meant to exercise.
type benchCase struct {
	name string
	call *airlockv1.ToolCall
}

func cases() []benchCase {
	return []benchCase{
		{"one rule matches", decide.BenchCall()},
		{"several rules match", decide.BenchCallSeveralRules()},
	}
}

// Run measures, for each size, Evaluate of each case's call with the default
// policy plus that many run-time rules (decide.BenchRules), and the floor,
// interleaved in rounds so that the machine's drift touches every figure
// alike.
func Run(ctx context.Context, opts Options) (*Result, error) {
	if len(opts.Sizes) == 0 {
		opts.Sizes = []int{100, 10000}
	}
	if opts.Decisions <= 0 {
		opts.Decisions = 20000
	}
	res := &Result{Decisions: opts.Decisions, GoalP50: GoalP50Ratio, GoalP99: GoalP99Ratio, MeetsP50: true, MeetsP99: true,
		Shadow: opts.Shadow, MeetsShadow: true}
	floor, err := newFloor(ctx)
	if err != nil {
		return nil, err
	}
	code, err := decide.DefaultCode()
	if err != nil {
		return nil, err
	}
	for _, n := range opts.Sizes {
		size, err := runSize(ctx, code, floor, n, opts.Decisions)
		if err != nil {
			return nil, fmt.Errorf("%d rules: %w", n, err)
		}
		if opts.Shadow {
			if err := runShadow(ctx, code, &size, n, opts.Decisions); err != nil {
				return nil, fmt.Errorf("%d rules, shadow: %w", n, err)
			}
		}
		for _, c := range size.Cases {
			if c.Shadow != nil {
				res.WorstShadowP50 = max(res.WorstShadowP50, c.Shadow.RatioP50)
				res.MeetsShadow = res.MeetsShadow && c.Shadow.MeetsP50
			}
			res.WorstP50, res.WorstP99 = max(res.WorstP50, c.RatioP50), max(res.WorstP99, c.RatioP99)
			res.MeetsP50 = res.MeetsP50 && c.MeetsP50
			res.MeetsP99 = res.MeetsP99 && c.MeetsP99
		}
		res.Sizes = append(res.Sizes, size)
	}
	return res, nil
}

// floor is FloorPolicy prepared twice: for OPA alone and inside airlock's
// evaluator.
type floor struct {
	pq      rego.PreparedEvalQuery
	wrapped *decide.Evaluator
}

func newFloor(ctx context.Context) (*floor, error) {
	pq, err := rego.New(rego.Query(decide.Query), rego.Module("floor.rego", FloorPolicy)).PrepareForEval(ctx)
	if err != nil {
		return nil, fmt.Errorf("prepare the floor policy: %w", err)
	}
	code, err := decide.NewCode(map[string]string{"floor.rego": FloorPolicy}, nil)
	if err != nil {
		return nil, err
	}
	wrapped, err := decide.NewEvaluator(ctx, code, nil, nil)
	if err != nil {
		return nil, err
	}
	return &floor{pq: pq, wrapped: wrapped}, nil
}

// op is one timed operation.
type op func() error

func runSize(ctx context.Context, code *decide.Code, fl *floor, rules, n int) (Size, error) {
	ev, err := decide.NewEvaluator(ctx, code, decide.BenchRules(rules), nil)
	if err != nil {
		return Size{}, err
	}
	viaTopdown, err := decide.NewEvaluator(ctx, code, decide.BenchRules(rules), nil, decide.WithTopdown())
	if err != nil {
		return Size{}, err
	}
	size := Size{Rules: rules, PolicyRevision: ev.Revision()}
	now := time.Now()
	// The floor decides the first case's call: the same input document.
	in, err := decide.Input(cases()[0].call, now)
	if err != nil {
		return Size{}, err
	}
	parsed, err := ast.InterfaceToValue(in)
	if err != nil {
		return Size{}, err
	}
	ops := []op{
		func() error {
			rs, err := fl.pq.Eval(ctx, rego.EvalParsedInput(parsed))
			if err == nil && len(rs) == 0 {
				err = fmt.Errorf("the floor policy decided nothing")
			}
			return err
		},
		func() error {
			cancel := topdown.NewCancel()
			rs, err := fl.pq.Eval(ctx, rego.EvalParsedInput(parsed), rego.EvalMetrics(metrics.NoOp()), rego.EvalExternalCancel(cancel),
				rego.EvalGenerateJSON(func(t *ast.Term, _ *rego.EvalContext) (any, error) { return t, nil }))
			if err == nil && len(rs) == 0 {
				err = fmt.Errorf("the floor policy decided nothing")
			}
			return err
		},
		func() error { _, err := fl.wrapped.Evaluate(ctx, cases()[0].call, now); return err },
		func() error { _, err := viaTopdown.Evaluate(ctx, cases()[0].call, now); return err },
	}
	for _, c := range cases() {
		d, err := ev.Evaluate(ctx, c.call, now)
		if err != nil {
			return Size{}, fmt.Errorf("%s: %w", c.name, err)
		}
		size.Cases = append(size.Cases, Case{
			Name: c.name, Call: c.call.Server + "__" + c.call.Tool,
			Action: strings.ToLower(strings.TrimPrefix(d.Action.String(), "ACTION_")), RuleID: d.RuleId,
		})
		call := c.call
		ops = append(ops, func() error { _, err := ev.Evaluate(ctx, call, now); return err })
	}
	lat, err := interleave(ops, n)
	if err != nil {
		return Size{}, err
	}
	size.Floor, size.FloorLean, size.Wrapped, size.Topdown = lat[0], lat[1], lat[2], lat[3]
	for i := range size.Cases {
		c := &size.Cases[i]
		c.Latency = lat[4+i]
		c.RatioP50, c.RatioP99 = c.P50us/size.Floor.P50us, c.P99us/size.Floor.P99us
		c.MeetsP50, c.MeetsP99 = c.RatioP50 <= GoalP50Ratio, c.RatioP99 <= GoalP99Ratio
	}
	return size, nil
}

// interleave times n runs of every op after a warm-up, in blocks of 50
// runs of each in turn (the round trip's blocks), and summarises each
// op's latencies. A block lasts well under a millisecond, shorter than a
// neighbour's burst on a shared machine, so a burst touches every op
// alike: in blocks of n/20 runs (8 ms each) the floor alone moved by up
// to a third between the two sizes of one run, and the ratios with it.
func interleave(ops []op, n int) ([]Latency, error) {
	const per = 50
	rounds := max(n/per, 1)
	for _, f := range ops {
		for range max(n/10, 10) {
			if err := f(); err != nil {
				return nil, err
			}
		}
	}
	lat := make([][]time.Duration, len(ops))
	for range rounds {
		for i, f := range ops {
			for range per {
				t0 := time.Now()
				if err := f(); err != nil {
					return nil, err
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}
	}
	out := make([]Latency, len(ops))
	for i, l := range lat {
		out[i] = summarise(l)
	}
	return out, nil
}

func summarise(lat []time.Duration) Latency {
	slices.Sort(lat)
	us := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) / 1e3 }
	return Latency{P50us: us(0.50), P99us: us(0.99)}
}
