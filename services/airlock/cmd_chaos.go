package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/airlock-gate/airlock/services/airlock/internal/chaos"
	"github.com/airlock-gate/airlock/services/shared/embedded"
)

func newChaosCmd() *cobra.Command {
	var o chaos.Options
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Run the production layout under faults and check that nothing was lost or run twice",
		Long: `Starts airlock's production layout on loopback — a 3-node NATS cluster with the
shipped accounts and per-service users (R3 streams and buckets, provisioned by
the admin), two replicas of every service as separate ` + "`airlock serve`" + ` processes
each with its own NATS user and seal keys, a private ClickHouse, a webhook tool
server and a fake of Slack's Web API — and drives a mixed load (agents through
the Go SDK; reviewers approving, rejecting, editing and requesting changes
through the console's REST API and signed Slack posts; calls left to expire;
MCP clients calling tools through the gateway replicas) while a fault schedule
kills service replicas (a gateway replica among them), pauses and kills NATS nodes
(the events stream's leader among them), stops ClickHouse and hangs a tool.

It then checks, from the stream, ClickHouse and the tool server, that no
non-idempotent call ran twice, every started call has exactly one end, every
decision is in the stream, each MCP request is one call run at most once,
ClickHouse holds exactly the stream, the audit chain verifies and agents and
MCP clients saw what the stream says — and prints a report.
Exit status 1 on any violation. The same --seed gives the same load and
schedule. Needs clickhouse-server (` + "`go tool task test:deps`" + ` installs it).

With --clickhouse-replicas 2 the audit runs on two ClickHouse replicas
(ReplicatedReplacingMergeTree, ZooKeeper from Debian's zookeeperd, migrations
ON CLUSTER) and the ClickHouse fault kills the replica the audit writes to:
the run then also checks that the other replica caught up while it was down
and that each replica on its own holds the stream exactly once and verifies.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bin, err := os.Executable()
			if err != nil {
				return fmt.Errorf("find the airlock executable to start the services from: %w", err)
			}
			o.Binary, o.Progress = bin, os.Stderr
			rep, err := chaos.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			if asJSON {
				_, _ = os.Stdout.Write(rep.JSON())
			} else {
				rep.WriteText(os.Stdout)
			}
			if rep.Violations > 0 {
				return exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().Int64Var(&o.Seed, "seed", 0, "seed of the load and the fault schedule (default: from the clock, printed in the report)")
	cmd.Flags().BoolVar(&o.Short, "short", false, "the short schedule (fewer calls, every fault kind once, ClickHouse down 10s), as go tool task test runs it")
	cmd.Flags().IntVar(&o.Calls, "calls", 0, "number of calls (default 1000, or 120 with --short)")
	cmd.Flags().IntVar(&o.ClickHouseReplicas, "clickhouse-replicas", 0, "run ClickHouse as this many replicas with ZooKeeper (2 or more) and kill one mid-run (default: one server, stopped mid-run)")
	cmd.Flags().StringVar(&o.Dir, "dir", "", "run directory for stores, logs and report.json (default a temporary one, removed after a clean run)")
	cmd.Flags().BoolVar(&o.Keep, "keep", false, "keep the temporary run directory after a clean run")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.AddCommand(newChaosNodeCmd())
	return cmd
}

// newChaosNodeCmd runs one NATS node from a nats-server configuration file:
// how `airlock chaos` starts its cluster nodes as processes it can kill
// and pause.
func newChaosNodeCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "node FILE",
		Short:  "Run one NATS node from a nats-server configuration file (used by airlock chaos)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := embedded.StartConfigFile(args[0], true)
			if err != nil {
				return err
			}
			<-cmd.Context().Done()
			s.Stop()
			return nil
		},
	}
}
