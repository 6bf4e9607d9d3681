package main

import (
	"context"
	"encoding/json"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/airlock-gate/airlock/services/shared/config"
)

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
		newBenchFloorCmd(g),
		newBenchGatewayCmd(g),
		newBenchFanoutCmd(g),
	)
	return cmd
}

// benchRun is the body of a bench command: load the configuration, profile
// the CPU when asked, run, and print the report as text or (asJSON) JSON.
func benchRun[R any](cmd *cobra.Command, g *globals, cpuProfile string, asJSON bool,
	run func(context.Context, config.Config) (R, error), print func(io.Writer, R)) error {
	cfg, err := g.load()
	if err != nil {
		return err
	}
	if cpuProfile != "" {
		stop, err := startCPUProfile(cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	rep, err := run(cmd.Context(), cfg)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	print(os.Stdout, rep)
	return nil
}
