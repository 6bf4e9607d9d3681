package main

import "github.com/spf13/cobra"

// newBenchCmd groups the benchmarks of SPEC §8; each prints its figures and,
// with --json, one JSON object holding every figure.
func newBenchCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure airlock against its quality bars (SPEC §8)",
	}
	cmd.AddCommand(
		// bench subcommands are added here, one line each.
		newBenchRoundtripCmd(g),
		newBenchPolicyCmd(g),
		newBenchAuditCmd(g),
		newBenchGatewayCmd(g),
	)
	return cmd
}
