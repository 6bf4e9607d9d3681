package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/airlock-gate/airlock/services/policy/policybench"
)

// newBenchPolicyCmd measures SPEC §8's policy bar: one decision in process
// against the same policy behind OPA's own REST server.
func newBenchPolicyCmd(_ *globals) *cobra.Command {
	var (
		asJSON bool
		opts   policybench.Options
	)
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Policy decision latency in process vs OPA's REST server (goal: p50 ≤ 30 µs, ≥ 10× faster)",
		Long: `Decides one call with the default policy plus --rules run-time rules, first in
process with the prepared Rego query (as the policy service does), then with
the same modules, data and input through OPA's REST server, started from the
OPA Go module on a loopback port. Prints p50/p99 of both and their ratio,
and the same for a policy whose decision is a constant (the floor of each
way: the real ratio cannot be much above the floor's); --json prints one JSON
object with every figure. Exit status 1 when a goal is missed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := policybench.Run(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if asJSON {
				out, _ := json.Marshal(res)
				fmt.Println(string(out))
			} else {
				fmt.Printf("policy decision: default policy + %d rules, call %s → %s (rule %s), revision %s\n", res.Rules, res.Call, res.Action, res.RuleID, res.PolicyRevision)
				fmt.Printf("  in process    p50 %8.1f µs   p99 %8.1f µs   mean %8.1f µs   (%d decisions)\n", res.InProcP50us, res.InProcP99us, res.InProcMeanus, res.Decisions)
				fmt.Printf("  OPA REST      p50 %8.1f µs   p99 %8.1f µs   mean %8.1f µs   (%d decisions, %s)\n", res.RESTP50us, res.RESTP99us, res.RESTMeanus, res.RESTDecisions, res.OPAServer)
				fmt.Printf("  ratio         p50 %8.1f ×    p99 %8.1f ×\n", res.RatioP50, res.RatioP99)
				fmt.Printf("  floor (a constant policy): in process p50 %.1f µs, OPA REST p50 %.1f µs, ratio %.1f ×\n", res.FloorInProcP50us, res.FloorRESTP50us, res.FloorRatioP50)
				fmt.Printf("  goals: p50 ≤ %.0f µs: %s; ≥ %.0f× faster than REST: %s\n", res.GoalP50us, verdict(res.MeetsP50), res.GoalRatio, verdict(res.MeetsRatio))
			}
			if !res.MeetsP50 || !res.MeetsRatio {
				fmt.Fprintln(os.Stderr, "airlock bench policy: a goal was missed")
				return exitError{1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print one JSON object with every figure")
	f.IntVar(&opts.Rules, "rules", 100, "run-time rules added to the default policy")
	f.IntVar(&opts.Decisions, "n", 20000, "decisions measured in process")
	f.IntVar(&opts.RESTDecisions, "rest-n", 2000, "decisions measured through OPA's REST server")
	return cmd
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}
