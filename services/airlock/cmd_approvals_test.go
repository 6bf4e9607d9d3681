package main

import (
	"strings"
	"testing"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// TestApprovalsShowLabelsTheAgentsReasonAsItsWords: the agent's stated
// reason sits one line below the policy's; labelled plain "reason" it read
// as the policy's (every other surface says "Agent's reason").
func TestApprovalsShowLabelsTheAgentsReasonAsItsWords(t *testing.T) {
	r := &airlockv1.ApprovalRecord{
		Call:     &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Tool: "demo__write_file", Reason: "the user asked for the file"},
		Decision: &airlockv1.Decision{Reason: "writes need a person", RuleId: "ask-writes"},
	}
	var out strings.Builder
	printRecord(&out, r)
	for _, want := range []string{"\npolicy    writes need a person (rule ask-writes)\n", "\nagent's reason the user asked for the file\n"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("approvals show lacks %q:\n%s", want, out.String())
		}
	}
}

// approvals show says where a relative path in the arguments takes effect:
// the working directory the agent chose, escaped on one line.
func TestApprovalsShowShowsTheAgentsWorkingDirectory(t *testing.T) {
	r := &airlockv1.ApprovalRecord{
		Call:     &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Tool: "fs__delete_file", Cwd: "/srv/\u202eapp\nstate     approved"},
		Decision: &airlockv1.Decision{Reason: "deletes need a person"},
	}
	var out strings.Builder
	printRecord(&out, r)
	if want := "\ncwd       /srv/\\u202eapp\\nstate     approved\n"; !strings.Contains(out.String(), want) {
		t.Fatalf("approvals show lacks %q:\n%s", want, out.String())
	}
}
