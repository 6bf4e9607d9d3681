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
