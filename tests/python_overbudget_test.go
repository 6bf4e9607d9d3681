package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPythonClientOverBudget runs sdk/python/tests/overbudget_check.py
// against an airlock dev whose agents may have one call decided a minute:
// the Python client (over REST) raises OverBudget for a call over the
// budget at once, not a timeout or "no such call".
func TestPythonClientOverBudget(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is not installed: install Python 3.9 or newer (apt-get install python3); the client needs nothing else")
	}
	dev := startDev(t, filepath.Join(t.TempDir(), "data"), 0, "", "AIRLOCK_CONFIG="+oneCallAMinute(t))
	admin := adminToken(t, dev)
	token := agentToken(t, dev, admin, "pybot")
	dir, err := filepath.Abs(filepath.Join("..", "sdk", "python"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, "-m", "unittest", "-v", "tests.overbudget_check")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "AIRLOCK_URL="+dev.HTTPURL, "AIRLOCK_TOKEN="+token, "AIRLOCK_TEST_AGENT=pybot", "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "OK") {
		t.Fatalf("python3 -m unittest tests.overbudget_check: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
