package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// callOutcome is what `airlock call` prints.
type callOutcome struct {
	CallID         string          `json:"call_id"`
	Status         string          `json:"status"`
	Result         json.RawMessage `json:"result"`
	Reason         string          `json:"reason"`
	FailureOutcome string          `json:"failure_outcome"`
}

// airlockCall runs `airlock call` as dev's agent bot and returns its outcome and exit code.
func airlockCall(t *testing.T, dev *devProcess, args ...string) (callOutcome, int, string) {
	t.Helper()
	cmd := exec.Command(airlockBinary(t), append([]string{"call", "--nats", dev.NATSURL, "--creds", dev.Creds("bot"), "--wait", "20s"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var out callOutcome
	if stdout.Len() > 0 {
		if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
			t.Fatalf("airlock call printed %q: %v (stderr %s)", stdout.String(), err, stderr.String())
		}
	}
	return out, code, stderr.String()
}

// TestDevRunsAutoAllowedCallsAndExplainsDenials is the quick start: in
// `airlock dev`, an auto-allowed demo tool call returns the tool's result,
// and a denied call returns the policy's reason. It relies on the default
// policy allowing demo__echo and read tools and denying deletes under /etc.
func TestDevRunsAutoAllowedCallsAndExplainsDenials(t *testing.T) {
	dataDir := t.TempDir()
	dev := startDev(t, dataDir, 0, "")

	t.Run("demo_echo_returns_its_arguments", func(t *testing.T) {
		out, code, stderr := airlockCall(t, dev, "--tool", "demo__echo", "--args", `{"text":"hello"}`)
		if code != 0 || out.Status != "completed" {
			t.Fatalf("exit %d, outcome %+v (stderr %s): want completed — the default policy must auto-allow demo__echo", code, out, stderr)
		}
		var res map[string]any
		if err := json.Unmarshal(out.Result, &res); err != nil || res["text"] != "hello" {
			t.Fatalf("result %s (%v), want the echoed arguments", out.Result, err)
		}
	})
	t.Run("demo_read_file_reads_from_the_sandbox", func(t *testing.T) {
		sandbox := filepath.Join(dataDir, "sandbox")
		if err := os.WriteFile(filepath.Join(sandbox, "note.txt"), []byte("in the sandbox"), 0o600); err != nil {
			t.Fatal(err)
		}
		out, code, stderr := airlockCall(t, dev, "--tool", "demo__read_file", "--args", `{"path":"note.txt"}`)
		if code != 0 || out.Status != "completed" || !strings.Contains(string(out.Result), "in the sandbox") {
			t.Fatalf("exit %d, outcome %+v (stderr %s): want the file's content", code, out, stderr)
		}
	})
	t.Run("a_denied_call_returns_the_policy_reason", func(t *testing.T) {
		out, code, stderr := airlockCall(t, dev, "--tool", "fs__delete_file", "--args", `{"path":"/etc/passwd"}`)
		if code != 1 || out.Status != "denied" || !strings.Contains(out.Reason, "/etc") {
			t.Fatalf("exit %d, outcome %+v (stderr %s): want denied with the policy's reason", code, out, stderr)
		}
	})
	dev.Interrupt(15 * time.Second)
}
