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
			nc, _, err := g.connect(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer nc.Close()
			client, err := airlock.New(nc, agent, airlock.WithStream(cfg.Stream.Name), airlock.WithMaxRequestBytes(cfg.Limits.MaxRequestBytes))
			if err != nil {
				return err
			}
			id, err := client.Submit(cmd.Context(), c)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), wait)
			defer cancel()
			out, err := client.Await(ctx, id)
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
	f.StringVar(&agent, "agent", "cli", "agent id to act as")
	f.StringVar(&c.Tool, "tool", "", "tool to call, as server__tool (e.g. demo__echo)")
	f.StringVar(&argsRaw, "args", "{}", "arguments as a JSON object")
	f.StringVar(&c.Thread, "thread", "", "thread (conversation) id")
	f.StringVar(&c.Reason, "reason", "", "why the agent needs this call")
	f.StringVar(&c.OnBehalfOf, "on-behalf-of", "", "principal the agent acts for")
	f.StringVar(&c.ID, "call-id", "", "call id (generated when empty)")
	f.DurationVar(&wait, "wait", 5*time.Minute, "how long to wait for the outcome")
	return cmd
}
