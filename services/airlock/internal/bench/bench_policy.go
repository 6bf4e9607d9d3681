package bench

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/airlock-gate/airlock/services/policy/policybench"
	"github.com/airlock-gate/airlock/services/shared/config"
)

// newPolicyCmd measures the policy goal: a decision in process
// against OPA's own floor, at 100 and at 10,000 rules, in one run.
func newPolicyCmd(env Env) *cobra.Command {
	var (
		asJSON     bool
		cpuProfile string
		opts       policybench.Options
	)
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Policy decision latency vs OPA's constant-policy floor at 100 and 10,000 rules (goal: p50 ≤ 1.5×, p99 ≤ 10×)",
		Long: `Decides two calls with the default policy plus --rules run-time rules (one
call matched by one rule, fs__read_file; one matched by several, demo__echo)
as the policy service does: input from the protobuf call, prepared Rego
query, decision document, arguments digest. The floor is OPA alone deciding
with a constant policy (a prepared query, the same input already parsed),
timed in the same run, interleaved with the decisions. Prints p50 and p99 of
each and their ratios to the floor against the goals (p50 ≤ 1.5×,
p99 ≤ 10×; docs/benchmarks.md), and what airlock adds around a constant policy. --json prints
one JSON object with every figure. Exit status 1 when a goal is missed.

--shadow also times each call's live decision (the decision, then the offer
to the shadow runner) with a candidate policy in shadow — the default
policy with demo__echo asking, so every echo diverges — against the same
decision with none, alternating in rounds in the same run; the candidate
decides on its own goroutine meanwhile. Goal: p50 with shadow ≤ 1.3×
without.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return benchRun(cmd, env, cpuProfile, asJSON, func(ctx context.Context, _ config.Config) (*policybench.Result, error) {
				return policybench.Run(ctx, opts)
			}, printPolicyBench)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print one JSON object with every figure")
	f.IntSliceVar(&opts.Sizes, "rules", []int{100, 10000}, "run-time rules added to the default policy, one measurement per value")
	f.IntVar(&opts.Decisions, "n", 20000, "decisions timed per call and size")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (floor and decisions interleaved) to this file")
	f.BoolVar(&opts.Shadow, "shadow", false, "also time the live decision with a candidate policy in shadow (goal: p50 ≤ 1.3× without)")
	return cmd
}

func printPolicyBench(w io.Writer, r *policybench.Result) {
	fmt.Fprintf(w, "airlock bench policy — %d decisions per figure; floor: OPA alone, a constant policy, prepared, input parsed\n\n", r.Decisions)
	fmt.Fprintf(w, "%7s  %-34s %-20s %9s %9s  %9s %9s\n", "rules", "call", "decision", "p50", "p99", "×floor p50", "×floor p99")
	for _, s := range r.Sizes {
		fmt.Fprintf(w, "%7d  %-34s %-20s %7.1fµs %7.1fµs\n", s.Rules, "floor (OPA, constant policy)", "", s.Floor.P50us, s.Floor.P99us)
		fmt.Fprintf(w, "%7s  %-34s %-20s %7.1fµs %7.1fµs  %8.2f× %9.2f×\n", "", "  same, airlock's eval options", "", s.FloorLean.P50us, s.FloorLean.P99us,
			s.FloorLean.P50us/s.Floor.P50us, s.FloorLean.P99us/s.Floor.P99us)
		fmt.Fprintf(w, "%7s  %-34s %-20s %7.1fµs %7.1fµs  %8.2f× %9.2f×\n", "", "airlock, constant policy", "", s.Wrapped.P50us, s.Wrapped.P99us,
			s.Wrapped.P50us/s.Floor.P50us, s.Wrapped.P99us/s.Floor.P99us)
		for _, c := range s.Cases {
			fmt.Fprintf(w, "%7s  %-34s %-20s %7.1fµs %7.1fµs  %7.2f× %s %8.2f× %s\n", "", c.Call+" ("+c.Name+")", c.Action+" by "+c.RuleID,
				c.P50us, c.P99us, c.RatioP50, mark(c.MeetsP50), c.RatioP99, mark(c.MeetsP99))
		}
		if len(s.Cases) > 0 {
			fmt.Fprintf(w, "%7s  %-34s %-20s %7.1fµs %7.1fµs  %8.2f× %9.2f×\n", "", "  "+s.Cases[0].Call+" through topdown", "", s.Topdown.P50us, s.Topdown.P99us,
				s.Topdown.P50us/s.Floor.P50us, s.Topdown.P99us/s.Floor.P99us)
		}
	}
	if r.Shadow {
		fmt.Fprintf(w, "\nshadow: the live decision (decide, then offer to the shadow runner) without and with a candidate in shadow\n")
		fmt.Fprintf(w, "%7s  %-34s %9s %9s %9s %9s  %9s  %s\n", "rules", "call", "off p50", "on p50", "off p99", "on p99", "on/off p50", "candidate meanwhile")
		for _, s := range r.Sizes {
			for _, c := range s.Cases {
				if f := c.Shadow; f != nil {
					fmt.Fprintf(w, "%7d  %-34s %7.1fµs %7.1fµs %7.1fµs %7.1fµs  %8.2f× %s  %d decided, %d diverged, %d dropped\n", s.Rules, c.Call,
						f.Off.P50us, f.On.P50us, f.Off.P99us, f.On.P99us, f.RatioP50, mark(f.MeetsP50), f.Evaluated, f.Diverged, f.Dropped)
				}
			}
		}
	}
	fmt.Fprintf(w, "\ngoal p50 ≤ %.1f× floor: %s (worst %.2f×)\n", r.GoalP50, mark(r.MeetsP50), r.WorstP50)
	fmt.Fprintf(w, "goal p99 ≤ %.0f× floor:  %s (worst %.2f×)\n", r.GoalP99, mark(r.MeetsP99), r.WorstP99)
	if r.Shadow {
		fmt.Fprintf(w, "goal p50 with shadow ≤ %.1f× without: %s (worst %.2f×)\n", policybench.GoalShadowP50Ratio, mark(r.MeetsShadow), r.WorstShadowP50)
	}
}

// mark is ✓ for a goal met and ✗ for one missed.
func mark(ok bool) string {
	if ok {
		return "✓"
	}
	return "✗"
}
