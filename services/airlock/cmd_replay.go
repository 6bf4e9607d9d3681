package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/audit/record"
	"github.com/airlock-gate/airlock/services/audit/replay"
	"github.com/airlock-gate/airlock/services/shared/escape"
	"github.com/airlock-gate/airlock/services/shared/policyapi"
	"github.com/airlock-gate/airlock/services/shared/seal"
)

// newPolicyReplayCmd is `airlock policy replay`: re-decide recorded calls
// with a candidate policy and report every decision that would change.
func newPolicyReplayCmd(g *globals) *cobra.Command {
	var (
		a        auditFlags
		dir      string
		asJSON   bool
		examples int
		runtime  string
	)
	cmd := &cobra.Command{
		Use:   "replay --policy DIR [--since 7d]",
		Short: "Re-decide recorded calls with a candidate policy and report every decision that would change",
		Long: `Reads the policy decisions recorded in the audit trail (ClickHouse, or the
events stream when none is configured), decides each call again with the
policy in --policy DIR (its *.rego and data.json) as of the time it was first
decided, and reports the calls whose action (allow / deny / ask) would change:
counts per kind of change and examples. Exit status 0 whatever changes; the
report is for a person to judge.

The candidate decides as the policy service would with it: its modules plus
the run-time rules of the running airlock as they are now (--runtime-rules
now, the default; "none" leaves them out) and the configuration's profile
bindings, so a change is the candidate's, not a missing rule's. Rules as they
were when each call was decided are not kept (a rule's history is bounded),
so "now" is what replay can offer.

Arguments the recorded decision redacted are seen by the candidate as
"[REDACTED]"; calls allowed by a standing grant are not re-decided.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return usageErr(cmd, "--policy DIR is required (a directory with the candidate *.rego and data.json)")
			}
			since, err := record.ParseSince(a.since, time.Now())
			if err != nil {
				return usageErr(cmd, "--since: %v", err)
			}
			if err := policyDirExists(dir); err != nil {
				return usageErr(cmd, "--policy: %v", err)
			}
			cfg, err := g.load()
			if err != nil {
				return err
			}
			var rules []*airlockv1.PolicyRule
			switch runtime {
			case "now":
				nc, _, err := g.connect(cmd.Context(), cfg)
				if err != nil {
					return fmt.Errorf("read the run-time rules of the running airlock: %w (start it, or pass --runtime-rules none to replay the candidate alone)", err)
				}
				rules, err = runtimeRules(cmd.Context(), policyapi.New(nc, seal.Key{}, "cli"))
				nc.Close()
				if err != nil {
					return fmt.Errorf("read the run-time rules of the running airlock: %w (pass --runtime-rules none to replay the candidate alone)", err)
				}
			case "none":
			default:
				return usageErr(cmd, "--runtime-rules is now or none, not %q", runtime)
			}
			ev, _, err := evaluatorWith(cmd.Context(), cfg, dir, rules)
			if err != nil {
				return fmt.Errorf("candidate policy: %w", err)
			}
			rd, closeFn, err := a.open(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer closeFn()
			decide := func(ctx context.Context, call *airlockv1.ToolCall, at time.Time) (*airlockv1.Decision, error) {
				return ev.Evaluate(ctx, call, at)
			}
			rep, err := replay.Run(cmd.Context(), rd, decide, replay.Options{Since: since, Examples: examples})
			if err != nil {
				return err
			}
			if asJSON {
				b, _ := json.Marshal(struct {
					Candidate    string `json:"candidate_revision"`
					RuntimeRules int    `json:"runtime_rules"`
					replay.Report
				}{ev.Revision(), len(rules), rep})
				fmt.Fprintln(cmd.OutOrStdout(), string(b))
				return nil
			}
			printReplay(cmd.OutOrStdout(), dir, ev.Revision(), len(rules), rd.Source(), rep)
			return nil
		},
	}
	a.addDSN(cmd)
	cmd.Flags().StringVar(&dir, "policy", "", "directory of the candidate policy (*.rego and data.json)")
	cmd.Flags().StringVar(&a.since, "since", "7d", "replay decisions recorded since: 7d, 12h, a date or RFC 3339 (\"\" for all)")
	cmd.Flags().IntVar(&examples, "examples", 5, "examples shown per kind of change")
	cmd.Flags().StringVar(&runtime, "runtime-rules", "now", "run-time rules the candidate decides with: now (those of the running airlock) or none")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func printReplay(out io.Writer, dir, rev string, runtimeRules int, source string, r replay.Report) {
	fmt.Fprintf(out, "replayed %d recorded decision(s) from %s with the policy in %s (revision %s) and %d run-time rule(s) in force now\n", r.Replayed, source, dir, rev, runtimeRules)
	fmt.Fprintf(out, "  would change: %d   unchanged: %d (%d decided by another rule)\n", r.Changed, r.Unchanged, r.RuleChanged)
	if r.Granted > 0 || r.Redacted > 0 || r.Errors > 0 {
		fmt.Fprintf(out, "  not re-decided (standing grant): %d   with redacted arguments: %d   policy errors: %d\n", r.Granted, r.Redacted, r.Errors)
	}
	for _, t := range r.Transitions {
		fmt.Fprintf(out, "\n%s → %s: %d call(s)\n", t.From, t.To, t.Count)
		for _, c := range t.Examples {
			e := escape.Terminal // the recorded calls are what agents wrote
			fmt.Fprintf(out, "  %s rev %d  %s  agent %s  at %s\n    was %s (rule %s: %s)\n    now %s (rule %s: %s)\n",
				e(c.Call), c.Revision, e(c.Tool), e(c.Agent), c.At.UTC().Format(time.RFC3339),
				e(c.Before), e(dash(c.BeforeRule)), e(c.BeforeReason), e(c.After), e(dash(c.AfterRule)), e(c.AfterReason))
			if c.Error != "" {
				fmt.Fprintf(out, "    policy error: %s\n", e(c.Error))
			}
		}
	}
	if r.Changed == 0 {
		fmt.Fprintln(out, "\nno decision would change")
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
