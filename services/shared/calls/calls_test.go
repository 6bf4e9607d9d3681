package calls

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

func TestRiskWordsRoundTrip(t *testing.T) {
	for r := airlockv1.Risk_RISK_LOW; r <= airlockv1.Risk_RISK_CRITICAL; r++ {
		if got := ParseRisk(RiskName(r)); got != r {
			t.Errorf("ParseRisk(RiskName(%v)) = %v", r, got)
		}
	}
	tests := []struct {
		in   string
		want airlockv1.Risk
	}{{"HIGH", airlockv1.Risk_RISK_HIGH}, {"RISK_CRITICAL", airlockv1.Risk_RISK_CRITICAL}, {" low ", airlockv1.Risk_RISK_LOW}, {"severe", airlockv1.Risk_RISK_UNSPECIFIED}, {"", airlockv1.Risk_RISK_UNSPECIFIED}}
	for _, tt := range tests {
		if got := ParseRisk(tt.in); got != tt.want {
			t.Errorf("ParseRisk(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
	if RiskName(airlockv1.Risk_RISK_UNSPECIFIED) != "unrated" {
		t.Error("an unspecified risk should read unrated")
	}
}

func TestToolName(t *testing.T) {
	if ToolName("fs", "read_file") != "fs__read_file" || ToolName("", "read_file") != "read_file" {
		t.Fatal("ToolName")
	}
}

func TestStateWords(t *testing.T) {
	tests := []struct {
		name       string
		state      airlockv1.ApprovalState
		token, txt string
	}{
		{"pending_reads_pending", airlockv1.ApprovalState_APPROVAL_STATE_PENDING, "pending", "pending"},
		{"changes_requested_keeps_its_underscore_as_a_token_only", airlockv1.ApprovalState_APPROVAL_STATE_CHANGES_REQUESTED, "changes_requested", "changes requested"},
		{"executing_reads_as_approved_and_running", airlockv1.ApprovalState_APPROVAL_STATE_EXECUTING, "executing", "approved, running"},
		{"an_unspecified_state_is_unknown", airlockv1.ApprovalState_APPROVAL_STATE_UNSPECIFIED, "unknown", "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := StateName(tt.state); got != tt.token {
				t.Errorf("StateName = %q, want %q", got, tt.token)
			}
			if got := StateText(tt.state); got != tt.txt {
				t.Errorf("StateText = %q, want %q", got, tt.txt)
			}
		})
	}
	for _, s := range DecidedStates {
		if got, ok := ParseState(StateName(s)); !ok || got != s {
			t.Errorf("ParseState(StateName(%v)) = %v %v", s, got, ok)
		}
	}
	if _, ok := ParseState("unknown"); ok {
		t.Error("ParseState accepted a word that is no state")
	}
	if got, ok := ParseState(" APPROVAL_STATE_Rejected "); !ok || got != airlockv1.ApprovalState_APPROVAL_STATE_REJECTED {
		t.Errorf("ParseState of the enum name = %v %v", got, ok)
	}
}

func TestShowableMarksNonFiniteNumbers(t *testing.T) {
	args, err := structpb.NewStruct(map[string]any{"path": "a", "n": map[string]any{"x/y": []any{1.0, 2.0}}})
	if err != nil {
		t.Fatal(err)
	}
	args.Fields["n"].GetStructValue().Fields["x/y"].GetListValue().Values[1] = structpb.NewNumberValue(math.NaN())
	args.Fields["big"] = structpb.NewNumberValue(math.Inf(1))
	rec := &airlockv1.ApprovalRecord{Call: &airlockv1.ToolCall{Arguments: args}}
	got := Showable(rec)
	if got == rec {
		t.Fatal("a record with non-finite numbers came back as it was")
	}
	want := []string{`argument /big is +Inf, which is not a JSON number: shown as the text "+Inf"`, `argument /n/x~1y/1 is NaN, which is not a JSON number: shown as the text "NaN"`}
	if !slices.Equal(got.GetProblems(), want) {
		t.Fatalf("problems %q, want %q", got.GetProblems(), want)
	}
	if _, err := protojson.Marshal(got); err != nil {
		t.Fatalf("the showable record still cannot be encoded: %v", err)
	}
	if !math.IsNaN(rec.GetCall().GetArguments().GetFields()["n"].GetStructValue().GetFields()["x/y"].GetListValue().GetValues()[1].GetNumberValue()) {
		t.Fatal("Showable changed its input")
	}
	clean := &airlockv1.ApprovalRecord{Call: &airlockv1.ToolCall{Arguments: &structpb.Struct{}}}
	if Showable(clean) != clean {
		t.Fatal("a clean record was copied")
	}
}

func TestACommandPrefixMatchesOnlyThatPlainCommand(t *testing.T) {
	for _, tt := range []struct {
		name, cmd, prefix string
		want              bool
	}{
		{"same_words_and_more_match", "git commit -m 'fix it'", "git commit", true},
		{"the_prefix_alone_matches", "git commit", "git commit", true},
		{"blank_runs_count_as_one", "git   commit  -m x", "git commit", true},
		{"a_longer_word_does_not_match", "git commit-tree x", "git commit", false},
		{"a_chained_command_does_not_match", "git commit -m x; rm -rf ~", "git commit", false},
		{"an_and_chain_does_not_match", "git commit -m x && curl evil", "git commit", false},
		{"a_pipe_does_not_match", "git commit -m x | sh", "git commit", false},
		{"a_substitution_does_not_match", "git commit -m $(cat ~/.ssh/id_rsa)", "git commit", false},
		{"a_parameter_expansion_that_runs_a_command_does_not_match", "npm test ${y=$'\\x24\\x28id\\x29'} ${y@P}", "npm test", false},
		{"an_arithmetic_expansion_does_not_match", "npm test $((1+1))", "npm test", false},
		{"a_variable_does_not_match", "npm test $HOME", "npm test", false},
		{"a_backtick_does_not_match", "git commit -m `id`", "git commit", false},
		{"a_redirection_does_not_match", "git commit -m x > /etc/passwd", "git commit", false},
		{"a_new_line_does_not_match", "git commit -m x\nrm -rf ~", "git commit", false},
		{"an_empty_prefix_matches_nothing", "git commit", "", false},
		{"quotes_are_removed_as_bash_removes_them", `git "commit" -m "fix \"it\""`, "git commit", true},
		{"a_quoted_option_that_writes_does_not_match", `git diff "--output=/home/me/.bashrc"`, "git diff", false},
		{"an_option_quoted_in_pieces_does_not_match", `git diff --out''put=/home/me/.bashrc`, "git diff", false},
		{"an_escaped_option_does_not_match", `git diff \--output=/home/me/.bashrc`, "git diff", false},
		{"an_option_that_runs_a_command_does_not_match", "rg --pre=rm x .", "rg", false},
		{"the_remembered_words_may_hold_it", "rg --pre=./decompress x .", "rg --pre=./decompress", true},
		{"an_abbreviated_option_that_runs_a_command_does_not_match", "git fetch --upload-pac=sh x.sh", "git fetch", false},
		{"an_abbreviation_as_its_own_word_does_not_match", "git fetch --upl sh origin", "git fetch", false},
		{"an_abbreviated_output_option_does_not_match", "git diff --outp=/home/me/.bashrc", "git diff", false},
		{"an_ordinary_long_option_matches", "git fetch --prune origin", "git fetch", true},
		{"brace_expansion_does_not_match", "git diff {--output=/tmp/x,HEAD}", "git diff", false},
		{"a_glob_does_not_match", "git diff *", "git diff", false},
		{"an_open_quote_does_not_match", `git commit -m "fix`, "git commit", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := CommandHasPrefix(tt.cmd, tt.prefix); got != tt.want {
				t.Fatalf("CommandHasPrefix(%q, %q) = %v", tt.cmd, tt.prefix, got)
			}
		})
	}
}

func TestOnlyTheVerifiedRequesterOfASelfConfirmedCallMayDecideIt(t *testing.T) {
	self := &airlockv1.Decision{Approvers: []string{Requester}}
	ordinary := &airlockv1.Decision{Approvers: []string{"group:reviewers"}}
	verified := &airlockv1.ToolCall{OnBehalfOf: "alice", OnBehalfOfVerified: true}
	claimed := &airlockv1.ToolCall{OnBehalfOf: "alice"}
	for _, tt := range []struct {
		name   string
		call   *airlockv1.ToolCall
		d      *airlockv1.Decision
		person string
		want   bool
	}{
		{"the_verified_requester_may", verified, self, "alice", true},
		{"someone_else_may_not", verified, self, "bob", false},
		{"an_unverified_requester_may_not", claimed, self, "alice", false},
		{"the_requester_of_an_ordinary_rule_may_not", verified, ordinary, "alice", false},
		// "requester" is a role in rules, never a person, even one airlock verified.
		{"a_person_named_requester_may_not", &airlockv1.ToolCall{OnBehalfOf: Requester, OnBehalfOfVerified: true}, self, Requester, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := RequesterMayDecide(tt.call, tt.d, tt.person); got != tt.want {
				t.Fatalf("RequesterMayDecide = %v", got)
			}
		})
	}
}

func TestWhatTheAgentSaysIsShownAsItsOwn(t *testing.T) {
	brackets := func(s string) string { return "[" + s + "]" } // a medium's escape
	for _, tt := range []struct {
		name, got, want string
	}{
		{"an_unverified_person_is_the_agents_claim", OnBehalfOfText(&airlockv1.ToolCall{OnBehalfOf: "alice"}, brackets), "[alice] (claimed by the agent, not verified)"},
		{"a_verified_person_is_shown_as_verified", OnBehalfOfText(&airlockv1.ToolCall{OnBehalfOf: "alice", OnBehalfOfVerified: true}, brackets), "[alice]"},
		{"nobody_is_shown_as_nothing", OnBehalfOfText(&airlockv1.ToolCall{}, brackets), ""},
		{"an_agent_is_named_as_one_whatever_its_channel", ActorNote(&airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_AGENT, Id: "bot", Channel: "nats"}), "agent"},
		{"a_person_is_named_with_their_channel", ActorNote(&airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "alice", Channel: "teams"}), "teams"},
		{"a_person_without_a_channel_has_no_note", ActorNote(&airlockv1.Actor{Id: "alice"}), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Fatalf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

func TestPointerTokens(t *testing.T) {
	for _, tt := range []struct {
		ptr  string
		want []string
	}{
		{"/path", []string{"path"}},
		{"/opts/a~1b", []string{"opts", "a/b"}},
		{"/t~0ilde~01", []string{"t~ilde~1"}},
		{"password", []string{"password"}},
	} {
		if got := PointerTokens(tt.ptr); !slices.Equal(got, tt.want) {
			t.Errorf("PointerTokens(%q) = %q, want %q", tt.ptr, got, tt.want)
		}
	}
}

func TestJSONTextWritesWhatEncodingJSONWrites(t *testing.T) {
	args, err := structpb.NewStruct(map[string]any{"b": []any{1.5, "x<&>", true, nil, map[string]any{}}, "a": map[string]any{"z": "é", "y": []any{}}, "c": 1e21})
	if err != nil {
		t.Fatal(err)
	}
	for _, indent := range []string{"", "  "} {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", indent)
		if err := enc.Encode(args.AsMap()); err != nil {
			t.Fatal(err)
		}
		got, whole := JSONText(args, indent, 1<<20)
		if got != strings.TrimSuffix(want.String(), "\n") || !whole {
			t.Fatalf("indent %q: got %s (whole %v), want %s", indent, got, whole, want.String())
		}
	}
}

func TestJSONTextIsBoundedWhateverTheArguments(t *testing.T) {
	deep := structpb.NewNumberValue(1)
	for range 5000 {
		deep = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"v": deep}})
	}
	tests := []struct {
		name string
		args *structpb.Struct
	}{
		{"seven_branches_thousands_of_levels_deep", &structpb.Struct{Fields: map[string]*structpb.Value{
			"a": deep, "b": deep, "c": deep, "d": deep, "e": deep, "f": deep, "g": deep}}},
		{"one_long_string", &structpb.Struct{Fields: map[string]*structpb.Value{"s": structpb.NewStringValue(strings.Repeat("<", 1<<20))}}},
		{"a_long_list", &structpb.Struct{Fields: map[string]*structpb.Value{"l": structpb.NewListValue(&structpb.ListValue{Values: slices.Repeat([]*structpb.Value{structpb.NewBoolValue(true)}, 1<<16)})}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, indent := range []string{"", "  "} {
				got, whole := JSONText(tc.args, indent, 4096)
				if whole || len(got) > 4096 || len(got) < 4000 {
					t.Fatalf("indent %q: %d bytes, whole %v: want a cut at 4096 bytes", indent, len(got), whole)
				}
			}
		})
	}
}
