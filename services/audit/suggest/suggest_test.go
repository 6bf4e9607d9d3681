package suggest_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/audit/suggest"
	"github.com/airlock-gate/airlock/services/shared/grant"
)

var t0 = time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)

// approvals makes n approved asks of agent's tool, the i-th with args(i),
// approved alternately by alice and bob.
func approvals(agent, tool string, n int, args func(i int) map[string]any) []suggest.Call {
	var out []suggest.Call
	for i := range n {
		a, err := structpb.NewStruct(args(i))
		if err != nil {
			panic(err)
		}
		out = append(out, suggest.Call{Agent: agent, CallID: fmt.Sprintf("%s-%s-%d", agent, tool, i), Revision: 1, Server: "fs", Tool: tool, Args: a,
			Decision: &airlockv1.Decision{Action: airlockv1.Action_ACTION_ASK, RuleId: "ask-writes", Risk: airlockv1.Risk_RISK_MEDIUM},
			AskedAt:  t0.Add(time.Duration(i) * time.Minute), DecidedAt: t0.Add(time.Duration(i)*time.Minute + 30*time.Second),
			Outcome: suggest.Approved, Approvers: []string{[]string{"alice", "bob"}[i%2]}})
	}
	return out
}

func with(cs []suggest.Call, f func(i int, c *suggest.Call)) []suggest.Call {
	for i := range cs {
		f(i, &cs[i])
	}
	return cs
}

func TestProposeDrawsTheNarrowestGrantFromWhatPeopleApproved(t *testing.T) {
	file := func(dir string) func(int) map[string]any {
		return func(i int) map[string]any {
			return map[string]any{"path": fmt.Sprintf("%s/f%d.txt", dir, i), "content": fmt.Sprintf("v%d", i)}
		}
	}
	cases := []struct {
		name    string
		calls   []suggest.Call
		cfg     suggest.Config
		want    string // substring of grant.Describe of the one suggestion, "" for none
		skipped string // substring of the one skip reason
	}{
		{"pins_a_value_that_never_varied", approvals("bot", "write_file", 5, func(int) map[string]any { return map[string]any{"path": "/srv/app/notes.txt", "mode": 420.0} }),
			suggest.Config{}, `/path is exactly "/srv/app/notes.txt"`, ""},
		{"globs_paths_only_to_their_common_directory", approvals("bot", "write_file", 6, file("/srv/app/docs")),
			suggest.Config{}, "/path matches /srv/app/docs/*", ""},
		{"uses_double_star_only_when_approved_paths_are_deeper", approvals("bot", "write_file", 6, func(i int) map[string]any {
			return map[string]any{"path": fmt.Sprintf("/srv/app/%s/f.txt", []string{"a", "b/c"}[i%2]), "content": "x"}
		}), suggest.Config{}, "/path matches /srv/app/**", ""},
		{"keeps_a_command_prefix_as_long_as_the_commands_share", approvals("bot", "run_shell", 5, func(i int) map[string]any {
			return map[string]any{"command": fmt.Sprintf("go test ./pkg/%d", i)}
		}), suggest.Config{}, `/command is a plain command starting with "go test"`, ""},
		{"pins_a_few_alternatives_of_plain_text", approvals("bot", "set_label", 6, func(i int) map[string]any { return map[string]any{"label": []string{"bug", "docs"}[i%2]} }),
			suggest.Config{}, "{bug,docs}", ""},
		{"never_proposes_below_the_approval_count", approvals("bot", "write_file", 4, file("/srv/a")), suggest.Config{}, "", "approved 4 times; 5 are needed"},
		{"honours_a_configured_approval_count", approvals("bot", "write_file", 3, file("/srv/a")), suggest.Config{MinApprovals: 3}, "/path matches /srv/a/*", ""},
		{"needs_two_distinct_people", with(approvals("bot", "write_file", 6, file("/srv/a")), func(_ int, c *suggest.Call) { c.Approvers = []string{"alice"} }),
			suggest.Config{}, "", "1 person; 2 distinct"},
		{"counts_a_requester_confirming_their_own_calls", with(approvals("bot", "write_file", 5, file("/srv/a")), func(_ int, c *suggest.Call) {
			c.Approvers, c.OnBehalfOf, c.Verified = []string{"carol"}, "carol", true
			c.Decision.Approvers = []string{"requester"}
		}), suggest.Config{}, "/path matches /srv/a/*", ""},
		{"drops_a_group_with_one_rejection", with(approvals("bot", "write_file", 8, file("/srv/a")), func(i int, c *suggest.Call) {
			if i == 3 {
				c.Outcome = suggest.Rejected
			}
		}), suggest.Config{}, "", "was rejected"},
		{"ignores_a_rejection_outside_what_it_would_allow", with(approvals("bot", "write_file", 8, file("/srv/docs")), func(i int, c *suggest.Call) {
			if i == 3 {
				c.Outcome, c.Args.Fields["path"] = suggest.Rejected, structpb.NewStringValue("/etc/passwd")
			}
		}), suggest.Config{}, "/path matches /srv/docs/*", ""},
		{"drops_a_group_with_an_edit", with(approvals("bot", "write_file", 8, file("/srv/a")), func(i int, c *suggest.Call) {
			if i == 7 {
				c.Outcome = suggest.Edited
			}
		}), suggest.Config{}, "", "was edited"},
		{"drops_a_group_with_an_expiry", with(approvals("bot", "write_file", 8, file("/srv/a")), func(i int, c *suggest.Call) {
			if i == 0 {
				c.Outcome = suggest.Expired
			}
		}), suggest.Config{}, "", "was expired"},
		{"never_proposes_high_risk", with(approvals("bot", "write_file", 6, file("/srv/a")), func(_ int, c *suggest.Call) { c.Decision.Risk = airlockv1.Risk_RISK_HIGH }),
			suggest.Config{}, "", "risk is high"},
		{"proposes_high_risk_when_configured", with(approvals("bot", "write_file", 6, file("/srv/a")), func(_ int, c *suggest.Call) { c.Decision.Risk = airlockv1.Risk_RISK_HIGH }),
			suggest.Config{AllowRisks: []string{"high"}}, "/path matches /srv/a/*", ""},
		{"never_proposes_from_redacted_arguments", with(approvals("bot", "write_file", 6, file("/srv/a")), func(_ int, c *suggest.Call) { c.Decision.Redact = []string{"/content"} }),
			suggest.Config{}, "", "redacts"},
		{"never_widens_a_varying_number", approvals("bot", "resize", 6, func(i int) map[string]any { return map[string]any{"size": float64(i)} }),
			suggest.Config{}, "", "numeric range"},
		{"never_globs_paths_that_share_only_the_root", approvals("bot", "write_file", 6, func(i int) map[string]any {
			return map[string]any{"path": fmt.Sprintf("/%d/x", i)}
		}), suggest.Config{}, "", "share no directory"},
		{"never_globs_a_directory_shallower_than_configured", approvals("bot", "write_file", 6, func(i int) map[string]any {
			return map[string]any{"path": fmt.Sprintf("/home/%s/notes.txt", []string{"alice", "bob"}[i%2])}
		}), suggest.Config{}, "", "2 levels deep"},
		{"globs_a_shallow_directory_when_configured", approvals("bot", "write_file", 6, func(i int) map[string]any {
			return map[string]any{"path": fmt.Sprintf("/home/%s/notes.txt", []string{"alice", "bob"}[i%2])}
		}), suggest.Config{MinPathDepth: 1}, "/path matches /home/**", ""},
		{"never_globs_a_path_with_dot_dot", with(approvals("bot", "write_file", 6, file("/srv/a")), func(i int, c *suggest.Call) {
			if i == 2 {
				c.Args.Fields["path"] = structpb.NewStringValue("/srv/a/../../etc/passwd")
			}
		}), suggest.Config{}, "", "not a clean path"},
		{"never_takes_a_chained_command_as_a_prefix", approvals("bot", "run_shell", 5, func(i int) map[string]any {
			return map[string]any{"command": fmt.Sprintf("ls; rm -rf /%d", i)}
		}), suggest.Config{}, "", "no plain leading words"},
		{"quotes_glob_characters_in_a_directory", approvals("bot", "write_file", 5, file("/srv/[x]")), suggest.Config{}, `/srv/\[x\]/*`, ""},
		{"stops_at_a_quorum", with(approvals("bot", "write_file", 6, file("/srv/a")), func(_ int, c *suggest.Call) { c.Decision.Quorum = 2 }),
			suggest.Config{}, "", "quorum"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, skipped := suggest.Propose(tc.calls, tc.cfg)
			if tc.want == "" {
				if len(got) != 0 {
					t.Fatalf("proposed %s; want nothing", grant.Describe(got[0].Grant))
				}
				if len(skipped) != 1 || !strings.Contains(skipped[0].Why, tc.skipped) {
					t.Fatalf("skipped %+v; want one saying %q", skipped, tc.skipped)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("proposed %d suggestions (skipped %+v); want 1", len(got), skipped)
			}
			s := got[0]
			if d := grant.Describe(s.Grant); !strings.Contains(d, tc.want) {
				t.Fatalf("proposed %q; want it to say %q", d, tc.want)
			}
			if s.Grant.AgentId != "bot" || s.Grant.RuleId != "ask-writes" || !s.Grant.OnlyListedArguments {
				t.Fatalf("the grant is not pinned to the agent, the asking rule and the listed arguments: %v", s.Grant)
			}
			approved := 0
			for _, c := range tc.calls {
				if c.Outcome == suggest.Approved {
					approved++
				}
			}
			if s.Approvals != approved || len(s.Evidence) != approved || s.MedianTimeToDecide != 30*time.Second {
				t.Fatalf("evidence: %d approvals, %d calls, median %s", s.Approvals, len(s.Evidence), s.MedianTimeToDecide)
			}
		})
	}
}

// One agent's flood never counts toward, nor reaches, another agent: each
// agent's calls make their own group, and each grant names its agent.
func TestAGroupIsOneAgentsAlone(t *testing.T) {
	flood := approvals("mallory-bot", "write_file", 500, func(i int) map[string]any {
		return map[string]any{"path": fmt.Sprintf("/srv/shared/f%d", i)}
	})
	victim := approvals("prod-bot", "write_file", 2, func(i int) map[string]any { return map[string]any{"path": fmt.Sprintf("/srv/shared/g%d", i)} })
	got, _ := suggest.Propose(append(flood, victim...), suggest.Config{})
	for _, s := range got {
		if s.Agent != "mallory-bot" || s.Grant.AgentId != "mallory-bot" {
			t.Fatalf("a suggestion reaches another agent: %s", grant.Describe(s.Grant))
		}
	}
	if len(got) != 1 {
		t.Fatalf("got %d suggestions; want the flooding agent's own one", len(got))
	}
}
