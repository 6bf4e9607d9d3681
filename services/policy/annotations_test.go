package policy_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/policy"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/svc"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestAnnotationsAreTrustedOnlyWhenAFrontEndSealsThem: the policy's input
// carries a call's tool annotations, and annotations_trusted only when a
// front-end (the MCP gateway) sealed the request — an agent's own claim is
// dropped; so is the run_code script a call names.
func TestAnnotationsAreTrustedOnlyWhenAFrontEndSealsThem(t *testing.T) {
	rego := `package airlock

decision := {"action": "allow", "risk": "low", "reason": sprintf("trusted=%v readOnly=%v", [
	object.get(input.call, "annotations_trusted", "absent"),
	object.get(object.get(input.call, "annotations", {}), "readOnlyHint", "absent"),
])}
`
	_, deps, fk := ownRegoReplica(t, rego)
	ann, _ := structpb.NewStruct(map[string]any{"readOnlyHint": true})
	for _, c := range []struct {
		name, call string
		sealed     bool
		want       string
	}{
		{"an_agents_own_claim_is_not_believed", "unsealed", false, "trusted=false readOnly=true"},
		{"a_front_ends_sealed_claim_is_believed", "sealed", true, "trusted=true readOnly=true"},
	} {
		t.Run(c.name, func(t *testing.T) {
			call := &airlockv1.ToolCall{CallId: c.call, AgentId: "bot", Server: "fs", Tool: "read_file", Revision: 1,
				Annotations: ann, AnnotationsTrusted: true, Script: &airlockv1.Script{Digest: "sha256:" + strings.Repeat("0f", 32), RunId: "run-1", Index: 1}}
			ev := &airlockv1.Event{AgentId: "bot", CallId: c.call, Revision: 1, Body: &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: call}}}
			msg, err := bus.EncodeRequest(ev, "agent/bot", "")
			if err != nil {
				t.Fatal(err)
			}
			if c.sealed {
				fk.Request(msg, "gateway", time.Now())
			}
			if _, err := deps.JS.PublishMsg(context.Background(), msg); err != nil {
				t.Fatal(err)
			}
			d := decisionOf(waitDecision(t, deps.JS, "bot", c.call))
			if d.GetReason() != c.want {
				t.Fatalf("the policy saw %q, want %q", d.GetReason(), c.want)
			}
			req := testenv.WaitForEvent(t, deps.JS, subject.OfCall("bot", c.call), subject.Requested, 10*time.Second)
			if got := req.GetRequested().GetCall().GetAnnotationsTrusted(); got != c.sealed {
				t.Fatalf("recorded annotations_trusted=%v", got)
			}
			if got := req.GetRequested().GetCall().GetScript(); (got != nil) != c.sealed {
				t.Fatalf("recorded script %v, want it only when a front-end sealed the request", got)
			}
		})
	}
}

// ownRegoReplica runs a policy replica whose policy is the operator's own
// Rego alone (one file, no data.json) and returns it with its connections
// and the front-end key that seals requests to it.
func ownRegoReplica(t *testing.T, rego string) (*policy.Engine, svc.Deps, seal.Key) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.rego"), []byte(rego), 0o644); err != nil {
		t.Fatal(err)
	}
	n := testenv.StartNATS(t)
	cfg := testenv.Config(n.URL())
	cfg.Policy.Dir = dir
	e, deps := replica(t, cfg)
	fk, err := deps.FrontendKey()
	if err != nil {
		t.Fatal(err)
	}
	return e, deps, fk
}
