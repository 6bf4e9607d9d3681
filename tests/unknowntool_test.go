package tests

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestThoseWhoDecideAreToldOfACallThatCannotRun: a call to a tool the
// executor's registry lacks still waits for a person (no rule matches →
// ask, SPEC §9 H), but its console page and inbox row warn that even
// approved it cannot run and say what to do, and the REST pending answers
// carry it: the reviewers' record with what the registry has instead, the
// agent's without the registry's contents. A call of a tool the registry
// has, and a gate-only call (its agent runs a tool no registry holds), get
// no warning.
func TestThoseWhoDecideAreToldOfACallThatCannotRun(t *testing.T) {
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_EXECUTOR_SANDBOX="+t.TempDir())
	dev.Agent(t, "bot")
	admin := adminToken(t, dev)
	agent := agentToken(t, dev, admin, "bot")
	type unknownTool struct {
		Tool        string   `json:"tool"`
		ServerTools []string `json:"server_tools"`
		Message     string   `json:"message"`
	}
	for _, tc := range []struct {
		name, id, body string
		warned         bool
	}{
		{"a_tool_the_registry_lacks_is_flagged_everywhere", "u1", `{"call_id":"u1","tool":"demo__nope","arguments":{}}`, true},
		{"a_tool_the_registry_has_is_not", "w1", `{"call_id":"w1","tool":"demo__write_file","arguments":{"path":"w.txt","content":"x"}}`, false},
		{"a_gate_only_call_whose_agent_runs_the_tool_is_not", "g1", `{"call_id":"g1","tool":"shell__run","arguments":{"command":"ls"},"agent_runs":true}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if status, body := apiPost(t, dev.HTTPURL+"/api/v1/calls", agent, tc.body); status != http.StatusAccepted {
				t.Fatalf("submit: %d %s", status, body)
			}
			// The agent's pending answer, once a person is asked (and, for
			// the tool the registry lacks, once the console has the registry:
			// a page waits for its first listing at most 150 ms, so on a
			// loaded machine the first answers may come without it; every
			// surface below reads the same list after).
			var pending struct {
				WaitingFor  string       `json:"waiting_for"`
				UnknownTool *unknownTool `json:"unknown_tool"`
			}
			for deadline := time.Now().Add(15 * time.Second); pending.WaitingFor != "a person" || tc.warned && pending.UnknownTool == nil; {
				if time.Now().After(deadline) {
					t.Fatalf("call %s never came to wait for a person (with the registry's warning: %v): %+v", tc.id, tc.warned, pending)
				}
				status, body := bearerGet(t, dev.HTTPURL+"/api/v1/calls/"+tc.id+"?wait=250ms", agent)
				if status != http.StatusOK || json.Unmarshal([]byte(body), &pending) != nil {
					t.Fatalf("await: %d %s", status, body)
				}
			}
			agentWant := "the tool registry has no tool demo__nope: even approved, this call cannot run, it would end failed (unknown_tool)"
			if got := pending.UnknownTool; (got != nil) != tc.warned || got != nil && (got.Message != agentWant || got.ServerTools != nil) {
				t.Errorf("the agent's pending answer has unknown_tool %+v, want it only for demo__nope, saying %q without the registry's tools", got, agentWant)
			}

			// The reviewers' record.
			status, body := bearerGet(t, dev.HTTPURL+"/api/v1/approvals/bot/"+tc.id, admin)
			var got struct {
				Record struct {
					Call struct {
						CallID string `json:"call_id"`
					} `json:"call"`
				} `json:"record"`
				UnknownTool *unknownTool `json:"unknown_tool"`
			}
			if status != http.StatusOK || json.Unmarshal([]byte(body), &got) != nil || got.Record.Call.CallID != tc.id {
				t.Fatalf("get the record: %d %s", status, body)
			}
			if u := got.UnknownTool; (u != nil) != tc.warned || u != nil && (u.Tool != "demo__nope" ||
				strings.Join(u.ServerTools, ",") != "echo,read_file,write_file" ||
				!strings.Contains(u.Message, "the tool registry has no tool demo__nope (server demo has echo, read_file, write_file): even approved, this call cannot run")) {
				t.Errorf("the reviewers' record has unknown_tool %+v, want it only for demo__nope, with the server's tools", u)
			}

			// The reviewer's CLI.
			out, err := exec.Command(airlockBinary(t), "approvals", "show", "bot/"+tc.id, "--api", dev.HTTPURL, "--token-file", filepath.Join(dev.DataDir, "admin.token")).CombinedOutput()
			cliWant := "warning   the tool registry has no tool demo__nope (server demo has echo, read_file, write_file): even approved, this call cannot run, it would end failed (unknown_tool); reject or cancel it, or add the tool to executor.tools_file first"
			if err != nil || strings.Contains(string(out), "warning ") != tc.warned || tc.warned && !strings.Contains(string(out), cliWant) {
				t.Errorf("airlock approvals show (%v) warns %v, want %v, saying %q:\n%s", err, strings.Contains(string(out), "warning "), tc.warned, cliWant, out)
			}

			// The call page: a warning saying what to do, the approve button kept.
			status, page := bearerGet(t, dev.HTTPURL+"/calls/bot/"+tc.id, admin)
			if status != http.StatusOK || !strings.Contains(page, `id="confirm-approve"`) {
				t.Fatalf("the call page: %d, with no approve button:\n%s", status, page)
			}
			warned := strings.Contains(page, `id="unknown-tool"`)
			if warned != tc.warned {
				t.Errorf("the call page warns that the call cannot run: %v, want %v", warned, tc.warned)
			}
			for _, want := range []string{"even approved, this call cannot run", "<code>demo__nope</code>", "(server <code>demo</code> has <code>echo</code>, <code>read_file</code>, <code>write_file</code>)", "reject or cancel it", "<code>executor.tools_file</code>", `id="approve-unknown-tool"`} {
				if tc.warned && !strings.Contains(page, want) {
					t.Errorf("the call page's warning does not say %q", want)
				}
			}

			// The inbox row.
			status, inbox := bearerGet(t, dev.HTTPURL+"/", admin)
			start := strings.Index(inbox, `<tr id="call-3-bot-`+tc.id+`"`)
			if status != http.StatusOK || start < 0 {
				t.Fatalf("the inbox (%d) has no row of call %s", status, tc.id)
			}
			row := inbox[start:]
			row = row[:strings.Index(row, "</tr>")]
			if warned := strings.Contains(row, "Cannot run even approved") && strings.Contains(row, "executor.tools_file"); warned != tc.warned {
				t.Errorf("the inbox row warns that the call cannot run: %v, want %v:\n%s", warned, tc.warned, row)
			}
		})
	}
}
