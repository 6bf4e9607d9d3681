package slack_test

import (
	"encoding/json"
	"strings"
	"testing"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlockslack "github.com/airlock-gate/airlock/services/slack"
)

// A coding agent's call: the card says who may confirm it, that the agent
// runs it itself, offers to remember the decision, and its outcome says
// the agent ran it.
func TestACodingAgentsCardSaysWhoConfirmsAndWhoRuns(t *testing.T) {
	rec := &airlockv1.ApprovalRecord{
		Call: &airlockv1.ToolCall{AgentId: "laptop", CallId: "toolu_1", Revision: 1, Server: "claude", Tool: "Bash",
			OnBehalfOf: "dana", OnBehalfOfVerified: true, AgentRuns: true},
		Decision: &airlockv1.Decision{Approvers: []string{"requester"}, RuleId: "coding-shell-ask", Reason: "shell commands need a confirmation"},
		State:    airlockv1.ApprovalState_APPROVAL_STATE_PENDING,
	}
	pendingCard, _ := json.Marshal(airlockslack.Render(rec, "https://airlock.example").Blocks)
	for _, want := range []string{"only `dana`", "The agent runs this tool itself", "/grants/new?agent=laptop\\u0026from=toolu_1\\u0026rev=1"} {
		if !strings.Contains(string(pendingCard), want) {
			t.Fatalf("pending card lacks %q: %s", want, pendingCard)
		}
	}
	rec.State = airlockv1.ApprovalState_APPROVAL_STATE_COMPLETED
	rec.DecidedBy = &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "dana", Channel: "slack"}
	if got := airlockslack.OutcomeText(rec); !strings.Contains(got, "The agent ran the tool itself and completed") {
		t.Fatalf("outcome %q", got)
	}
}

// An agent's claim of whom it acts for is shown as its claim, and the
// self-confirmation line names nobody it did not verify: nobody may
// confirm a call as the person an agent only claims it acts for.
func TestTheCardNamesOnlyAVerifiedRequester(t *testing.T) {
	for _, tt := range []struct {
		name      string
		verified  bool
		want, not []string
	}{
		{"a_verified_requester_is_named", true, []string{"on behalf of `dana`\"", "only `dana`, the person this call acts for,"}, []string{"not verified"}},
		{"a_claimed_requester_is_not", false, []string{"on behalf of `dana` (claimed by the agent, not verified)", "only the person this call acts for may confirm it"}, []string{"only `dana`"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &airlockv1.ApprovalRecord{
				Call: &airlockv1.ToolCall{AgentId: "laptop", CallId: "toolu_1", Revision: 1, Server: "claude", Tool: "Bash",
					OnBehalfOf: "dana", OnBehalfOfVerified: tt.verified},
				Decision: &airlockv1.Decision{Approvers: []string{"requester"}, Reason: "shell commands need a confirmation"},
				State:    airlockv1.ApprovalState_APPROVAL_STATE_PENDING,
			}
			card, _ := json.Marshal(airlockslack.Render(rec, "https://airlock.example").Blocks)
			for _, want := range tt.want {
				if !strings.Contains(string(card), want) {
					t.Errorf("the card lacks %q: %s", want, card)
				}
			}
			for _, not := range tt.not {
				if strings.Contains(string(card), not) {
					t.Errorf("the card shows %q: %s", not, card)
				}
			}
		})
	}
}

// The working directory an agent chose, where a relative path in its
// arguments takes effect, is on the card beside them, escaped as the
// agent's other text is.
func TestTheCardShowsTheAgentsWorkingDirectoryEscaped(t *testing.T) {
	rec := &airlockv1.ApprovalRecord{
		Call:     &airlockv1.ToolCall{AgentId: "laptop", CallId: "c1", Revision: 1, Server: "fs", Tool: "delete_file", Cwd: "/home/dana/\u202etxt.cod\n*Approved*"},
		Decision: &airlockv1.Decision{Approvers: []string{"group:reviewers"}},
		State:    airlockv1.ApprovalState_APPROVAL_STATE_PENDING,
	}
	var card strings.Builder
	_ = json.NewEncoder(&card).Encode(airlockslack.Render(rec, "https://airlock.example").Blocks)
	if want := "*Working directory*\\n`/home/dana/\\\\u202etxt.cod\\\\n*Approved*`"; !strings.Contains(card.String(), want) {
		t.Fatalf("card lacks %s: %s", want, card.String())
	}
}
