package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/audit/record"
	"github.com/airlock-gate/airlock/services/audit/replay"
	"github.com/airlock-gate/airlock/services/policy/decide"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/escape"
	"github.com/airlock-gate/airlock/services/shared/grant"
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
		grants   string
	)
	cmd := &cobra.Command{
		Use:   "replay --policy DIR [--since 7d]",
		Short: "Re-decide recorded calls with a candidate policy and report every decision that would change",
		Long: `Reads the policy decisions recorded in the audit trail (ClickHouse, or the
events stream when none is configured), decides each call again with the
policy in --policy DIR (its *.rego and data.json) as of the time it was first
decided (the recorded decided_at is the policy's input.time and what
time.now_ns() answers), and reports the calls whose action (allow / deny /
ask) would change: counts per kind of change and examples. Exit status 0
whatever changes; the report is for a person to judge.

The candidate decides as the policy service would with it: its modules plus
the run-time rules of the running airlock as they are now (--runtime-rules
now, the default; "none" leaves them out), the configuration's profile
bindings, and the standing grants in force now (--grants now, the default;
"none" leaves them out): an ask a grant in force answers is an allow, as the
policy service would decide it, though replay spends no use of it (a live
grant answers every call it covers; one used up before the replay answers
only the calls that spent it). So a change is the
candidate's, not a missing rule's or grant's. Rules and grants as they were
when each call was decided are not kept (their history is bounded), so "now"
is what replay can offer: a call asked before a grant was made shows as a
change to allow, naming the grant.

Every recorded call is re-decided, those a grant allowed too. Arguments the
recorded decision redacted are seen by the candidate as "[REDACTED]".`,
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
			if runtime != "now" && runtime != "none" {
				return usageErr(cmd, "--runtime-rules is now or none, not %q", runtime)
			}
			if grants != "now" && grants != "none" {
				return usageErr(cmd, "--grants is now or none, not %q", grants)
			}
			var (
				rules   []*airlockv1.PolicyRule
				inForce []*airlockv1.StandingGrant
			)
			if runtime == "now" || grants == "now" {
				nc, js, err := g.connect(cmd.Context(), cfg)
				if err != nil {
					return fmt.Errorf("read the run-time rules and standing grants of the running airlock: %w (start it, or pass --runtime-rules none --grants none to replay the candidate alone)", err)
				}
				defer nc.Close()
				if runtime == "now" {
					if rules, err = runtimeRules(cmd.Context(), policyapi.New(nc, seal.Key{}, "cli")); err != nil {
						return fmt.Errorf("read the run-time rules of the running airlock: %w (pass --runtime-rules none to replay the candidate alone)", err)
					}
				}
				if grants == "now" {
					if inForce, err = grantsInForce(cmd.Context(), js, cfg.Buckets.Grants, time.Now()); err != nil {
						return fmt.Errorf("read the standing grants in force: %w (pass --grants none to replay without them)", err)
					}
				}
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
			rep, err := replay.Run(cmd.Context(), rd, replay.WithGrants(ev.Evaluate, inForce, decide.GrantApplies), replay.Options{Since: since, Examples: examples})
			if err != nil {
				return err
			}
			if asJSON {
				b, _ := json.Marshal(struct {
					Candidate    string `json:"candidate_digest"`
					RuntimeRules int    `json:"runtime_rules"`
					Grants       int    `json:"grants_in_force"`
					replay.Report
				}{ev.Code().Hash, len(rules), len(inForce), rep})
				fmt.Fprintln(cmd.OutOrStdout(), string(b))
				return nil
			}
			printReplay(cmd.OutOrStdout(), dir, ev.Code().Hash, ruleIDs(rules), len(inForce), rd.Source(), rep)
			return nil
		},
	}
	a.addDSN(cmd)
	cmd.Flags().StringVar(&dir, "policy", "", "directory of the candidate policy (*.rego and data.json)")
	cmd.Flags().StringVar(&a.since, "since", "7d", "replay decisions recorded since: 7d, 12h, a date or RFC 3339 (\"\" for all)")
	cmd.Flags().IntVar(&examples, "examples", 5, "examples shown per kind of change")
	cmd.Flags().StringVar(&runtime, "runtime-rules", "now", "run-time rules the candidate decides with: now (those of the running airlock) or none")
	cmd.Flags().StringVar(&grants, "grants", "now", "standing grants that answer the candidate's asks: now (those in force, none spent) or none")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	g.dataFlag(cmd)
	return cmd
}

// printReplay reports r for a person. The candidate is named by its digest
// (decide.Code.Hash), the id `policy shadow` starts it under and lists its
// divergences by, so the two reports can be matched.
//
// The run-time rules in force now decide with the candidate, so a change can
// be theirs rather than the candidate's (a rule added since the call was
// decided): a rule of theirs is marked "run-time", and a report with changes
// says how to replay the candidate alone.
func printReplay(out io.Writer, dir, digest string, runtimeRules []string, grants int, source string, r replay.Report) {
	fmt.Fprintf(out, "replayed %d recorded decision(s) from %s with candidate %s (the policy in %s), %d run-time rule(s) and %d standing grant(s) in force now\n", r.Replayed, source, digest, escape.Terminal(dir), len(runtimeRules), grants)
	fmt.Fprintf(out, "  would change: %d   unchanged: %d (%d decided by another rule)\n", r.Changed, r.Unchanged, r.RuleChanged)
	if r.Changed > 0 && len(runtimeRules) > 0 {
		fmt.Fprintln(out, "  a rule marked run-time is the running airlock's, not the candidate's: `--runtime-rules none` replays the candidate alone")
	}
	runtime := map[string]bool{}
	for _, id := range runtimeRules {
		runtime[id] = true
	}
	rule := func(id string) string {
		if runtime[id] {
			return escape.Terminal(id) + ", run-time"
		}
		return escape.Terminal(dash(id))
	}
	if r.Granted > 0 || r.GrantAllowed > 0 || r.Redacted > 0 || r.Errors > 0 {
		fmt.Fprintf(out, "  allowed by a standing grant: then %d, now %d   with redacted arguments: %d   policy errors: %d\n", r.Granted, r.GrantAllowed, r.Redacted, r.Errors)
	}
	for _, t := range r.Transitions {
		fmt.Fprintf(out, "\n%s → %s: %d call(s)\n", t.From, t.To, t.Count)
		for _, c := range t.Examples {
			e := escape.Terminal // the recorded calls are what agents wrote
			fmt.Fprintf(out, "  %s rev %d  %s  agent %s  at %s\n    was %s (rule %s%s: %s)\n    now %s (rule %s%s: %s)\n",
				e(c.Call), c.Revision, e(c.Tool), e(c.Agent), c.At.UTC().Format(time.RFC3339),
				e(c.Before), rule(c.BeforeRule), byGrant(c.BeforeGrant), e(c.BeforeReason), e(c.After), rule(c.AfterRule), byGrant(c.AfterGrant), e(c.AfterReason))
			if c.Error != "" {
				fmt.Fprintf(out, "    policy error: %s\n", e(c.Error))
			}
		}
		if more := t.Count - len(t.Examples); more > 0 {
			fmt.Fprintf(out, "  … and %d more (--examples N shows more)\n", more)
		}
	}
	if r.Changed == 0 {
		fmt.Fprintln(out, "\nno decision would change")
	}
}

// ruleIDs are the ids of rules.
func ruleIDs(rules []*airlockv1.PolicyRule) []string {
	ids := make([]string, 0, len(rules))
	for _, r := range rules {
		ids = append(ids, r.GetId())
	}
	return ids
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// byGrant names the standing grant that allowed a call, if one did.
func byGrant(id string) string {
	if id == "" {
		return ""
	}
	return ", standing grant " + escape.Terminal(id)
}

// grantsInForce are the standing grants the policy service decides with now,
// read from the grants bucket it watches: every grant neither revoked nor
// expired at now, in the order the policy service tries them. A used-up one
// is kept: it still answers the call revisions that spent it (as it would a
// redelivery of them), and no other.
func grantsInForce(ctx context.Context, js jetstream.JetStream, bucket string, now time.Time) ([]*airlockv1.StandingGrant, error) {
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("grants bucket %s: %w", bucket, err)
	}
	keys, err := bus.Keys(ctx, kv, ">")
	if err != nil {
		return nil, fmt.Errorf("list the grants in bucket %s: %w", bucket, err)
	}
	var gs []*airlockv1.StandingGrant
	ids := map[*airlockv1.StandingGrant]string{}
	for _, key := range keys {
		en, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("read grant %s: %w", key, err)
		}
		g := &airlockv1.StandingGrant{}
		if proto.Unmarshal(en.Value(), g) != nil {
			continue // an unreadable grant grants nothing, to the policy service too
		}
		if g.GetRevoked() || grant.Expired(g, now) {
			continue
		}
		if g.Id == "" {
			g.Id = key // as the policy service names it
		}
		gs = append(gs, g)
		ids[g] = key
	}
	slices.SortFunc(gs, func(a, b *airlockv1.StandingGrant) int { return decide.CompareGrants(a, b, ids[a], ids[b]) })
	return gs, nil
}
