package policy_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/policyapi"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// A policy of the operator's own Rego, with no data.json, lists its rules:
// none built in, none added. (Listing them once ended the policy process:
// the built-in rules were read from data.airlock without checking that
// there was any.)
func TestAPolicyWithoutDataListsNoBuiltInRules(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.rego"), []byte("package airlock\n\ndecision := {\"action\": \"ask\", \"risk\": \"low\", \"reason\": \"ask\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n := testenv.StartNATS(t)
	cfg := testenv.Config(n.URL())
	cfg.Policy.Dir = dir
	_, deps := replica(t, cfg)
	fk, err := deps.FrontendKey()
	if err != nil {
		t.Fatal(err)
	}
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
