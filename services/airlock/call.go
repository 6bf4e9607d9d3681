package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	airlock "github.com/airlock-gate/airlock/sdk"
)

func newCallCmd(g *globals) *cobra.Command {
	var (
		c       airlock.Call
		agent   string
		creds   string
		argsRaw string
		wait    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "call --tool SERVER__TOOL [--args JSON]",
		Short: "Submit a tool call as an agent and print its outcome as JSON",
		Long: `Submits a call through the Go SDK and waits for its outcome. Exit status 0
means the tool ran and completed; 1 means any other outcome (denied, rejected,
failed, expired, ...); 2 means the call could not be submitted or awaited.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c.Tool == "" {
				return usageErr(cmd, "--tool is required")
			}
			if argsRaw != "" {
				if err := json.Unmarshal([]byte(argsRaw), &c.Args); err != nil {
					return usageErr(cmd, "--args must be a JSON object such as '{\"path\":\"README.md\"}': %v", err)
				}
			}
			cfg, err := g.load()
			if err != nil {
				return err
			}
			file, err := agentCredential(cfg.Dev.DataDir, agent, creds)
			if err != nil {
				return err
			}
			cctx, ccancel := context.WithTimeout(cmd.Context(), 5*time.Second)
			client, err := airlock.Connect(cctx, file, g.natsURL, airlock.WithStream(cfg.Stream.Name), airlock.WithMaxRequestBytes(cfg.Limits.MaxRequestBytes))
			ccancel()
			if err != nil {
				return err
			}
			defer client.Close()
			id, err := client.Submit(cmd.Context(), c)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "call %s/%s revision %d submitted as agent %s; waiting up to %s for its outcome (if a person must decide: the console's inbox, or `airlock approvals list`)\n",
				client.Agent(), id, max(c.Revision, 1), client.Agent(), wait)
			ctx, cancel := context.WithTimeout(cmd.Context(), wait)
			defer cancel()
			out, err := client.AwaitRevision(ctx, id, max(c.Revision, 1))
			if err != nil && out.Status == "" {
				fmt.Fprintf(os.Stderr, "call %s submitted, but no outcome yet: %v (follow it later with the SDK's Await)\n", id, err)
				return exitError{2}
			}
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(out)
			if !out.Completed() {
				return exitError{1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&agent, "agent", "bot", "agent to act as: its credential is <data dir>/agents/AGENT.creds.json (see `airlock agents`)")
	f.StringVar(&creds, "creds", "", "agent credential file to act with (overrides --agent)")
	f.Uint32Var(&c.Revision, "revision", 0, "revision to submit (2 or more after a reviewer requested changes; with --call-id)")
	f.StringVar(&c.Tool, "tool", "", "tool to call, as server__tool (e.g. demo__echo)")
	f.StringVar(&argsRaw, "args", "{}", "arguments as a JSON object")
	f.StringVar(&c.Thread, "thread", "", "thread (conversation) id")
	f.StringVar(&c.Reason, "reason", "", "why the agent needs this call")
	f.StringVar(&c.OnBehalfOf, "on-behalf-of", "", "principal the agent acts for")
	f.StringVar(&c.ID, "call-id", "", "call id (generated when empty)")
	f.DurationVar(&wait, "wait", 5*time.Minute, "how long to wait for the outcome")
	return cmd
}
