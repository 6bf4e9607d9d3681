package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// TestTypeScriptClientOverBudget runs sdk/typescript/test/overbudget.ts
// against an airlock dev whose agents may have one call decided a minute:
// the TypeScript SDK answers a call over the budget with its OverBudget
// error at once (the notice TestAnAgentOverItsBudgetIsToldSoAtOnce follows
// with the Go SDK), not with a timeout.
func TestTypeScriptClientOverBudget(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", "sdk", "typescript"))
	if err != nil {
		t.Fatal(err)
	}
	node := builtTypeScriptSDK(t, dir)
	dev := startDev(t, filepath.Join(t.TempDir(), "data"), 0, "", "AIRLOCK_CONFIG="+oneCallAMinute(t))
	dev.Agent(t, "bot")
	cmd := exec.Command(node, "--test", "--test-reporter=spec", "dist/test/overbudget.js")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "AIRLOCK_CREDENTIAL="+dev.Creds("bot"), "AIRLOCK_TEST_NATS_AGENT=bot")
	out, err := cmd.CombinedOutput()
	if m := regexp.MustCompile(`ℹ pass (\d+)`).FindSubmatch(out); err != nil || m == nil || string(m[1]) != "1" {
		t.Fatalf("node --test dist/test/overbudget.js: %v (its one test must pass)\n%s", err, out)
	}
}
