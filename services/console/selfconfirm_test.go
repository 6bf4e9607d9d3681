package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// A coding agent's call the rule asks its own person to confirm: that
// person decides it from the console whatever their role; nobody else
// without the reviewer role does, and an ordinary call stays a reviewer's.
func TestTheRequesterConfirmsTheirOwnCallFromTheConsole(t *testing.T) {
	e := newEnv(t)
	self := pending("self_1", "laptop", "claude__Bash", map[string]any{"command": "npm install left-pad"}, airlockv1.Risk_RISK_HIGH)
	self.Call.OnBehalfOf, self.Call.OnBehalfOfVerified, self.Call.AgentRuns = "audrey", true, true
	self.Decision.Approvers, self.Decision.RuleId = []string{"requester"}, "coding-shell-ask"
	e.approval.put(self)
	ordinary := pending("ord_1", "laptop", "claude__Bash", map[string]any{"command": "npm install"}, airlockv1.Risk_RISK_HIGH)
	ordinary.Call.OnBehalfOf, ordinary.Call.OnBehalfOfVerified = "audrey", true
	e.approval.put(ordinary)

	audrey := e.browser()
	audrey.signIn("audrey") // an auditor: not a reviewer

	t.Run("the_call_page_offers_the_requester_the_decision", func(t *testing.T) {
		p := audrey.get("/calls/laptop/self_1")
		for _, want := range []string{"confirm-approve", `id="self-confirm"`, `id="agent-runs"`, `name="viewport"`} {
			if !strings.Contains(p.Body, want) {
				t.Fatalf("the page lacks %s:\n%s", want, p.Body)
			}
		}
	})
	t.Run("an_ordinary_call_is_still_not_theirs", func(t *testing.T) {
		if p := audrey.get("/calls/laptop/ord_1"); strings.Contains(p.Body, "confirm-approve") {
			t.Fatal("the requester is offered the decision of an ordinary call")
		}
		if p := audrey.submit("/calls/laptop/ord_1/approve", url.Values{"revision": {"1"}}); p.Status != http.StatusForbidden {
			t.Fatalf("approving an ordinary call as its requester: %d", p.Status)
		}
	})
	t.Run("the_requester_approves", func(t *testing.T) {
		p := audrey.submit("/calls/laptop/self_1/approve", url.Values{"revision": {"1"}})
		if p.Status != http.StatusSeeOther {
			t.Fatalf("approve: %d\n%s", p.Status, p.Body)
		}
		d := e.approval.decided()
		if len(d) != 1 || d[0].GetPrincipal().GetId() != "audrey" || d[0].GetCallId() != "self_1" {
			t.Fatalf("decisions sent: %v", d)
		}
	})
}
