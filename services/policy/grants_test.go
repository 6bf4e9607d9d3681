package policy_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/policy"
	"github.com/airlock-gate/airlock/services/shared/canon"
)

func TestARememberedDecisionAppliesOnlyWhereItWasMade(t *testing.T) {
	bash := func(cmd, person string, verified bool) *airlockv1.ToolCall {
		args, _ := structpb.NewStruct(map[string]any{"command": cmd, "description": "x"})
		return &airlockv1.ToolCall{AgentId: "laptop", CallId: "c", Revision: 1, Server: "claude", Tool: "Bash", Arguments: args, OnBehalfOf: person, OnBehalfOfVerified: verified}
	}
	selfConfirm := &airlockv1.Decision{RuleId: "coding-shell-ask", Approvers: []string{"requester", "group:reviewers"}, Quorum: 1}
	ordinary := &airlockv1.Decision{RuleId: "coding-shell-ask", Approvers: []string{"group:reviewers"}, Quorum: 1}
	prefix := &airlockv1.StandingGrant{Id: "g", AgentId: "laptop", Server: "claude", Tool: "Bash", RuleId: "coding-shell-ask",
		CommandPrefixes: map[string]string{"/command": "git commit"}, CreatedBy: &airlockv1.Actor{Id: "dana"}}
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
		{"an_exact_grant_answers_the_same_arguments", exact, bash("make test", "dana", true), selfConfirm, true},
		{"an_exact_grant_does_not_answer_other_arguments", exact, bash("make test -v", "dana", true), selfConfirm, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := policy.GrantApplies(tt.g, tt.call, tt.d, time.Now()); got != tt.want {
				t.Fatalf("GrantApplies = %v, want %v", got, tt.want)
			}
		})
	}
}
