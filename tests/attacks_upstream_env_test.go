package tests

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// A stdio MCP server airlock starts ran with the whole environment of the
// process that started it: in `airlock dev` and `airlock serve executor`
// that holds the webhook signing secrets (secret_env), the decision key
// (AIRLOCK_SECURITY_DECISION_KEY) and whatever else the operator exported.
// The server is third-party code that runs what an agent asks of it, so
// one call of a tool that prints the environment (server-everything's
// get-env, or any shell or code tool) handed them to the agent. What must
// hold: a server sees only the variables a program needs to run (the MCP
// SDKs' default: HOME, LOGNAME, PATH, SHELL, TERM, USER, and the locale)
// and those its entry's env names.
func TestAnMCPServerAirlockStartsSeesNoneOfItsSecrets(t *testing.T) {
	evBin := nodeBin(t, "mcp-server-everything")
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools.yaml")
	writeFile(t, tools, fmt.Sprintf(`servers:
  ev:
    mcp: {command: %q, env: {EV_GREETING: "hello ${EV_NAME}"}}
  hook:
    webhook: {url: "http://127.0.0.1:9/hook", secret_env: HOOK_SECRET}
    tools: {pay: {}}
`, evBin))
	cfg := filepath.Join(dir, "airlock.yaml")
	writeFile(t, cfg, fmt.Sprintf("approval:\n  groups:\n    reviewers: [alice, bob]\nexecutor:\n  tools_file: %s\n", tools))
	secrets := map[string]string{
		"HOOK_SECRET":          "hook-secret-5b0c9e1d",
		"OPERATOR_CLOUD_TOKEN": "cloud-token-8d2f7a44",
	}
	env := []string{"AIRLOCK_CONFIG=" + cfg, "EV_NAME=airlock"}
	for k, v := range secrets {
		env = append(env, k+"="+v)
	}
	dev := startDev(t, filepath.Join(dir, "data"), 0, "", env...)
	agent := dev.Agent(t, "bot")
	api := dev.API(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	if _, err := agent.Submit(ctx, airlock.Call{ID: "env", Server: "ev", Tool: "get-env", Args: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	// Whether the policy asks about an unknown server's tool or not, the
	// call runs: a reviewer approves it if asked.
	var out airlock.Outcome
	testenv.Eventually(t, 60*time.Second, "the get-env call to run", func() bool {
		if r, err := api.Get(ctx, "bot", "env", 0); err == nil && r.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_PENDING {
			if _, err := api.Decide(ctx, &airlockv1.DecideRequest{AgentId: "bot", CallId: "env", Revision: r.GetCall().GetRevision(),
				Kind: airlockv1.DecisionKind_DECISION_KIND_APPROVE, Principal: apprReviewer("bob")}); err != nil {
				t.Logf("approve: %v", err)
			}
		}
		actx, acancel := context.WithTimeout(ctx, time.Second)
		defer acancel()
		o, err := agent.Await(actx, "env")
		out = o
		return err == nil && o.Status != ""
	})
	if out.Status != airlock.StatusCompleted {
		t.Fatalf("get-env ended %s (%s), want completed", out.Status, out.Reason)
	}
	printed := string(out.Result)
	// The tool ran and printed its environment: PATH (which node needs to
	// start) and the entry's own variable, expanded, are there.
	for _, want := range []string{`PATH`, `EV_GREETING`, `hello airlock`} {
		if !strings.Contains(printed, want) {
			t.Fatalf("setup: the server's environment lacks %s: %.600s", want, printed)
		}
	}
	for k, v := range secrets {
		if strings.Contains(printed, v) || strings.Contains(printed, k) {
			t.Errorf("the MCP server airlock started could read %s, which the process that started it holds", k)
		}
	}
	for _, k := range []string{"AIRLOCK_CONFIG", "EV_NAME"} {
		if strings.Contains(printed, `\"`+k+`\"`) || strings.Contains(printed, `"`+k+`"`) {
			t.Errorf("the MCP server airlock started inherited %s, which its entry does not name", k)
		}
	}
}
