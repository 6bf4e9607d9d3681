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
		asJSON bool
		opts   policybench.Options
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
one JSON object with every figure. Exit status 1 when a goal is missed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return benchRun(cmd, env, "", asJSON, func(ctx context.Context, _ config.Config) (*policybench.Result, error) {
				return policybench.Run(ctx, opts)
			}, printPolicyBench)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print one JSON object with every figure")
	f.IntSliceVar(&opts.Sizes, "rules", []int{100, 10000}, "run-time rules added to the default policy, one measurement per value")
	f.IntVar(&opts.Decisions, "n", 20000, "decisions timed per call and size")
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
	}
	fmt.Fprintf(w, "\ngoal p50 ≤ %.1f× floor: %s (worst %.2f×)\n", r.GoalP50, mark(r.MeetsP50), r.WorstP50)
	fmt.Fprintf(w, "goal p99 ≤ %.0f× floor:  %s (worst %.2f×)\n", r.GoalP99, mark(r.MeetsP99), r.WorstP99)
}

// mark is ✓ for a goal met and ✗ for one missed.
func mark(ok bool) string {
	if ok {
		return "✓"
	}
	return "✗"
}
