package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/policyapi"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/testenv"
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
	// G: a deny rule wins over an allow and an ask rule that match the
	// same call, even when both come first in priority order; the tool
	// does not run and the agent gets the deny rule's reason.
	t.Run("a_deny_rule_wins_over_an_allow_and_an_ask_rule_of_higher_priority", func(t *testing.T) {
		admin := adminToken(t, dev)
		for _, rule := range []string{
			`{"id":"g-allow","priority":1,"agent":"bot","server":"demo","tool":"write_file","effect":"allow","reason":"g-allow lets it run"}`,
			`{"id":"g-ask","priority":2,"agent":"bot","server":"demo","tool":"write_file","effect":"ask","reason":"g-ask asks a person"}`,
			`{"id":"g-deny","priority":3,"agent":"bot","server":"demo","tool":"write_file","effect":"deny","reason":"g-deny: bot writes nothing"}`,
		} {
			if status, body := apiPost(t, dev.HTTPURL+"/api/v1/rules", admin, rule); status != http.StatusOK {
				t.Fatalf("add rule %s: %d %s", rule, status, body)
			}
		}
		nc, js := dev.Admin(t)
		rules := policyapi.New(nc, seal.Key{}, "")
		args, _ := structpb.NewStruct(map[string]any{"path": "g/x.txt", "content": "x"})
		call := &airlockv1.ToolCall{AgentId: "bot", CallId: "g-probe", Server: "demo", Tool: "write_file", Arguments: args}
		// The rules reach the policy through its bucket: wait until all
		// three are listed and one of them decides (whichever: which one
		// is what the test asserts).
		testenv.Eventually(t, 20*time.Second, "the three rules to be in force", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			list, err := rules.ListRules(ctx)
			if err != nil {
				return false
			}
			n := 0
			for _, r := range list.GetRules() {
				if strings.HasPrefix(r.GetId(), "g-") {
					n++
				}
			}
			d, err := rules.Eval(ctx, call)
			return n == 3 && err == nil && strings.HasPrefix(d.GetRuleId(), "g-")
		})
		bot := dev.Agent(t, "bot")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := bot.Submit(ctx, airlock.Call{ID: "g1", Server: "demo", Tool: "write_file", Args: map[string]any{"path": "g/x.txt", "content": "x"}}); err != nil {
			t.Fatal(err)
		}
		out, err := bot.Await(ctx, "g1")
		if err != nil {
			t.Fatalf("the call did not end (%v): g-deny must decide it at once", err)
		}
		if out.Status != airlock.StatusDenied || out.Reason != "g-deny: bot writes nothing" {
			t.Errorf("the agent got %s (%q), want denied with g-deny's reason", out.Status, out.Reason)
		}
		if started, completed := testenv.Runs(t, js, "bot", "g1"); started != 0 || completed != 0 {
			t.Errorf("the denied call started %d and completed %d times", started, completed)
		}
		if _, err := os.Stat(filepath.Join(dataDir, "sandbox", "g", "x.txt")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the denied write left a file in the sandbox (stat: %v)", err)
		}
	})

	// H: a call no rule matches waits for a person, and says so.
	t.Run("a_call_no_rule_matches_waits_for_a_person", func(t *testing.T) {
		bot := dev.Agent(t, "bot")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := bot.Submit(ctx, airlock.Call{ID: "h1", Server: "zzz", Tool: "frobnicate", Args: map[string]any{"n": 1}}); err != nil {
			t.Fatal(err)
		}
		rec := apprWaitPending(t, dev.API(t), "h1")
		if d := rec.GetDecision(); d.GetAction() != airlockv1.Action_ACTION_ASK || d.GetRuleId() != "" || d.GetReason() != "no rule matches zzz__frobnicate: a person decides" {
			t.Errorf("the call waits with decision %v, want ask by no rule with the no-rule reason", d)
		}
		_, js := dev.Admin(t)
		if started, completed := testenv.Runs(t, js, "bot", "h1"); started != 0 || completed != 0 {
			t.Errorf("the waiting call started %d and completed %d times", started, completed)
		}
	})
	dev.Interrupt(15 * time.Second)
}
