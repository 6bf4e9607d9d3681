package tests

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// TestTypeScriptClient builds sdk/typescript with tsc and runs its tests
// (node --test) against a real `airlock dev`, over REST with an agent token
// and over NATS with dev's agent credential.
func TestTypeScriptClient(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not installed: install Node.js 20 or newer (apt-get install nodejs npm), then scripts/install-test-deps.sh")
	}
	dir, err := filepath.Abs(filepath.Join("..", "sdk", "typescript"))
	if err != nil {
		t.Fatal(err)
	}
	tsc := filepath.Join(dir, "node_modules", ".bin", "tsc")
	if _, err := os.Stat(tsc); err != nil {
		t.Fatalf("sdk/typescript's packages are not installed (%v): run scripts/install-test-deps.sh (npm install --prefix sdk/typescript)", err)
	}
	dev := startDev(t, filepath.Join(t.TempDir(), "data"), 0, "")
	admin := adminToken(t, dev)
	token := agentToken(t, dev, admin, "tsbot")
	status, body := apiPost(t, dev.HTTPURL+"/api/v1/rules", admin,
		`{"id":"ts-deny-secrets","priority":1,"pattern":"demo__write_file","args":{"/path":"secret/**"},"effect":"deny","reason":"secrets stay put"}`)
	if status != http.StatusOK {
		t.Fatalf("add the deny rule: %d %s", status, body)
	}
	waitForRule(t, dev.HTTPURL, token)
	build := exec.Command(tsc, "-p", "tsconfig.json")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("tsc: %v\n%s", err, out)
	}
	cmd := exec.Command("node", "--test", "--test-reporter=spec", "dist/test/")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "AIRLOCK_URL="+dev.HTTPURL, "AIRLOCK_TOKEN="+token, "AIRLOCK_TEST_REST_AGENT=tsbot",
		"AIRLOCK_CREDENTIAL="+dev.Creds("bot"), "AIRLOCK_TEST_NATS_AGENT=bot", "AIRLOCK_TEST_ADMIN_TOKEN="+admin)
	out, err := cmd.CombinedOutput()
	if m := regexp.MustCompile(`ℹ pass (\d+)`).FindSubmatch(out); err != nil || m == nil || string(m[1]) == "0" {
		t.Fatalf("node --test: %v (no test may fail, and some must pass)\n%s", err, out)
	}
	t.Logf("%s", out)
}
