package policy_test

import (
	"os"
	"path/filepath"
	"testing"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// An agent claims to act for alice (airlock has not verified it) under a
// policy that allows only alice as verified and, for its reason, asks what
// a verified call would get (a what-if: `with input.call.on_behalf_of_verified
// as true`). The what-if must not make the claim verified for the rest of the
// decision: the call is denied.
func TestAnAgentsClaimedPersonStaysUnverifiedAfterAPolicyWhatIf(t *testing.T) {
	n := testenv.StartNATS(t)
	cfg := testenv.Config(n.URL())
	cfg.Policy.Dir = t.TempDir()
	const rego = `package airlock

allowed if {
	input.call.on_behalf_of_verified == true
	input.call.on_behalf_of == "alice"
}

would_pass_verified if allowed with input.call.on_behalf_of_verified as true

decision := {"action": "deny", "reason": "only alice, as airlock verified, may: sign in"} if {
	would_pass_verified
	not allowed
}

decision := {"action": "deny", "reason": "only alice may"} if {
	not would_pass_verified
	not allowed
}

decision := {"action": "allow", "reason": "alice, verified"} if allowed
`
	if err := os.WriteFile(filepath.Join(cfg.Policy.Dir, "p.rego"), []byte(rego), 0o644); err != nil {
		t.Fatal(err)
	}
	_, deps := replica(t, cfg)
	c := &airlockv1.ToolCall{CallId: "w1", AgentId: "bot", Server: "notes", Tool: "purge", OnBehalfOf: "alice", Revision: 1, Arguments: mustStruct(t, map[string]any{})}
	publishRequest(t, deps.JS, c)
	ev := waitDecision(t, deps.JS, "bot", "w1")
	if envelope.TypeOf(ev) != subject.Denied || decisionOf(ev).Reason != "only alice, as airlock verified, may: sign in" {
		t.Fatalf("%s: %q, want denied: the agent's claim is not verified", envelope.TypeOf(ev), decisionOf(ev).GetReason())
	}
}
