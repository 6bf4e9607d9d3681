package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/audit/record"
	"github.com/airlock-gate/airlock/services/audit/store"
	"github.com/airlock-gate/airlock/services/audit/suggest"
	"github.com/airlock-gate/airlock/services/console"
	"github.com/airlock-gate/airlock/services/policy/decide"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/escape"
	"github.com/airlock-gate/airlock/services/shared/policyapi"
	"github.com/airlock-gate/airlock/services/shared/seal"
)

// suggestConfig is the engine's configuration from policy.suggest.
func suggestConfig(cfg config.Config) (suggest.Config, time.Time, error) {
	s := cfg.Policy.Suggest
	since, err := record.ParseSince(s.Since, time.Now())
	if err != nil {
		return suggest.Config{}, time.Time{}, fmt.Errorf("policy.suggest.since: %w", err)
	}
	return suggest.Config{MinApprovals: s.MinApprovals, MinApprovers: s.MinApprovers, AllowRisks: s.AllowRisks, MinPathDepth: s.MinPathDepth,
		MinPathsPerDirectory: s.MinPathsPerDirectory}, since, nil
}

// suggestions proposes grants from the trail in rd and proves each by
// replay with the policy in force (policy.dir or the built-in one, with
// the run-time rules given and the profile bindings), applying grants as
// the policy service does (decide.GrantApplies).
func suggestions(ctx context.Context, cfg config.Config, rd store.Reader, rules []*airlockv1.PolicyRule, scfg suggest.Config, since time.Time) (suggest.Report, error) {
	ev, name, err := evaluatorWith(ctx, cfg, "", rules)
	if err != nil {
		return suggest.Report{}, fmt.Errorf("the policy in force (%s): %w", name, err)
	}
	decideNow := func(ctx context.Context, call *airlockv1.ToolCall, at time.Time) (*airlockv1.Decision, error) {
		return ev.Evaluate(ctx, call, at)
	}
	return suggest.Run(ctx, rd, scfg, decideNow, decide.GrantApplies, since)
}

func newPolicySuggestCmd(g *globals) *cobra.Command {
	var (
		a       auditFlags
		asJSON  bool
		runtime string
		minN    int
		minP    int
		minDir  int
		risks   []string
	)
	cmd := &cobra.Command{
		Use:   "suggest [--json]",
		Short: "Propose the narrowest standing grants for calls people keep approving, proven by replay",
		Long: `Reads the decided calls from the audit trail (ClickHouse, or the events
stream), groups one agent's calls by tool, asking rule and argument shape, and
for each group approved at least --min-approvals times by --min-approvers
distinct people (or by the requester confirming their own calls), with no
rejection, request for changes, edit or expiry, proposes the narrowest
standing grant that covers it: exact values where they never varied; for a
path, the files directly in a directory that itself directly holds at least
--min-paths-per-directory (default 3) approved paths, never a name starting
with "." nor anything deeper, and every other approved path exactly; a
command prefix only as long as the approved commands share. High and
critical risk, redacted arguments, quorums and varying numbers are never
proposed.

Each proposal is replayed over the recorded history with the policy in force
and the run-time rules of the running airlock (--runtime-rules now) or none;
one that would allow any call that was rejected, sent back, edited, expired,
canceled or denied is dropped, and so is one whose grant the policy in force
would let answer a probe: the same call at a dotfile or in a hidden directory
(.ssh, .git) of a widened directory, below it or beside it. Nothing is
adopted: an admin adopts on the console's Suggestions page. Dismissed suggestions are marked.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.load()
			if err != nil {
				return err
			}
			scfg, since, err := suggestConfig(cfg)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("since") {
				if since, err = record.ParseSince(a.since, time.Now()); err != nil {
					return usageErr(cmd, "--since: %v", err)
				}
			}
			if minN > 0 {
				scfg.MinApprovals = minN
			}
			if minP > 0 {
				scfg.MinApprovers = minP
			}
			if minDir > 0 {
				scfg.MinPathsPerDirectory = minDir
			}
			if len(risks) > 0 {
				scfg.AllowRisks = risks
			}
			var rules []*airlockv1.PolicyRule
			dismissed := map[string]console.Dismissal{}
			switch runtime {
			case "now":
				nc, js, err := g.connect(cmd.Context(), cfg)
				if err != nil {
					return fmt.Errorf("read the run-time rules of the running airlock: %w (start it, or pass --runtime-rules none to decide with the policy alone)", err)
				}
				defer nc.Close()
				if rules, err = runtimeRules(cmd.Context(), policyapi.New(nc, seal.Key{}, "cli")); err != nil {
					return fmt.Errorf("read the run-time rules of the running airlock: %w (pass --runtime-rules none to decide with the policy alone)", err)
				}
				if kv, err := js.KeyValue(cmd.Context(), cfg.Buckets.Console); err == nil {
					if dismissed, err = console.Dismissals(cmd.Context(), kv); err != nil {
						return err
					}
				}
			case "none":
			default:
				return usageErr(cmd, "--runtime-rules is now or none, not %q", runtime)
			}
			rd, closeFn, err := a.open(cmd.Context(), g)
			if err != nil {
				return err
			}
			defer closeFn()
			rep, err := suggestions(cmd.Context(), cfg, rd, rules, scfg, since)
			if err != nil {
				return err
			}
			if asJSON {
				type out struct {
					suggest.Report
					RuntimeRules int                          `json:"runtime_rules"`
					Dismissed    map[string]console.Dismissal `json:"dismissed"`
				}
				b, err := json.Marshal(out{rep, len(rules), dismissed})
				if err != nil {
					return fmt.Errorf("encode the report: %w", err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s\n", escape.JSON(b)) // as every --json: nothing hidden
				return nil
			}
			printSuggestions(cmd.OutOrStdout(), rep, len(rules), dismissed)
			if len(rep.Suggestions) > 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "\nAdopt one on the console's Suggestions page (admins only); nothing is adopted automatically.")
			}
			return nil
		},
	}
	a.addDSN(cmd)
	f := cmd.Flags()
	f.StringVar(&a.since, "since", "", "propose from calls asked since: 30d, 12h, a date or RFC 3339 (default policy.suggest.since, else all); the proof always replays the whole trail")
	f.StringVar(&runtime, "runtime-rules", "now", "run-time rules the replay decides with: now (those of the running airlock) or none")
	f.IntVar(&minN, "min-approvals", 0, "approvals a group needs (default policy.suggest.min_approvals, else 5)")
	f.IntVar(&minP, "min-approvers", 0, "distinct people among them (default policy.suggest.min_approvers, else 2)")
	f.IntVar(&minDir, "min-paths-per-directory", 0, "distinct approved paths a directory must directly hold before its other files are proposed (default policy.suggest.min_paths_per_directory, else 3)")
	f.StringArrayVar(&risks, "allow-risk", nil, "also propose for this risk: high or critical (repeatable)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object")
	g.dataFlag(cmd)
	return cmd
}

func printSuggestions(out io.Writer, rep suggest.Report, runtimeRules int, dismissed map[string]console.Dismissal) {
	e := escape.Terminal // agents chose the arguments, tools and ids shown here
	fmt.Fprintf(out, "%d decided call(s) read from the %s; %d asked a person. Replayed with the policy in force and %d run-time rule(s).\n",
		rep.Decided, rep.Source, rep.Asks, runtimeRules)
	share := 0.0
	if rep.Asks > 0 {
		share = 100 * float64(rep.AsksRemoved) / float64(rep.Asks)
	}
	fmt.Fprintf(out, "%d suggestion(s), proven by replay: together they would have removed %d of %d asks (%.1f%%).\n", len(rep.Suggestions), rep.AsksRemoved, rep.Asks, share)
	for _, s := range rep.Suggestions {
		mark := ""
		if d, ok := dismissed[s.ID]; ok {
			mark = " (dismissed by " + e(d.By) + ")"
		}
		p := s.Proof
		fmt.Fprintf(out, "\n%s%s\n  %s\n", s.ID, mark, e(s.Scope))
		for _, w := range s.Widened {
			fmt.Fprintf(out, "  widened: %s\n", e(w))
		}
		fmt.Fprintf(out, "  evidence: approved %d times by %s, median time to decide %s; answers rule %s (risk %s)\n",
			s.Approvals, e(strings.Join(s.Approvers, ", ")), s.MedianTimeToDecide.Round(100*time.Millisecond), e(s.RuleID), dash(s.Risk))
		fmt.Fprintf(out, "  replay: %d decisions; removes %d asks, saves %s of reviewers' time (%s); allows no refused call and none of %d probe(s)\n",
			p.Replayed, p.AsksRemoved, p.ReviewerTimeSaved.Round(100*time.Millisecond), e(perReviewer(p.PerReviewer)), p.Probes)
	}
	for _, s := range rep.Dropped {
		p := s.Proof
		if len(p.Violations) > 0 {
			fmt.Fprintf(out, "\ndropped by replay: %s (%d refused call(s) it would allow, first %s of agent %s: %s)\n", e(s.Scope), len(p.Violations),
				e(p.Violations[0].Call), e(p.Violations[0].Agent), p.Violations[0].Outcome)
			continue
		}
		fmt.Fprintf(out, "\ndropped by its probes: %s (it would allow %d path(s) nobody approved anything like, first %s %s)\n", e(s.Scope), len(p.ProbesAllowed),
			e(p.ProbesAllowed[0].Pointer), e(p.ProbesAllowed[0].Path))
	}
	if len(rep.Skipped) > 0 {
		fmt.Fprintf(out, "\nnot proposed:\n")
		for _, k := range rep.Skipped {
			fmt.Fprintf(out, "  agent %s, %s (%d calls): %s\n", e(k.Agent), e(k.Tool), k.Calls, e(k.Why))
		}
	}
}

func perReviewer(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
