package policy_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/policy"
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
	}
	d := &airlockv1.Decision{Action: airlockv1.Action_ACTION_ASK, RuleId: "write", Quorum: 1}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := structpb.NewStruct(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			call := &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Revision: 1, Server: "demo", Tool: "write_file", Arguments: s}
			if got := policy.GrantApplies(tt.grant, call, d, now); got != tt.want {
				t.Errorf("GrantApplies = %v, want %v", got, tt.want)
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
