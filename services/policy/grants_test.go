package policy_test

import (
	"math"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
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

// TestARangedGrantAllowsOnlyNumbersWithinItsEnds: a grant's numeric range
// is closed (both ends allowed) and holds JSON numbers only; a string that
// reads as a number, any other JSON type, a missing argument and a
// non-finite or huge number never match, a malformed range matches
// nothing, and a grant without ranges means what it meant before them.
func TestARangedGrantAllowsOnlyNumbersWithinItsEnds(t *testing.T) {
	now := time.Now()
	ranged := func(lo, hi float64) *airlockv1.StandingGrant {
		return &airlockv1.StandingGrant{AgentId: "bot", Server: "demo", Tool: "resize", RuleId: "resize", OnlyListedArguments: true,
			ArgumentValues: map[string]*structpb.Value{"/disk": structpb.NewStringValue("d1")},
			ArgumentRanges: map[string]*airlockv1.NumberRange{"/size": {Min: lo, Max: hi}}}
	}
	oneToTen := ranged(1, 10)
	fractions := ranged(-0.5, 0.25)
	// A grant stored before ranges existed: decoded from its bytes, it has
	// none, and leaves /size as free as it always did.
	old := &airlockv1.StandingGrant{}
	b, err := proto.Marshal(&airlockv1.StandingGrant{AgentId: "bot", Server: "demo", Tool: "resize", RuleId: "resize",
		ArgumentValues: map[string]*structpb.Value{"/disk": structpb.NewStringValue("d1")}})
	if err != nil || proto.Unmarshal(b, old) != nil || old.ArgumentRanges != nil {
		t.Fatalf("a grant without ranges does not decode as one: %v %v", err, old)
	}
	tests := []struct {
		name  string
		grant *airlockv1.StandingGrant
		json  string // the call's arguments as the agent sent them
		want  bool
	}{
		{"an_integer_inside_the_range_matches", oneToTen, `{"disk":"d1","size":5}`, true},
		{"the_lower_end_is_included", oneToTen, `{"disk":"d1","size":1}`, true},
		{"the_upper_end_is_included", oneToTen, `{"disk":"d1","size":10}`, true},
		{"the_upper_end_written_as_a_float_or_exponent_matches", oneToTen, `{"disk":"d1","size":1.0e1}`, true},
		{"a_float_inside_the_range_matches", oneToTen, `{"disk":"d1","size":2.5}`, true},
		{"a_number_just_below_the_lower_end_does_not_match", oneToTen, `{"disk":"d1","size":0.9999999999}`, false},
		{"a_number_just_above_the_upper_end_does_not_match", oneToTen, `{"disk":"d1","size":10.000000001}`, false},
		{"zero_below_the_range_does_not_match", oneToTen, `{"disk":"d1","size":0}`, false},
		{"a_negative_number_does_not_match", oneToTen, `{"disk":"d1","size":-5}`, false},
		{"a_huge_number_does_not_match", oneToTen, `{"disk":"d1","size":1e308}`, false},
		{"a_huge_negative_number_does_not_match", oneToTen, `{"disk":"d1","size":-1e308}`, false},
		{"a_number_past_exact_integers_does_not_match", oneToTen, `{"disk":"d1","size":9007199254740993}`, false},
		{"a_string_that_reads_as_a_number_does_not_match", oneToTen, `{"disk":"d1","size":"5"}`, false},
		{"a_string_in_exponent_form_does_not_match", oneToTen, `{"disk":"d1","size":"1e1"}`, false},
		{"a_string_naming_infinity_does_not_match", oneToTen, `{"disk":"d1","size":"Infinity"}`, false},
		{"a_bool_does_not_match", oneToTen, `{"disk":"d1","size":true}`, false},
		{"null_does_not_match", oneToTen, `{"disk":"d1","size":null}`, false},
		{"a_list_of_a_number_does_not_match", oneToTen, `{"disk":"d1","size":[5]}`, false},
		{"an_object_does_not_match", oneToTen, `{"disk":"d1","size":{"value":5}}`, false},
		{"a_missing_argument_does_not_match", oneToTen, `{"disk":"d1"}`, false},
		{"the_range_does_not_open_the_other_conditions", oneToTen, `{"disk":"d2","size":5}`, false},
		{"a_ranged_argument_counts_as_listed_but_opens_no_other", oneToTen, `{"disk":"d1","size":5,"force":true}`, false},
		{"negative_zero_lies_in_a_range_around_zero", fractions, `{"disk":"d1","size":-0}`, true},
		{"a_negative_fraction_end_is_included", fractions, `{"disk":"d1","size":-0.5}`, true},
		{"a_fraction_end_is_exact", fractions, `{"disk":"d1","size":0.2500001}`, false},
		{"a_range_with_infinite_ends_matches_nothing", ranged(math.Inf(-1), math.Inf(1)), `{"disk":"d1","size":5}`, false},
		{"a_range_with_a_nan_end_matches_nothing", ranged(math.NaN(), 10), `{"disk":"d1","size":5}`, false},
		{"a_range_in_the_wrong_order_matches_nothing", ranged(10, 1), `{"disk":"d1","size":5}`, false},
		{"a_range_past_exact_integers_matches_nothing", ranged(0, 1<<60), `{"disk":"d1","size":5}`, false},
		{"a_grant_without_ranges_leaves_the_number_free", old, `{"disk":"d1","size":123456}`, true},
		{"a_grant_without_ranges_still_pins_what_it_names", old, `{"disk":"d2","size":5}`, false},
	}
	d := &airlockv1.Decision{Action: airlockv1.Action_ACTION_ASK, RuleId: "resize", Quorum: 1}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := &structpb.Struct{}
			if err := protojson.Unmarshal([]byte(tt.json), args); err != nil {
				t.Fatal(err)
			}
			call := &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Revision: 1, Server: "demo", Tool: "resize", Arguments: args}
			if got := decide.GrantApplies(tt.grant, call, d, now); got != tt.want {
				t.Errorf("decide.GrantApplies(%s) = %v, want %v", tt.json, got, tt.want)
			}
		})
	}
}

// TestANonFiniteNumberNeverFallsInARange: JSON cannot carry NaN or
// infinity, but an argument built in Go can; neither lies in any range.
func TestANonFiniteNumberNeverFallsInARange(t *testing.T) {
	g := &airlockv1.StandingGrant{AgentId: "bot", Server: "demo", Tool: "resize", RuleId: "resize",
		ArgumentRanges: map[string]*airlockv1.NumberRange{"/size": {Min: -1e15, Max: 1e15}}}
	d := &airlockv1.Decision{Action: airlockv1.Action_ACTION_ASK, RuleId: "resize", Quorum: 1}
	for _, tt := range []struct {
		name string
		v    float64
	}{{"nan", math.NaN()}, {"positive_infinity", math.Inf(1)}, {"negative_infinity", math.Inf(-1)}} {
		t.Run(tt.name, func(t *testing.T) {
			args := &structpb.Struct{Fields: map[string]*structpb.Value{"size": structpb.NewNumberValue(tt.v)}}
			call := &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Revision: 1, Server: "demo", Tool: "resize", Arguments: args}
			if decide.GrantApplies(g, call, d, time.Now()) {
				t.Errorf("a range allowed %v", tt.v)
			}
		})
	}
	if args := (&structpb.Struct{Fields: map[string]*structpb.Value{"size": structpb.NewNumberValue(12)}}); !decide.GrantApplies(g,
		&airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Revision: 1, Server: "demo", Tool: "resize", Arguments: args}, d, time.Now()) {
		t.Fatal("the range refuses a finite number inside it too: the test proves nothing")
	}
}

// TestAGrantAnswersNoCallRiskierThanItWasMadeFor: the policy's risk for
// this call is compared with the grant's max_risk; a grant stored before
// max_risk existed answers up to medium (the policy's default risk), never
// a call a rule rates high or critical.
func TestAGrantAnswersNoCallRiskierThanItWasMadeFor(t *testing.T) {
	grant := func(r airlockv1.Risk) *airlockv1.StandingGrant {
		return &airlockv1.StandingGrant{AgentId: "bot", Server: "fs", Tool: "write_file", RuleId: "write", MaxRisk: r,
			ArgumentGlobs: map[string]string{"/path": "/srv/docs/**"}}
	}
	tests := []struct {
		name  string
		grant airlockv1.Risk
		call  airlockv1.Risk
		want  bool
	}{
		{"a_medium_grant_answers_a_low_call", airlockv1.Risk_RISK_MEDIUM, airlockv1.Risk_RISK_LOW, true},
		{"a_medium_grant_answers_a_medium_call", airlockv1.Risk_RISK_MEDIUM, airlockv1.Risk_RISK_MEDIUM, true},
		{"a_medium_grant_does_not_answer_a_high_call", airlockv1.Risk_RISK_MEDIUM, airlockv1.Risk_RISK_HIGH, false},
		{"a_low_grant_does_not_answer_a_medium_call", airlockv1.Risk_RISK_LOW, airlockv1.Risk_RISK_MEDIUM, false},
		{"a_high_grant_answers_a_high_call", airlockv1.Risk_RISK_HIGH, airlockv1.Risk_RISK_HIGH, true},
		{"a_high_grant_does_not_answer_a_critical_call", airlockv1.Risk_RISK_HIGH, airlockv1.Risk_RISK_CRITICAL, false},
		{"a_grant_made_before_max_risk_answers_a_medium_call", airlockv1.Risk_RISK_UNSPECIFIED, airlockv1.Risk_RISK_MEDIUM, true},
		{"a_grant_made_before_max_risk_does_not_answer_a_high_call", airlockv1.Risk_RISK_UNSPECIFIED, airlockv1.Risk_RISK_HIGH, false},
		{"a_grant_made_before_max_risk_does_not_answer_a_critical_call", airlockv1.Risk_RISK_UNSPECIFIED, airlockv1.Risk_RISK_CRITICAL, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := &structpb.Struct{Fields: map[string]*structpb.Value{"path": structpb.NewStringValue("/srv/docs/a/b.md")}}
			call := &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Revision: 1, Server: "fs", Tool: "write_file", Arguments: args}
			d := &airlockv1.Decision{Action: airlockv1.Action_ACTION_ASK, RuleId: "write", Quorum: 1, Risk: tt.call}
			if got := decide.GrantApplies(grant(tt.grant), call, d, time.Now()); got != tt.want {
				t.Errorf("a %v grant about a %v call: applies %v, want %v", tt.grant, tt.call, got, tt.want)
			}
		})
	}
}
