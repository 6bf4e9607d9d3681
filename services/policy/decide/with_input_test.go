package decide_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/rego"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/policy/decide"
)

// A policy may evaluate part of itself against a changed input (`with
// input.call.x as ...`, a what-if). The change holds only inside that
// expression: the rest of the policy reads the call as the agent sent it,
// and decides exactly as OPA decides the policy on the full input document.
// (An unverified "alice" must not pass an allowlist of verified alice
// because a what-if asked about a verified one first.)
func TestAWhatIfOnPartOfTheInputChangesNothingOutsideIt(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name, policy string
		call         *airlockv1.ToolCall
	}{
		{"verified", aliceOnly("input.call.on_behalf_of_verified as true"),
			&airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Server: "notes", Tool: "purge", OnBehalfOf: "alice"}},
		{"whole call", aliceOnly(`input.call as {"on_behalf_of": "alice", "on_behalf_of_verified": true}`),
			&airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Server: "notes", Tool: "purge", OnBehalfOf: "mallory"}},
		{"tool", `package airlock

would_pass_as_read if input.call.tool == "read_file" with input.call.tool as "read_file"

decision := {"action": "allow", "reason": sprintf("%v reads", [input.call.tool])} if {
	would_pass_as_read
	input.call.tool == "read_file"
}

decision := {"action": "deny", "reason": sprintf("%v is no read", [input.call.tool])} if {
	would_pass_as_read
	input.call.tool != "read_file"
}
`, &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Server: "fs", Tool: "delete_file"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "p.rego"), []byte(tt.policy), 0o644); err != nil {
				t.Fatal(err)
			}
			ev, err := decide.LoadDir(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			input, err := decide.Input(tt.call, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			rs, err := rego.New(rego.Query(decide.Query), rego.Module("p.rego", tt.policy), rego.Input(input)).Eval(ctx)
			if err != nil || len(rs) != 1 {
				t.Fatalf("OPA on the full input: %v %v", rs, err)
			}
			want := rs[0].Expressions[0].Value.(map[string]any)
			if want["action"] != "deny" {
				t.Fatalf("OPA on the full input decides %v: the test's policy is wrong", want)
			}
			d, err := ev.Evaluate(ctx, tt.call, time.Now())
			if err != nil || d.Action != airlockv1.Action_ACTION_DENY || d.Reason != want["reason"] {
				t.Errorf("airlock decides %v %q (err %v), OPA on the full input deny %q", d.Action, d.Reason, err, want["reason"])
			}
		})
	}
}

// aliceOnly is a policy that allows only alice as airlock verified and, for
// its reason, asks whether the call would pass with what (a with target).
func aliceOnly(what string) string {
	return `package airlock

allowed if {
	input.call.on_behalf_of_verified == true
	input.call.on_behalf_of == "alice"
}

would_pass if allowed with ` + what + `

decision := {"action": "deny", "reason": "only alice, as airlock verified, may: sign in"} if {
	would_pass
	not allowed
}

decision := {"action": "allow", "reason": "alice, verified"} if allowed
`
}
