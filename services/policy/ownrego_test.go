package policy_test

import (
	"context"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/policyapi"
)

// A policy of the operator's own Rego, with no data.json, lists its rules:
// none built in, none added. (Listing them once ended the policy process:
// the built-in rules were read from data.airlock without checking that
// there was any.)
func TestAPolicyWithoutDataListsNoBuiltInRules(t *testing.T) {
	_, deps, fk := ownRegoReplica(t, "package airlock\n\ndecision := {\"action\": \"ask\", \"risk\": \"low\", \"reason\": \"ask\"}\n")
	client := policyapi.New(deps.NC, fk, "console")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 2 { // the second answer shows the service is still there
		resp, err := client.ListRules(ctx)
		if err != nil {
			t.Fatalf("list %d: %v", i, err)
		}
		if len(resp.GetBuiltinRules()) != 0 || len(resp.GetRules()) != 0 || resp.GetPolicyRevision() == "" {
			t.Fatalf("list %d: %v, want no rules of either kind and the policy's revision", i, resp)
		}
	}
}
