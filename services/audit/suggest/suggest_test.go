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

// proposeOne proposes from calls and expects one suggestion, or, when
// skipped is set, none and one group skipped for a reason saying skipped
// (then it returns false).
func proposeOne(t *testing.T, calls []suggest.Call, cfg suggest.Config, skipped string) (suggest.Suggestion, bool) {
	t.Helper()
	got, skips := suggest.Propose(calls, cfg)
	if skipped != "" {
		if len(got) != 0 {
			t.Fatalf("proposed %s; want nothing", grant.Describe(got[0].Grant))
		}
		if len(skips) != 1 || !strings.Contains(skips[0].Why, skipped) {
			t.Fatalf("skipped %+v; want one saying %q", skips, skipped)
		}
		return suggest.Suggestion{}, false
	}
	if len(got) != 1 {
		t.Fatalf("proposed %d suggestions (skipped %+v); want 1", len(got), skips)
	}
	return got[0], true
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
			suggest.Config{}, "/path matches /srv/app/docs/[!./]*", ""},
		{"never_widens_to_a_common_ancestor_of_directories_holding_few_paths", approvals("bot", "write_file", 6, func(i int) map[string]any {
			return map[string]any{"path": fmt.Sprintf("/srv/app/%s/f.txt", []string{"a", "b/c"}[i%2]), "content": "x"}
		}), suggest.Config{}, "/path matches {/srv/app/a/f.txt,/srv/app/b/c/f.txt}", ""},
		{"keeps_a_command_prefix_as_long_as_the_commands_share", approvals("bot", "run_shell", 5, func(i int) map[string]any {
			return map[string]any{"command": fmt.Sprintf("go test ./pkg/%d", i)}
		}), suggest.Config{}, `/command is a plain command starting with "go test"`, ""},
		{"pins_a_few_alternatives_of_plain_text", approvals("bot", "set_label", 6, func(i int) map[string]any { return map[string]any{"label": []string{"bug", "docs"}[i%2]} }),
			suggest.Config{}, "{bug,docs}", ""},
		{"never_proposes_below_the_approval_count", approvals("bot", "write_file", 4, file("/srv/a")), suggest.Config{}, "", "approved 4 times; 5 are needed"},
		{"honours_a_configured_approval_count", approvals("bot", "write_file", 3, file("/srv/a")), suggest.Config{MinApprovals: 3}, "/path matches /srv/a/[!./]*", ""},
		{"needs_two_distinct_people", with(approvals("bot", "write_file", 6, file("/srv/a")), func(_ int, c *suggest.Call) { c.Approvers = []string{"alice"} }),
			suggest.Config{}, "", "1 person; 2 distinct"},
		{"counts_a_requester_confirming_their_own_calls", with(approvals("bot", "write_file", 5, file("/srv/a")), func(_ int, c *suggest.Call) {
			c.Approvers, c.OnBehalfOf, c.Verified = []string{"carol"}, "carol", true
			c.Decision.Approvers = []string{"requester"}
		}), suggest.Config{}, "/path matches /srv/a/[!./]*", ""},
		{"drops_a_group_with_one_rejection", with(approvals("bot", "write_file", 8, file("/srv/a")), func(i int, c *suggest.Call) {
			if i == 3 {
				c.Outcome = suggest.Rejected
			}
		}), suggest.Config{}, "", "was rejected"},
		{"ignores_a_rejection_outside_what_it_would_allow", with(approvals("bot", "write_file", 8, file("/srv/docs")), func(i int, c *suggest.Call) {
			if i == 3 {
				c.Outcome, c.Args.Fields["path"] = suggest.Rejected, structpb.NewStringValue("/etc/passwd")
			}
		}), suggest.Config{}, "/path matches /srv/docs/[!./]*", ""},
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
			suggest.Config{AllowRisks: []string{"high"}}, "/path matches /srv/a/[!./]*", ""},
		{"never_proposes_from_redacted_arguments", with(approvals("bot", "write_file", 6, file("/srv/a")), func(_ int, c *suggest.Call) { c.Decision.Redact = []string{"/content"} }),
			suggest.Config{}, "", "redacts"},
		{"ranges_a_varying_number_from_the_lowest_to_the_highest_approved", approvals("bot", "resize", 6, func(i int) map[string]any { return map[string]any{"size": float64(i)} }),
			suggest.Config{}, "/size is a number from 0 to 5", ""},
		{"keeps_paths_that_share_only_the_root_exact", approvals("bot", "write_file", 6, func(i int) map[string]any {
			return map[string]any{"path": fmt.Sprintf("/%d/x", i)}
		}), suggest.Config{}, "/path matches {/0/x,/1/x,/2/x,/3/x,/4/x,/5/x}", ""},
		{"keeps_paths_in_a_directory_shallower_than_configured_exact", approvals("bot", "write_file", 6, func(i int) map[string]any {
			return map[string]any{"path": fmt.Sprintf("/home/%s.txt", []string{"a", "b", "c"}[i%3])}
		}), suggest.Config{}, "/path matches {/home/a.txt,/home/b.txt,/home/c.txt}", ""},
		{"globs_a_shallow_directory_when_configured", approvals("bot", "write_file", 6, func(i int) map[string]any {
			return map[string]any{"path": fmt.Sprintf("/home/%s.txt", []string{"a", "b", "c"}[i%3])}
		}), suggest.Config{MinPathDepth: 1}, "/path matches /home/[!./]*", ""},
		// The reviewer's five writes: only the directory that itself holds
		// three of them is widened, to its visible files; the others stay
		// exact, and /home/alice/** (their common directory) is never proposed.
		{"widens_only_a_directory_that_holds_several_approved_paths", approvals("bot", "claude__Write", 5, func(i int) map[string]any {
			return map[string]any{"file_path": []string{"/home/alice/proj/a.txt", "/home/alice/proj/b.txt", "/home/alice/proj/src/c.go", "/home/alice/notes.txt", "/home/alice/proj/d.txt"}[i], "content": fmt.Sprint(i)}
		}), suggest.Config{MinApprovers: 1}, "/file_path matches {/home/alice/notes.txt,/home/alice/proj/[!./]*,/home/alice/proj/src/c.go}", ""},
		{"keeps_an_approved_dotfile_exact_and_widens_to_no_other", approvals("bot", "write_file", 8, func(i int) map[string]any {
			return map[string]any{"path": []string{"/srv/a/x", "/srv/a/y", "/srv/a/z", "/srv/a/.env"}[i%4]}
		}), suggest.Config{}, "/path matches {/srv/a/.env,/srv/a/[!./]*}", ""},
		{"counts_distinct_paths_not_approvals", approvals("bot", "write_file", 8, func(i int) map[string]any {
			return map[string]any{"path": []string{"/srv/a/x", "/srv/a/y"}[i%2]}
		}), suggest.Config{}, "/path matches {/srv/a/x,/srv/a/y}", ""},
		{"honours_a_configured_paths_per_directory", approvals("bot", "write_file", 8, func(i int) map[string]any {
			return map[string]any{"path": []string{"/srv/a/x", "/srv/a/y"}[i%2]}
		}), suggest.Config{MinPathsPerDirectory: 2}, "/path matches /srv/a/[!./]*", ""},
		{"never_globs_a_path_with_dot_dot", with(approvals("bot", "write_file", 6, file("/srv/a")), func(i int, c *suggest.Call) {
			if i == 2 {
				c.Args.Fields["path"] = structpb.NewStringValue("/srv/a/../../etc/passwd")
			}
		}), suggest.Config{}, "", "not a clean path"},
		{"never_takes_a_chained_command_as_a_prefix", approvals("bot", "run_shell", 5, func(i int) map[string]any {
			return map[string]any{"command": fmt.Sprintf("ls; rm -rf /%d", i)}
		}), suggest.Config{}, "", "no plain leading words"},
		{"quotes_glob_characters_in_a_directory", approvals("bot", "write_file", 5, file("/srv/[x]")), suggest.Config{}, `/srv/\[x\]/[!./]*`, ""},
		{"keeps_slashed_values_that_are_not_paths_an_exact_list", approvals("bot", "push", 6, func(i int) map[string]any {
			return map[string]any{"ref": fmt.Sprintf("refs/heads/%s", []string{"a", "b"}[i%2])}
		}), suggest.Config{}, `/ref matches {refs/heads/a,refs/heads/b}`, ""},
		{"keeps_absolute_values_of_an_argument_not_named_a_path_an_exact_list", approvals("bot", "put_key", 6, func(i int) map[string]any {
			return map[string]any{"key": fmt.Sprintf("/config/db/%s", []string{"host", "port"}[i%2])}
		}), suggest.Config{}, `/key matches {/config/db/host,/config/db/port}`, ""},
		{"keeps_relative_paths_an_exact_list", approvals("bot", "write_file", 6, func(i int) map[string]any {
			return map[string]any{"path": fmt.Sprintf("docs/api/%s.md", []string{"a", "b"}[i%2])}
		}), suggest.Config{}, `/path matches {docs/api/a.md,docs/api/b.md}`, ""},
		{"globs_a_camel_case_path_name", approvals("bot", "write_file", 6, func(i int) map[string]any {
			return map[string]any{"targetDir": fmt.Sprintf("/srv/app/%s", []string{"a", "b", "c"}[i%3])}
		}), suggest.Config{}, `/targetDir matches /srv/app/[!./]*`, ""},
		{"does_not_read_profile_as_a_file_name", approvals("bot", "set_profile", 6, func(i int) map[string]any {
			return map[string]any{"profile": fmt.Sprintf("/srv/profiles/%s", []string{"a", "b"}[i%2])}
		}), suggest.Config{}, `/profile matches {/srv/profiles/a,/srv/profiles/b}`, ""},
		{"stops_at_a_quorum", with(approvals("bot", "write_file", 6, file("/srv/a")), func(_ int, c *suggest.Call) { c.Decision.Quorum = 2 }),
			suggest.Config{}, "", "quorum"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, ok := proposeOne(t, tc.calls, tc.cfg, tc.skipped)
			if !ok {
				return
			}
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

// A number that varied is proposed as a closed range running exactly from
// the lowest to the highest approved value, and not at all when a call
// people refused falls within it.
func TestProposeRangesANumberExactlyAsWideAsTheApprovals(t *testing.T) {
	sizes := func(vs ...float64) []suggest.Call {
		return approvals("bot", "resize", len(vs), func(i int) map[string]any { return map[string]any{"disk": "d1", "size": vs[i]} })
	}
	refuse := func(at int, outcome string, size float64) func(int, *suggest.Call) {
		return func(i int, c *suggest.Call) {
			if i == at {
				c.Outcome, c.Args.Fields["size"] = outcome, structpb.NewNumberValue(size)
			}
		}
	}
	cases := []struct {
		name     string
		calls    []suggest.Call
		min, max float64
		skipped  string // substring of the skip reason; "" when a range is proposed
	}{
		{"integers_give_their_lowest_and_highest", sizes(8, 3, 12, 5, 7), 3, 12, ""},
		{"floats_keep_their_exact_ends", sizes(0.25, 2.5, 1, 0.5, 1.75), 0.25, 2.5, ""},
		{"negative_numbers_range_below_zero", sizes(-40, -2, -17, -3, -9), -40, -2, ""},
		{"a_rejection_outside_the_range_leaves_it", with(sizes(3, 4, 5, 6, 7, 8), refuse(5, suggest.Rejected, 9)), 3, 7, ""},
		{"a_rejection_inside_the_range_stops_it", with(sizes(3, 4, 5, 6, 7, 12), refuse(2, suggest.Rejected, 5)), 0, 0, "was rejected"},
		{"a_rejection_on_an_end_stops_it", with(sizes(3, 4, 5, 6, 7, 12, 12), refuse(6, suggest.Rejected, 3)), 0, 0, "was rejected"},
		{"a_request_for_changes_inside_the_range_stops_it", with(sizes(3, 4, 5, 6, 7, 12), refuse(0, suggest.ChangesRequested, 10.5)), 0, 0, "was changes requested"},
		{"an_edit_inside_the_range_stops_it", with(sizes(3, 4, 5, 6, 7, 12), refuse(1, suggest.Edited, 11)), 0, 0, "was edited"},
		{"an_expiry_inside_the_range_stops_it", with(sizes(3, 4, 5, 6, 7, 12), refuse(1, suggest.Expired, 6)), 0, 0, "was expired"},
		{"numbers_past_exact_integers_get_no_range", sizes(1, 2, 3, 4, 1<<60), 0, 0, "no range fits it"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, ok := proposeOne(t, tc.calls, suggest.Config{}, tc.skipped)
			if !ok {
				return
			}
			g := s.Grant
			r := g.GetArgumentRanges()["/size"]
			if r.GetMin() != tc.min || r.GetMax() != tc.max || len(g.GetArgumentRanges()) != 1 {
				t.Fatalf("ranges %v; want /size from %v to %v exactly", g.GetArgumentRanges(), tc.min, tc.max)
			}
			if g.GetArgumentValues()["/disk"].GetStringValue() != "d1" || !g.GetOnlyListedArguments() {
				t.Fatalf("the argument that never varied is not pinned: %s", grant.Describe(g))
			}
			if want := fmt.Sprintf("/size is a number from %s to %s", grant.Number(tc.min), grant.Number(tc.max)); !strings.Contains(s.Scope, want) {
				t.Fatalf("scope %q; want it to say %q", s.Scope, want)
			}
		})
	}
}

// An argument whose name holds "/" or "~" is named in the grant by its
// escaped JSON pointer (RFC 6901), the grant the policy reads, and the
// approved calls fall within it.
func TestArgumentNamesAreEscapedAsJSONPointers(t *testing.T) {
	calls := approvals("bot", "tag", 5, func(int) map[string]any { return map[string]any{"a/b": "x", "c~d": "y"} })
	s, _ := proposeOne(t, calls, suggest.Config{}, "")
	vals := s.Grant.GetArgumentValues()
	if vals["/a~1b"].GetStringValue() != "x" || vals["/c~0d"].GetStringValue() != "y" || len(vals) != 2 || !s.Grant.GetOnlyListedArguments() {
		t.Fatalf("pinned %v; want /a~1b = x and /c~0d = y, only those", vals)
	}
}
