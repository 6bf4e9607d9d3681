package policy_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/policy/decide"
	"github.com/airlock-gate/airlock/services/shared/canon"
)

// TestPinnedGrantsAllowOnlyTheExactArguments: "always allow" pins every
// argument by value; a grant with pinned values applies only to a call whose
// arguments are exactly those (any JSON type, newlines included), and with
// only_listed_arguments to no call that adds another argument.
func TestPinnedGrantsAllowOnlyTheExactArguments(t *testing.T) {
	now := time.Now()
	multi := "line one\nline two"
	pinned := &airlockv1.StandingGrant{AgentId: "bot", Server: "demo", Tool: "write_file", RuleId: "write", OnlyListedArguments: true,
		ArgumentValues: map[string]*structpb.Value{
			"/path":    structpb.NewStringValue("notes.txt"),
			"/content": structpb.NewStringValue(multi),
			"/mode":    structpb.NewNumberValue(420),
			"/opts":    mustValue(t, map[string]any{"append": true, "tags": []any{"a", "b"}}),
		}}
	anyContent := &airlockv1.StandingGrant{AgentId: "bot", Server: "demo", Tool: "write_file", RuleId: "write", OnlyListedArguments: true,
		AnyArguments:   []string{"/content", "/opts"},
		ArgumentValues: map[string]*structpb.Value{"/path": structpb.NewStringValue("notes.txt"), "/mode": structpb.NewNumberValue(420)}}
	widened := &airlockv1.StandingGrant{AgentId: "bot", Server: "demo", Tool: "write_file", RuleId: "write",
		ArgumentValues: map[string]*structpb.Value{"/path": structpb.NewStringValue("notes.txt")}}
	underTmp := &airlockv1.StandingGrant{AgentId: "bot", Server: "demo", Tool: "write_file", RuleId: "write", OnlyListedArguments: true,
		ArgumentGlobs: map[string]string{"/path": "/tmp/**"}}
	exact := map[string]any{"path": "notes.txt", "content": multi, "mode": 420, "opts": map[string]any{"append": true, "tags": []any{"a", "b"}}}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for key, val := range exact {
			m[key] = val
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name  string
		grant *airlockv1.StandingGrant
		args  map[string]any
		want  bool
	}{
		{"applies_to_exactly_the_pinned_arguments", pinned, exact, true},
		{"refuses_a_string_that_differs_only_in_a_newline", pinned, with("content", "line one line two"), false},
		{"refuses_a_glob_looking_value_that_is_not_the_pinned_one", pinned, with("path", "*"), false},
		{"refuses_another_number", pinned, with("mode", 511), false},
		{"refuses_a_number_written_as_a_string", pinned, with("mode", "420"), false},
		{"refuses_an_object_with_another_member", pinned, with("opts", map[string]any{"append": true, "tags": []any{"a", "b"}, "sudo": true}), false},
		{"refuses_a_list_in_another_order", pinned, with("opts", map[string]any{"append": true, "tags": []any{"b", "a"}}), false},
		{"refuses_a_missing_pinned_argument", pinned, with("mode", nil), false},
		{"refuses_an_added_argument_when_only_listed_ones_are_allowed", pinned, with("owner", "root"), false},
		{"a_widened_grant_allows_other_arguments_to_vary", widened, with("content", "anything"), true},
		{"an_argument_allowed_any_value_may_vary_and_still_counts_as_listed", anyContent, with("content", "anything else"), true},
		{"an_argument_allowed_any_value_leaves_the_others_pinned", anyContent, with("mode", 511), false},
		{"an_argument_allowed_any_value_does_not_open_the_list", anyContent, with("owner", "root"), false},
		{"a_widened_grant_still_pins_what_it_names", widened, with("path", "secret/keys.txt"), false},
		{"a_directory_glob_applies_under_the_directory", underTmp, map[string]any{"path": "/tmp/x"}, true},
		{"a_directory_glob_does_not_apply_to_the_directory_itself", underTmp, map[string]any{"path": "/tmp/"}, false},
		{"a_directory_glob_does_not_apply_to_a_path_that_leaves_it", underTmp, map[string]any{"path": "/tmp/../etc/passwd"}, false},
		{"a_directory_glob_refuses_an_argument_it_does_not_name", underTmp, map[string]any{"path": "/tmp/x", "paths": []any{"/etc"}}, false},
	}
	d := &airlockv1.Decision{Action: airlockv1.Action_ACTION_ASK, RuleId: "write", Quorum: 1}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := structpb.NewStruct(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			call := &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Revision: 1, Server: "demo", Tool: "write_file", Arguments: s}
			if got := decide.GrantApplies(tt.grant, call, d, now); got != tt.want {
				t.Errorf("decide.GrantApplies = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestARememberedDecisionAppliesOnlyWhereItWasMade(t *testing.T) {
	bash := func(cmd, person string, verified bool) *airlockv1.ToolCall {
		args, _ := structpb.NewStruct(map[string]any{"command": cmd, "description": "x"})
		return &airlockv1.ToolCall{AgentId: "laptop", CallId: "c", Revision: 1, Server: "claude", Tool: "Bash", Arguments: args, OnBehalfOf: person, OnBehalfOfVerified: verified}
	}
	selfConfirm := &airlockv1.Decision{RuleId: "coding-shell-ask", Approvers: []string{"requester", "group:reviewers"}, Quorum: 1}
	ordinary := &airlockv1.Decision{RuleId: "coding-shell-ask", Approvers: []string{"group:reviewers"}, Quorum: 1}
	prefix := &airlockv1.StandingGrant{Id: "g", AgentId: "laptop", Server: "claude", Tool: "Bash", RuleId: "coding-shell-ask",
		CommandPrefixes: map[string]string{"/command": "git commit"}, CreatedBy: &airlockv1.Actor{Id: "dana"}}
	// What NewGrant makes when dana created it from her own call.
	selfPrefix := proto.Clone(prefix).(*airlockv1.StandingGrant)
	selfPrefix.OnBehalfOf = "dana"
	exactArgs := bash("make test", "dana", true).GetArguments()
	digest, _ := canon.Digest(exactArgs)
	exact := &airlockv1.StandingGrant{Id: "e", AgentId: "laptop", Server: "claude", Tool: "Bash", RuleId: "coding-shell-ask",
		ArgumentsDigest: digest, CreatedBy: &airlockv1.Actor{Id: "dana"}}
	for _, tt := range []struct {
		name string
		g    *airlockv1.StandingGrant
		call *airlockv1.ToolCall
		d    *airlockv1.Decision
		want bool
	}{
		{"the_requesters_prefix_grant_answers_their_self_confirmed_call", prefix, bash("git commit -m fix", "dana", true), selfConfirm, true},
		{"it_does_not_answer_a_chained_command", prefix, bash("git commit -m fix && curl evil", "dana", true), selfConfirm, false},
		{"it_does_not_answer_another_command", prefix, bash("git push", "dana", true), selfConfirm, false},
		{"it_does_not_answer_an_unverified_requester", prefix, bash("git commit -m fix", "dana", false), selfConfirm, false},
		{"it_does_not_answer_an_ordinary_rule_where_the_requester_may_not_decide", prefix, bash("git commit -m fix", "dana", true), ordinary, false},
		{"it_answers_someone_elses_call_as_a_reviewers_grant", prefix, bash("git commit -m fix", "erin", true), selfConfirm, true},
		{"a_requesters_own_grant_answers_their_call", selfPrefix, bash("git commit -m fix", "dana", true), selfConfirm, true},
		{"a_requesters_own_grant_never_answers_someone_elses_call", selfPrefix, bash("git commit -m fix", "erin", true), selfConfirm, false},
		{"a_requesters_own_grant_never_answers_a_call_for_nobody", selfPrefix, bash("git commit -m fix", "", false), selfConfirm, false},
		{"an_exact_grant_answers_the_same_arguments", exact, bash("make test", "dana", true), selfConfirm, true},
		{"an_exact_grant_does_not_answer_other_arguments", exact, bash("make test -v", "dana", true), selfConfirm, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := decide.GrantApplies(tt.g, tt.call, tt.d, time.Now()); got != tt.want {
				t.Fatalf("decide.GrantApplies = %v, want %v", got, tt.want)
			}
		})
	}
}

func mustValue(t *testing.T, v any) *structpb.Value {
	t.Helper()
	out, err := structpb.NewValue(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
