package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/hooks"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// hookDevConfig binds agent laptop to admin (dev's first admin, a
// reviewer) and agent desk to dana, so their calls' requester is verified;
// bob reviews too.
func hookDevConfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "airlock.yaml")
	writeFile(t, path, `policy:
  on_behalf_of: {laptop: admin, desk: dana}
approval:
  groups: {reviewers: [bob]}
`)
	return path
}

// hookResult is what an `airlock hook` process answered.
type hookResult struct {
	stdout, stderr string
	exit           int
}

// out decodes the hook's stdout (nil when it wrote nothing).
func (r hookResult) out(t *testing.T) map[string]any {
	t.Helper()
	if strings.TrimSpace(r.stdout) == "" {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("the hook's stdout is not JSON: %q", r.stdout)
	}
	return m
}

// field reads a dotted path of the hook's stdout.
func (r hookResult) field(t *testing.T, path string) any {
	t.Helper()
	var cur any = r.out(t)
	for _, p := range strings.Split(path, ".") {
		m, _ := cur.(map[string]any)
		cur = m[p]
	}
	return cur
}

// runHook runs the real binary's `airlock hook AGENT` with payload on stdin.
func runHook(t *testing.T, agent hooks.Agent, payload []byte, args ...string) hookResult {
	t.Helper()
	return waitHook(t, startHook(t, agent, payload, args...))
}

// startHook runs the hook in the background; the result arrives on the channel.
func startHook(t *testing.T, agent hooks.Agent, payload []byte, args ...string) <-chan hookResult {
	t.Helper()
	ch := make(chan hookResult, 1)
	bin := airlockBinary(t)
	go func() {
		cmd := exec.Command(bin, append([]string{"hook", string(agent)}, args...)...)
		cmd.Stdin = bytes.NewReader(payload)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		res := hookResult{stdout: stdout.String(), stderr: stderr.String()}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			res.exit = ee.ExitCode()
		} else if err != nil {
			res.exit, res.stderr = -1, err.Error()
		}
		ch <- res
	}()
	return ch
}

func waitHook(t *testing.T, ch <-chan hookResult) hookResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(60 * time.Second):
		t.Fatal("the hook did not answer within 60s")
	}
	return hookResult{}
}

// runHooks runs the n hooks start starts, ten at a time (each running hook
// is a process with its own NATS connection: dozens at once on two cores
// is load, not a test of the profile), and returns their answers in order.
func runHooks(t *testing.T, n int, start func(i int) <-chan hookResult) []hookResult {
	t.Helper()
	out := make([]hookResult, n)
	for from := 0; from < n; from += 10 {
		to := min(from+10, n)
		running := make([]<-chan hookResult, 0, to-from)
		for i := from; i < to; i++ {
			running = append(running, start(i))
		}
		for k, ch := range running {
			out[from+k] = waitHook(t, ch)
		}
	}
	return out
}

// payload is a recorded payload of agent with fields replaced: top-level
// keys, and "tool_input.<k>" / "toolArgs.<k>" / "command" for the tool's
// arguments (a string-encoded toolArgs or tool_input stays a string).
func payload(t *testing.T, agent hooks.Agent, fixture string, set map[string]any) []byte {
	t.Helper()
	raw, err := hooks.Fixture(agent, fixture)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range set {
		outer, inner, nested := strings.Cut(k, ".")
		if !nested {
			m[k] = v
			continue
		}
		switch args := m[outer].(type) {
		case map[string]any:
			args[inner] = v
		case string:
			var a map[string]any
			_ = json.Unmarshal([]byte(args), &a)
			a[inner] = v
			b, _ := json.Marshal(a)
			m[outer] = string(b)
		default:
			m[outer] = map[string]any{inner: v}
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// commandKey is where each agent's shell payload carries its command.
var commandKey = map[hooks.Agent]string{
	hooks.Claude: "tool_input.command", hooks.Codex: "tool_input.command", hooks.Gemini: "tool_input.command",
	hooks.Cursor: "command", hooks.Copilot: "toolArgs.command",
}

// shell is agent's pre-tool shell payload running command, with a fresh
// tool-use id where the agent gives one.
func shell(t *testing.T, agent hooks.Agent, command, toolUseID string) []byte {
	t.Helper()
	set := map[string]any{commandKey[agent]: command}
	if agent == hooks.Claude || agent == hooks.Codex {
		set["tool_use_id"] = toolUseID
	}
	return payload(t, agent, hooks.SampleName(agent), set)
}

// pendingOf waits for the pending call of agent whose tool is tool and
// whose arguments hold arg (the command, the file), whose turn in its
// thread's queue has come (a queued call is not decidable yet), and returns
// it. Named by an argument, not by the tool alone: a call of the same tool
// an earlier step left (a hook that gave up withdraws its call a moment
// later, and the list follows the store a moment late) is not this one.
func pendingOf(t *testing.T, api *approvalapi.Client, agent, tool, arg string) *airlockv1.ApprovalRecord {
	t.Helper()
	return pendingWhere(t, api, agent, tool, fmt.Sprintf("on %q whose turn came", arg), func(r *airlockv1.ApprovalRecord) bool {
		if r.GetQueued() {
			return false
		}
		args, err := json.Marshal(r.GetCall().GetArguments().AsMap())
		return err == nil && strings.Contains(string(args), arg)
	})
}

// pendingWhere waits for a pending call of agent whose tool is tool and
// that match accepts (what says which, for the failure), and returns it.
func pendingWhere(t *testing.T, api *approvalapi.Client, agent, tool, what string, match func(*airlockv1.ApprovalRecord) bool) *airlockv1.ApprovalRecord {
	t.Helper()
	var rec *airlockv1.ApprovalRecord
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("a pending %s call of %s %s", tool, agent, what), func() bool {
		out, err := api.List(context.Background(), &airlockv1.ListRequest{AgentId: agent, Tool: tool,
			States: []airlockv1.ApprovalState{airlockv1.ApprovalState_APPROVAL_STATE_PENDING}})
		if err != nil {
			return false
		}
		for _, r := range out.GetRecords() {
			if match(r) {
				rec = r
				return true
			}
		}
		return false
	})
	return rec
}

// decidable waits until revision 1 of agent's call is pending and its turn
// in its thread's queue has come, and returns it.
func decidable(t *testing.T, api *approvalapi.Client, agent, call string) *airlockv1.ApprovalRecord {
	t.Helper()
	var rec *airlockv1.ApprovalRecord
	testenv.Eventually(t, 20*time.Second, fmt.Sprintf("%s/%s pending and its turn", agent, call), func() bool {
		r, err := api.Get(context.Background(), agent, call, 1)
		rec = r
		return err == nil && r.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_PENDING && !r.GetQueued()
	})
	return rec
}

func decideAs(t *testing.T, api *approvalapi.Client, who string, rec *airlockv1.ApprovalRecord, kind airlockv1.DecisionKind, reason string) (*airlockv1.DecideResponse, error) {
	t.Helper()
	return api.Decide(context.Background(), &airlockv1.DecideRequest{
		AgentId: rec.GetCall().GetAgentId(), CallId: rec.GetCall().GetCallId(), Kind: kind, Reason: reason, Principal: reviewer(who),
	})
}

// reportedOutcome is the outcome of a gate-only call once the agent's report
// is recorded: Await ends such a call at its decision, and returns the
// report once it is there.
func reportedOutcome(t *testing.T, c *airlock.Client, callID string) airlock.Outcome {
	t.Helper()
	var out airlock.Outcome
	testenv.Eventually(t, 20*time.Second, "the report of "+callID+" recorded", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		o, err := c.Await(ctx, callID)
		out = o
		return err == nil && !o.Allowed()
	})
	return out
}
