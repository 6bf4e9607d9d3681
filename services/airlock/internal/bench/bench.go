package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/airlock-gate/airlock/services/shared/config"
)

// NewCmd is `airlock bench`: it groups the benchmarks; each prints its figures and, with
// --json, one JSON object holding every figure, and exits 1 when the run
// missed a goal (benchRun). docs/benchmarks.md says what each figure means.
func NewCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure airlock against its goals (docs/benchmarks.md explains every figure)",
		Long: `Each benchmark starts what it measures (an embedded NATS server, the services,
a private ClickHouse for audit) in this process, measures airlock against a
floor taken in the same run, and prints the figures and each goal with ✓ or ✗.

Exit status 0 when every goal of the run was met, 1 when one was missed (the
figures are printed either way) or the run failed, 2 when used wrongly.
` + "`floor`" + ` has no goal: it is what the others are compared with.

docs/benchmarks.md in airlock's repository says what each figure means and
why each goal is what it is.`,
	}
	cmd.AddCommand(
		// bench subcommands are added here, one line each.
		newRoundtripCmd(env),
		newPolicyCmd(env),
		newAuditCmd(env),
		newFloorCmd(env),
		newGatewayCmd(env),
		newFanoutCmd(env),
		newSDKCmd(env),
		newSDKAgentCmd(),
		newPendingCmd(env),
	)
	return cmd
}

// goalReport is a bench report that has goals: Missed names each goal the
// run missed, empty when every one was met.
type goalReport interface{ Missed() []string }

// benchRun is the body of every bench command: load the configuration,
// profile the CPU when asked, run, print the report as text or (asJSON)
// JSON, and end with exit status 1 when the report is a goalReport that
// missed a goal — after printing, so the figures are never lost.
func benchRun[R any](cmd *cobra.Command, env Env, cpuProfile string, asJSON bool,
	run func(context.Context, config.Config) (R, error), print func(io.Writer, R)) error {
	cfg, err := env.Load()
	if err != nil {
		return err
	}
	if cpuProfile != "" {
		stop, err := StartCPUProfile(cpuProfile)
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
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		print(cmd.OutOrStdout(), rep)
	}
	if gr, ok := any(rep).(goalReport); ok {
		if missed := gr.Missed(); len(missed) > 0 {
			fmt.Fprintf(os.Stderr, "airlock: %s missed its goal: %s (docs/benchmarks.md says what each figure means)\n", cmd.CommandPath(), strings.Join(missed, "; "))
			return ErrGoalMissed
		}
	}
	return nil
}
