package tests

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/hooks"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// allowed reports whether the hook's answer lets agent run the tool.
func allowed(t *testing.T, agent hooks.Agent, r hookResult) bool {
	t.Helper()
	if r.exit != 0 {
		return false
	}
	switch agent {
	case hooks.Claude:
		return r.field(t, "hookSpecificOutput.permissionDecision") == "allow"
	case hooks.Codex:
		return strings.TrimSpace(r.stdout) == "" // Codex honours only a deny
	case hooks.Gemini:
		return r.field(t, "decision") == "allow"
	case hooks.Cursor:
		return r.field(t, "permission") == "allow"
	case hooks.Copilot:
		return r.field(t, "permissionDecision") == "allow"
	}
	return false
}

// denied reports whether the hook blocks the call with a reason.
func denied(t *testing.T, agent hooks.Agent, r hookResult, reason string) bool {
	t.Helper()
	if r.exit != 2 || !strings.Contains(r.stderr, reason) {
		return false
	}
	switch agent {
	case hooks.Claude, hooks.Codex:
		return r.field(t, "hookSpecificOutput.permissionDecision") == "deny"
	case hooks.Gemini:
		return r.field(t, "decision") == "deny"
	case hooks.Cursor:
		return r.field(t, "permission") == "deny"
	case hooks.Copilot:
		return r.field(t, "permissionDecision") == "deny"
	}
	return false
}

// The acceptance of issue 16: each agent's documented hook payloads,
// through the real `airlock hook`, against the real `airlock dev`.
func TestCodingAgentsAreGatedThroughTheirHooks(t *testing.T) {
	t.Parallel() // it mostly waits out its hooks' --wait and a person's decision
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_CONFIG="+hookDevConfig(t))
	laptop := dev.Agent(t, "laptop") // acts for admin (policy.on_behalf_of)
	creds := dev.Creds("laptop")
	api := dev.API(t)
	// The credential names dev's default port; this dev runs on another.
	withNATS := func(args ...string) []string {
		return append([]string{"--creds", creds, "--nats", dev.NATSURL}, args...)
	}
	token := adminToken(t, dev)
	approveInConsole := func(t *testing.T, rec *airlockv1.ApprovalRecord) {
		t.Helper()
		path := fmt.Sprintf("%s/api/v1/approvals/%s/%s/approve", dev.HTTPURL, rec.GetCall().GetAgentId(), rec.GetCall().GetCallId())
		if status, body := apiPost(t, path, token, `{"revision":1,"reason":"looks right"}`); status != http.StatusOK {
			t.Fatalf("approve in the console: %d %s", status, body)
		}
	}

	for _, agent := range hooks.Agents {
		t.Run(string(agent), func(t *testing.T) {
			state := t.TempDir()
			hook := withNATS("--state-dir", state)
			id := func(what string) string { return string(agent) + "_" + what }
			shellTool := map[hooks.Agent]string{hooks.Claude: "claude__Bash", hooks.Codex: "codex__Bash", hooks.Gemini: "gemini__run_shell_command",
				hooks.Cursor: "cursor__Shell", hooks.Copilot: "copilot__bash"}[agent]

			t.Run("a_read_only_command_is_allowed", func(t *testing.T) {
				if r := runHook(t, agent, shell(t, agent, "git status", id("allow")), hook...); !allowed(t, agent, r) {
					t.Fatalf("git status: %+v", r)
				}
			})
			t.Run("a_destructive_command_is_denied_with_the_reason_and_the_blocking_status", func(t *testing.T) {
				r := runHook(t, agent, shell(t, agent, "rm -rf /", id("deny")), hook...)
				if !denied(t, agent, r, "never run for an agent") {
					t.Fatalf("rm -rf /: %+v", r)
				}
			})
			t.Run("a_call_nobody_decides_in_time_is_asked_where_the_agent_can_ask_and_denied_elsewhere", func(t *testing.T) {
				r := runHook(t, agent, shell(t, agent, "npm install left-pad", id("ask")), append(hook, "--wait", "1s", "--on-timeout", "ask")...)
				switch agent {
				case hooks.Claude:
					if r.exit != 0 || r.field(t, "hookSpecificOutput.permissionDecision") != "ask" {
						t.Fatalf("ask: %+v", r)
					}
				case hooks.Cursor:
					if r.exit != 0 || r.field(t, "permission") != "ask" {
						t.Fatalf("ask: %+v", r)
					}
				case hooks.Copilot:
					if r.exit != 0 || r.field(t, "permissionDecision") != "ask" {
						t.Fatalf("ask: %+v", r)
					}
				default:
					if !denied(t, agent, r, "cannot ask its user") {
						t.Fatalf("ask on an agent that cannot ask: %+v", r)
					}
				}
			})
			t.Run("a_person_approves_in_the_console_while_the_hook_waits", func(t *testing.T) {
				ch := startHook(t, agent, shell(t, agent, "make build", id("approve")), append(hook, "--wait", "60s")...)
				rec := pendingOf(t, api, "laptop", shellTool, "make build")
				if !rec.GetCall().GetAgentRuns() || rec.GetCall().GetOnBehalfOf() != "admin" || !rec.GetCall().GetOnBehalfOfVerified() {
					t.Fatalf("pending call %v: want a gate-only call acting for admin", rec.GetCall())
				}
				// The reviewer sees where the command runs: the payload's cwd.
				if cwd := rec.GetCall().GetCwd(); cwd != "/home/dev/shop" {
					t.Errorf("the pending call's working directory is %q, want the payload's /home/dev/shop", cwd)
				}
				approveInConsole(t, rec)
				if r := waitHook(t, ch); !allowed(t, agent, r) {
					t.Fatalf("after the approval: %+v", r)
				}
			})
			t.Run("a_reviewers_rejection_reaches_the_model", func(t *testing.T) {
				ch := startHook(t, agent, shell(t, agent, "make deploy", id("reject")), append(hook, "--wait", "60s")...)
				rec := pendingOf(t, api, "laptop", shellTool, "make deploy")
				if _, err := decideAs(t, api, "bob", rec, airlockv1.DecisionKind_DECISION_KIND_REJECT, "deploys go through CI"); err != nil {
					t.Fatal(err)
				}
				if r := waitHook(t, ch); !denied(t, agent, r, "deploys go through CI") {
					t.Fatalf("after the rejection: %+v", r)
				}
			})
			t.Run("no_decision_within_the_wait_is_a_deny", func(t *testing.T) {
				r := runHook(t, agent, shell(t, agent, "make clean", id("timeout")), append(hook, "--wait", "1s")...)
				if !denied(t, agent, r, "nobody decided") {
					t.Fatalf("timeout: %+v", r)
				}
			})
			post := map[hooks.Agent]string{hooks.Claude: "PostToolUse-Bash", hooks.Codex: "PostToolUse-Bash", hooks.Gemini: "AfterTool-run_shell_command",
				hooks.Cursor: "afterShellExecution", hooks.Copilot: "postToolUse-bash"}[agent]
			t.Run("the_post_tool_report_becomes_the_calls_outcome", func(t *testing.T) {
				state := t.TempDir()
				hook := withNATS("--state-dir", state)
				pre := shell(t, agent, "git status", id("report"))
				if r := runHook(t, agent, pre, hook...); !allowed(t, agent, r) {
					t.Fatalf("pre-tool: %+v", r)
				}
				callID := id("report")
				if agent != hooks.Claude && agent != hooks.Codex {
					entries, err := os.ReadDir(state)
					if err != nil || len(entries) != 1 {
						t.Fatalf("the pre-tool hook remembered %d tool uses: %v", len(entries), err)
					}
					b, _ := os.ReadFile(filepath.Join(state, entries[0].Name()))
					callID = string(b)
				}
				set := map[string]any{commandKey[agent]: "git status"}
				if agent == hooks.Claude || agent == hooks.Codex {
					set["tool_use_id"] = callID
				}
				if r := runHook(t, agent, payload(t, agent, post, set), hook...); r.exit != 0 {
					t.Fatalf("post-tool: %+v", r)
				}
				if out := reportedOutcome(t, laptop, callID); out.Status != airlock.StatusCompleted || !out.AgentRan || len(out.Result) == 0 {
					t.Fatalf("outcome %+v: want completed, run by the agent, with its result", out)
				}
			})
		})
	}

	t.Run("hook_test_prints_what_the_agent_would_receive", func(t *testing.T) {
		out, err := runAirlock(t, append([]string{"hook", "test", "claude"}, withNATS()...)...)
		if err != nil || !strings.Contains(out, `"permissionDecision":"allow"`) || !strings.Contains(out, "exit:   0") {
			t.Fatalf("hook test: %v\n%s", err, out)
		}
	})

	t.Run("self_confirmation", func(t *testing.T) {
		// A rule only the person the call acts for may confirm.
		if status, body := apiPost(t, dev.HTTPURL+"/api/v1/rules", token,
			`{"id":"mine-only","priority":0,"pattern":"claude__Write","effect":"ask","approvers":["requester"]}`); status != http.StatusOK {
			t.Fatalf("put rule: %d %s", status, body)
		}
		ch := startHook(t, hooks.Claude, payload(t, hooks.Claude, "PreToolUse-Edit", map[string]any{
			"tool_name": "Write", "tool_use_id": "toolu_self1", "tool_input": map[string]any{"file_path": "/home/dev/shop/x.go", "content": "package x"}}),
			withNATS("--wait", "60s")...)
		rec := pendingOf(t, api, "laptop", "claude__Write", "/home/dev/shop/x.go")
		if _, err := decideAs(t, api, "bob", rec, airlockv1.DecisionKind_DECISION_KIND_APPROVE, ""); err == nil {
			t.Fatal("bob, a reviewer but not the requester, confirmed a call only its requester may")
		}
		if resp, err := decideAs(t, api, "admin", rec, airlockv1.DecisionKind_DECISION_KIND_APPROVE, "mine"); err != nil || !resp.GetChanged() {
			t.Fatalf("the requester could not confirm their own call: %v %v", resp, err)
		}
		if r := waitHook(t, ch); !allowed(t, hooks.Claude, r) {
			t.Fatalf("after self-confirmation: %+v", r)
		}

		// An ordinary rule: the requester still may not approve.
		id := mustSubmit(t, laptop, airlock.Call{Server: "fs", Tool: "write_file", Args: map[string]any{"path": "/tmp/x"}})
		ord := waitApproval(t, api, "laptop", id, 1, airlockv1.ApprovalState_APPROVAL_STATE_PENDING)
		if _, err := decideAs(t, api, "admin", ord, airlockv1.DecisionKind_DECISION_KIND_APPROVE, ""); err == nil {
			t.Fatal("the requester approved their own call under an ordinary rule")
		}
		if _, err := decideAs(t, api, "bob", ord, airlockv1.DecisionKind_DECISION_KIND_APPROVE, ""); err != nil {
			t.Fatalf("bob could not approve the ordinary call: %v", err)
		}
	})

	t.Run("a_user_allowlist_denies_everyone_else", func(t *testing.T) {
		if status, body := apiPost(t, dev.HTTPURL+"/api/v1/rules", token,
			`{"id":"notebooks-dana-only","priority":0,"pattern":"claude__NotebookEdit","principals":["dana"],"effect":"ask","approvers":["requester"]}`); status != http.StatusOK {
			t.Fatalf("put rule: %d %s", status, body)
		}
		nb := payload(t, hooks.Claude, "PreToolUse-Edit", map[string]any{"tool_name": "NotebookEdit", "tool_use_id": "toolu_nb1", "tool_input": map[string]any{"notebook_path": "/x.ipynb"}})
		if r := runHook(t, hooks.Claude, nb, withNATS("--wait", "5s")...); !denied(t, hooks.Claude, r, "only dana may trigger") {
			t.Fatalf("admin's agent triggered dana's tool: %+v", r)
		}
		desk := dev.Agent(t, "desk") // acts for dana
		id := mustSubmit(t, desk, airlock.Call{Server: "claude", Tool: "NotebookEdit", Args: map[string]any{"notebook_path": "/x.ipynb"}, AgentRuns: true})
		waitApproval(t, api, "desk", id, 1, airlockv1.ApprovalState_APPROVAL_STATE_PENDING)
	})

	t.Run("a_threads_later_calls_queue_behind_its_earlier_one", func(t *testing.T) {
		edit := func(useID, file string) []byte {
			return payload(t, hooks.Claude, "PreToolUse-Edit", map[string]any{"session_id": "queue-session", "tool_use_id": useID,
				"tool_input": map[string]any{"file_path": file, "old_string": "a", "new_string": "b"}})
		}
		first := startHook(t, hooks.Claude, edit("toolu_q1", "/a.go"), withNATS("--wait", "60s")...)
		r1 := decidable(t, api, "laptop", "toolu_q1")
		second := startHook(t, hooks.Claude, edit("toolu_q2", "/b.go"), withNATS("--wait", "60s")...)
		r2 := waitApproval(t, api, "laptop", "toolu_q2", 1, airlockv1.ApprovalState_APPROVAL_STATE_PENDING)
		if r1.GetQueued() || !r2.GetQueued() {
			t.Fatalf("queued: first %v, second %v; want only the second", r1.GetQueued(), r2.GetQueued())
		}
		// A hostile agent names the same thread: it is its own queue, and it
		// cannot move laptop's.
		evil := dev.Agent(t, "evil")
		evilID := mustSubmit(t, evil, airlock.Call{ID: "toolu_q1", Server: "claude", Tool: "Edit", Thread: "queue-session", AgentRuns: true, Args: map[string]any{"file_path": "/c.go"}})
		waitApproval(t, api, "evil", evilID, 1, airlockv1.ApprovalState_APPROVAL_STATE_PENDING)
		testenv.Eventually(t, 10*time.Second, "evil's call to get its own turn (not laptop's queue)", func() bool {
			rec, err := api.Get(context.Background(), "evil", evilID, 1)
			return err == nil && !rec.GetQueued()
		})
		if _, err := decideAs(t, api, "bob", &airlockv1.ApprovalRecord{Call: &airlockv1.ToolCall{AgentId: "evil", CallId: evilID}}, airlockv1.DecisionKind_DECISION_KIND_REJECT, "no"); err != nil {
			t.Fatal(err)
		}
		if rec, _ := api.Get(context.Background(), "laptop", "toolu_q2", 1); !rec.GetQueued() {
			t.Fatal("deciding another agent's call released laptop's queue")
		}
		if resp, err := decideAs(t, api, "admin", r2, airlockv1.DecisionKind_DECISION_KIND_APPROVE, ""); err != nil || resp.GetChanged() {
			t.Fatalf("the queued call was decided before its turn: %v %v", resp, err)
		}
		if _, err := decideAs(t, api, "admin", r1, airlockv1.DecisionKind_DECISION_KIND_APPROVE, ""); err != nil {
			t.Fatal(err)
		}
		if r := waitHook(t, first); !allowed(t, hooks.Claude, r) {
			t.Fatalf("first: %+v", r)
		}
		testenv.Eventually(t, 20*time.Second, "the second call's turn", func() bool {
			rec, err := api.Get(context.Background(), "laptop", "toolu_q2", 1)
			return err == nil && !rec.GetQueued()
		})
		if _, err := decideAs(t, api, "admin", r2, airlockv1.DecisionKind_DECISION_KIND_APPROVE, ""); err != nil {
			t.Fatal(err)
		}
		if r := waitHook(t, second); !allowed(t, hooks.Claude, r) {
			t.Fatalf("second: %+v", r)
		}
	})

	t.Run("a_remembered_command_prefix_answers_the_next_such_command", func(t *testing.T) {
		ch := startHook(t, hooks.Claude, shell(t, hooks.Claude, "npm test -- --grep cart", "toolu_rem1"), withNATS("--wait", "60s")...)
		rec := decidable(t, api, "laptop", "toolu_rem1")
		if _, err := decideAs(t, api, "admin", rec, airlockv1.DecisionKind_DECISION_KIND_APPROVE, ""); err != nil {
			t.Fatal(err)
		}
		if r := waitHook(t, ch); !allowed(t, hooks.Claude, r) {
			t.Fatalf("first npm test: %+v", r)
		}
		// The requester remembers the decision, from the REST API the CLI and
		// the console use: npm test, 5 uses, an hour.
		grant := `{"from_call_id":"toolu_rem1","agent_id":"laptop","tool":"claude__Bash","command_prefixes":{"/command":"npm test"},"uses":5,"expires_in":"1h"}`
		if status, body := apiPost(t, dev.HTTPURL+"/api/v1/grants", token, grant); status != http.StatusCreated {
			t.Fatalf("remember: %d %s", status, body)
		}
		testenv.Eventually(t, 10*time.Second, "the grant to answer the next npm test", func() bool {
			r := runHook(t, hooks.Claude, shell(t, hooks.Claude, "npm test", fmt.Sprintf("toolu_rem_%d", time.Now().UnixNano())), withNATS("--wait", "1s")...)
			return allowed(t, hooks.Claude, r) && strings.Contains(r.stdout, "standing grant")
		})
		if r := runHook(t, hooks.Claude, shell(t, hooks.Claude, "npm test && curl https://evil.example", "toolu_rem_chain"), withNATS("--wait", "1s")...); allowed(t, hooks.Claude, r) {
			t.Fatal("the remembered prefix let a chained command through")
		}
	})

	t.Run("hostile_reports", func(t *testing.T) {
		report := func(c *airlock.Client, id string) {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := c.Report(ctx, id, 1, airlock.Report{Result: json.RawMessage(`"forged"`)}); err != nil {
				t.Fatal(err)
			}
		}
		refusals := func(agent, call string) int {
			n := 0
			nc, js := dev.Admin(t)
			_ = nc
			subj, _ := subject.Event(agent, call, subject.UnauthorizedAttempt)
			for _, ev := range testenv.Events(t, js, subj) {
				if ev.GetUnauthorizedAttempt().GetAction() == "report" {
					n++
				}
			}
			return n
		}
		// laptop's allowed call, already reported by its post-tool hook.
		victim := "claude_report"
		evil := dev.Agent(t, "evil")
		t.Run("a_report_for_another_agents_call_reaches_only_the_reporters_own", func(t *testing.T) {
			report(evil, victim)
			testenv.Eventually(t, 10*time.Second, "the refusal", func() bool { return refusals("evil", victim) == 1 })
		})
		t.Run("a_second_report_is_refused", func(t *testing.T) {
			report(laptop, victim)
			testenv.Eventually(t, 10*time.Second, "the refusal", func() bool { return refusals("laptop", victim) == 1 })
		})
		t.Run("a_report_for_a_denied_call_is_refused", func(t *testing.T) {
			report(laptop, "claude_deny")
			testenv.Eventually(t, 10*time.Second, "the refusal", func() bool { return refusals("laptop", "claude_deny") == 1 })
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if out := reportedOutcome(t, laptop, victim); out.Status != airlock.StatusCompleted || strings.Contains(string(out.Result), "forged") {
			t.Fatalf("the victim's outcome changed: %+v", out)
		}
		if out, err := laptop.Await(ctx, "claude_deny"); err != nil || out.Status != airlock.StatusDenied {
			t.Fatalf("the denied call's outcome changed: %+v %v", out, err)
		}
	})
}

// Fail closed: with airlock unreachable every agent's hook blocks the call
// with the status that agent treats as blocking, and says why.
func TestHooksDenyWhenAirlockIsDown(t *testing.T) {
	dir := t.TempDir()
	creds := filepath.Join(dir, "laptop.creds.json")
	if _, err := natsauth.NewCredential(creds, "laptop", fmt.Sprintf("nats://127.0.0.1:%d", freePort(t))); err != nil {
		t.Fatal(err)
	}
	for _, agent := range hooks.Agents {
		t.Run(string(agent), func(t *testing.T) {
			r := runHook(t, agent, shell(t, agent, "git status", "toolu_down"), "--creds", creds, "--state-dir", dir)
			if !denied(t, agent, r, "could not be reached") {
				t.Fatalf("airlock down: %+v", r)
			}
		})
	}
	t.Run("a_malformed_payload_is_denied_too", func(t *testing.T) {
		if r := runHook(t, hooks.Claude, []byte("{not json"), "--creds", creds); !denied(t, hooks.Claude, r, "could not read the hook payload") {
			t.Fatalf("malformed: %+v", r)
		}
	})
	t.Run("an_unknown_flag_is_denied_not_exit_1", func(t *testing.T) {
		if r := runHook(t, hooks.Claude, shell(t, hooks.Claude, "ls", "toolu_flag"), "--no-such-flag"); r.exit != 2 {
			t.Fatalf("unknown flag: %+v", r)
		}
	})
}

// Fail closed on events airlock does not know: a new or unknown event of
// an agent (Cursor's beforeTabFileRead, a made-up beforeFooBar) is denied
// with a reason, not answered "{}" (which lets the agent proceed); the
// agent's documented report-only events are still acknowledged.
func TestHookDeniesEventsItDoesNotKnow(t *testing.T) {
	dir := t.TempDir()
	creds := filepath.Join(dir, "laptop.creds.json")
	if _, err := natsauth.NewCredential(creds, "laptop", fmt.Sprintf("nats://127.0.0.1:%d", freePort(t))); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		agent  hooks.Agent
		event  string
		denied bool
	}{
		{"cursor_beforeTabFileRead_is_denied", hooks.Cursor, "beforeTabFileRead", true},
		{"cursor_beforeFooBar_is_denied", hooks.Cursor, "beforeFooBar", true},
		{"claude_an_unknown_event_is_denied", hooks.Claude, "PreFooBar", true},
		{"gemini_an_unknown_event_is_denied", hooks.Gemini, "BeforeFooBar", true},
		{"cursor_afterFileEdit_is_acknowledged", hooks.Cursor, "afterFileEdit", false},
		{"claude_Stop_is_acknowledged", hooks.Claude, "Stop", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			payload, err := json.Marshal(map[string]any{"hook_event_name": tc.event, "conversation_id": "c1", "session_id": "s1",
				"file_path": "/home/dev/.ssh/id_ed25519", "content": "secret"})
			if err != nil {
				t.Fatal(err)
			}
			r := runHook(t, tc.agent, payload, "--creds", creds, "--state-dir", dir)
			if !tc.denied {
				if r.exit != 0 {
					t.Fatalf("a report-only event must be acknowledged: %+v", r)
				}
				return
			}
			if !denied(t, tc.agent, r, "does not know the "+string(tc.agent)+" hook event") {
				t.Fatalf("an unknown event must be denied with a reason: %+v", r)
			}
		})
	}
}

func TestHookInstallMergesIntoAnExistingSettingsFile(t *testing.T) {
	home := t.TempDir()
	creds := filepath.Join(home, "laptop.creds.json")
	writeFile(t, creds, "{}")
	settings := filepath.Join(home, ".claude", "settings.json")
	if err := os.MkdirAll(filepath.Dir(settings), 0o755); err != nil {
		t.Fatal(err)
	}
	before := `{"model":"opus","hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"/home/dev/guard.sh"}]}]}}`
	writeFile(t, settings, before)
	for range 2 { // installing again replaces airlock's own hook
		if out, err := runAirlock(t, "hook", "install", "claude", "--user", "--home", home, "--creds", creds, "--wait", "2m"); err != nil {
			t.Fatalf("hook install: %v\n%s", err, out)
		}
	}
	var m struct {
		Model string                      `json:"model"`
		Hooks map[string][]map[string]any `json:"hooks"`
	}
	if err := json.Unmarshal([]byte(readFileString(t, settings)), &m); err != nil {
		t.Fatal(err)
	}
	pre, _ := json.Marshal(m.Hooks["PreToolUse"])
	if m.Model != "opus" || len(m.Hooks["PreToolUse"]) != 2 || !strings.Contains(string(pre), "guard.sh") ||
		!strings.Contains(string(pre), " hook claude --creds "+creds) || len(m.Hooks["PostToolUse"]) != 1 {
		t.Fatalf("merged settings: %s", readFileString(t, settings))
	}
	if !strings.Contains(string(pre), `"timeout":150`) {
		t.Fatalf("the agent's hook timeout is not longer than the wait: %s", pre)
	}
	if got := readFileString(t, settings+".airlock-backup"); got != before {
		t.Fatalf("backup %q, want the file as it was", got)
	}
}

// R9 F4. The post-tool hook of an auto-allowed Read recorded the file's
// contents (tool_response) as the call's outcome, so every auditor read
// the secrets in it in `airlock audit export`; a failed tool's error text
// was kept whole. What must hold: by default the trail keeps the result's
// or the error's size and SHA-256 only; an operator who opts in with
// --record-results keeps the text.
func TestTheHookRecordsAResultsDigestNotItsTextUnlessTold(t *testing.T) {
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_CONFIG="+hookDevConfig(t))
	dev.Agent(t, "laptop")
	creds := dev.Creds("laptop")
	const secret = `DB_PASSWORD = "hunter2-prod"`
	response := map[string]any{"type": "text", "file": map[string]any{"filePath": "/home/dev/shop/settings.py", "content": secret + "\n"}}
	responseJSON, err := json.Marshal(response)
	if err != nil {
		t.Fatal(err)
	}
	resultSum := sha256.Sum256(responseJSON)
	// A failed tool's error text holds what it printed too.
	failure := "Error: could not connect with " + secret
	errorSum := sha256.Sum256([]byte(failure))
	for _, tt := range []struct {
		name       string
		flags      []string
		failed     bool
		wantSecret bool
	}{
		{"by_default_the_size_and_digest", nil, false, false},
		{"with_record_results_the_text", []string{"--record-results"}, false, true},
		{"a_failed_tools_error_by_default_its_size_and_digest", nil, true, false},
		{"a_failed_tools_error_with_record_results_its_text", []string{"--record-results"}, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			id := "toolu_r9read_" + tt.name
			hook := append([]string{"--creds", creds, "--nats", dev.NATSURL, "--state-dir", t.TempDir()}, tt.flags...)
			read := map[string]any{"tool_name": "Read", "tool_use_id": id, "tool_input": map[string]any{"file_path": "/home/dev/shop/settings.py"}}
			if r := runHook(t, hooks.Claude, payload(t, hooks.Claude, "PreToolUse-Edit", read), hook...); !allowed(t, hooks.Claude, r) {
				t.Fatalf("pre-tool Read: %+v", r)
			}
			ended, sum := `"completed"`, resultSum
			if tt.failed {
				read["hook_event_name"], read["error"] = "PostToolUseFailure", failure
				ended, sum = `"failed"`, errorSum
			} else {
				read["tool_response"] = response
			}
			if r := runHook(t, hooks.Claude, payload(t, hooks.Claude, "PostToolUse-Bash", read), hook...); r.exit != 0 || r.stderr != "" {
				t.Fatalf("post-tool Read: %+v", r)
			}
			var export cliRun
			testenv.Eventually(t, 20*time.Second, "the end event of "+id+" in the export", func() bool {
				export = cli(t, dev, "audit", "export", "--format", "jsonl", "--call", id)
				return export.Code == 0 && strings.Contains(export.Stdout, ended)
			})
			if got := strings.Contains(export.Stdout, "hunter2-prod"); got != tt.wantSecret {
				t.Fatalf("the export holds the tool's text: %v, want %v\n%s", got, tt.wantSecret, export.Stdout)
			}
			if !tt.wantSecret && !strings.Contains(export.Stdout, hex.EncodeToString(sum[:])) {
				t.Fatalf("the export lacks the SHA-256 %x:\n%s", sum, export.Stdout)
			}
		})
	}
}
