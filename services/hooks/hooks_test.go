package hooks

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func mustFixture(t *testing.T, agent Agent, name string) []byte {
	t.Helper()
	b, err := Fixture(agent, name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEachAgentsRecordedPayloadBecomesTheCallAirlockDecides(t *testing.T) {
	for _, tt := range []struct {
		name         string
		agent        Agent
		fixture      string
		kind         Kind
		tool         string
		command      string
		callID       string // "" when the agent gives the tool use no id
		thread       string
		failed       bool
		resultSubstr string
	}{
		{"claude_pre_tool_use_of_bash", Claude, "PreToolUse-Bash", Pre, "claude__Bash", "git status", "toolu_01ABC123def456GHI789jkl", "9f2c1d7e-5b8a-4c3e-a1f0-2d6b7e8c9a01", false, ""},
		{"claude_pre_tool_use_of_an_edit", Claude, "PreToolUse-Edit", Pre, "claude__Edit", "", "toolu_01EDIT0001cartGo", "9f2c1d7e-5b8a-4c3e-a1f0-2d6b7e8c9a01", false, ""},
		{"claude_mcp_tool_is_its_own_servers", Claude, "PreToolUse-mcp", Pre, "github__create_issue", "", "toolu_01MCP0000github", "9f2c1d7e-5b8a-4c3e-a1f0-2d6b7e8c9a01", false, ""},
		{"claude_permission_request", Claude, "PermissionRequest-Bash", Permission, "claude__Bash", "npm install left-pad", "", "9f2c1d7e-5b8a-4c3e-a1f0-2d6b7e8c9a01", false, ""},
		{"claude_post_tool_use_carries_the_result", Claude, "PostToolUse-Bash", Post, "claude__Bash", "git status", "toolu_01ABC123def456GHI789jkl", "9f2c1d7e-5b8a-4c3e-a1f0-2d6b7e8c9a01", false, "working tree clean"},
		{"codex_pre_tool_use", Codex, "PreToolUse-Bash", Pre, "codex__Bash", "git status", "call_7Qx2RkP9mZ", "0199a2b3-c4d5-7e6f-8a9b-0c1d2e3f4a5b", false, ""},
		{"codex_permission_request", Codex, "PermissionRequest-Bash", Permission, "codex__Bash", "npm install left-pad", "", "0199a2b3-c4d5-7e6f-8a9b-0c1d2e3f4a5b", false, ""},
		{"codex_post_tool_use", Codex, "PostToolUse-Bash", Post, "codex__Bash", "git status", "call_7Qx2RkP9mZ", "0199a2b3-c4d5-7e6f-8a9b-0c1d2e3f4a5b", false, "exit_code"},
		{"gemini_before_tool", Gemini, "BeforeTool-run_shell_command", Pre, "gemini__run_shell_command", "git status", "", "c0ffee00-1234-4abc-9def-5678aabbccdd", false, ""},
		{"gemini_mcp_tool_names_its_server_in_mcp_context", Gemini, "BeforeTool-mcp", Pre, "github__create_issue", "", "", "c0ffee00-1234-4abc-9def-5678aabbccdd", false, ""},
		{"gemini_after_tool", Gemini, "AfterTool-run_shell_command", Post, "gemini__run_shell_command", "git status", "", "c0ffee00-1234-4abc-9def-5678aabbccdd", false, "llmContent"},
		{"cursor_before_shell_execution", Cursor, "beforeShellExecution", Pre, "cursor__Shell", "git status", "", "8c1f2a3b-4d5e-4f60-9a7b-8c9d0e1f2a3b", false, ""},
		{"cursor_before_mcp_execution_names_the_server_by_its_url", Cursor, "beforeMCPExecution", Pre, "api.githubcopilot.com__create_issue", "", "", "8c1f2a3b-4d5e-4f60-9a7b-8c9d0e1f2a3b", false, ""},
		{"cursor_before_read_file_gates_the_path", Cursor, "beforeReadFile", Pre, "cursor__Read", "", "", "8c1f2a3b-4d5e-4f60-9a7b-8c9d0e1f2a3b", false, ""},
		{"cursor_after_shell_execution", Cursor, "afterShellExecution", Post, "cursor__Shell", "git status", "", "8c1f2a3b-4d5e-4f60-9a7b-8c9d0e1f2a3b", false, "working tree clean"},
		{"cursor_after_mcp_execution", Cursor, "afterMCPExecution", Post, "create_issue", "", "", "8c1f2a3b-4d5e-4f60-9a7b-8c9d0e1f2a3b", false, "issues/42"},
		{"copilot_pre_tool_use_with_string_arguments", Copilot, "preToolUse-bash", Pre, "copilot__bash", "git status", "", "", false, ""},
		{"copilot_post_tool_use_is_recognised_by_its_result", Copilot, "postToolUse-bash", Post, "copilot__bash", "git status", "", "", false, "working tree clean"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := Parse(tt.agent, "", mustFixture(t, tt.agent, tt.fixture))
			if err != nil {
				t.Fatal(err)
			}
			if ev.Kind != tt.kind || !strings.HasSuffix(ev.QualifiedTool(), tt.tool) || ev.Thread() != tt.thread || ev.Failed != tt.failed {
				t.Fatalf("event %+v: kind %v tool %s thread %q", ev, ev.Kind, ev.QualifiedTool(), ev.Thread())
			}
			if tt.command != "" && ev.Args["command"] != tt.command {
				t.Fatalf("command %v, want %q", ev.Args["command"], tt.command)
			}
			id, ok := ev.CallID()
			if id != tt.callID || ok != (tt.callID != "") {
				t.Fatalf("call id %q %v, want %q", id, ok, tt.callID)
			}
			if !strings.Contains(string(ev.Result), tt.resultSubstr) {
				t.Fatalf("result %s lacks %q", ev.Result, tt.resultSubstr)
			}
		})
	}
}

func TestTheSameToolUseHasTheSameKeyInItsPreAndPostHooks(t *testing.T) {
	for _, tt := range []struct {
		agent     Agent
		pre, post string
	}{
		{Cursor, "beforeShellExecution", "afterShellExecution"},
		{Cursor, "beforeMCPExecution", "afterMCPExecution"},
		{Gemini, "BeforeTool-run_shell_command", "AfterTool-run_shell_command"},
		{Copilot, "preToolUse-bash", "postToolUse-bash"},
	} {
		t.Run(string(tt.agent)+"_"+tt.pre, func(t *testing.T) {
			pre, err := Parse(tt.agent, "", mustFixture(t, tt.agent, tt.pre))
			if err != nil {
				t.Fatal(err)
			}
			post, err := Parse(tt.agent, "", mustFixture(t, tt.agent, tt.post))
			if err != nil {
				t.Fatal(err)
			}
			if pre.StateKey() != post.StateKey() {
				t.Fatalf("pre key %s, post key %s", pre.StateKey(), post.StateKey())
			}
			other := pre
			other.Args = map[string]any{"command": "git push"}
			if other.StateKey() == pre.StateKey() {
				t.Fatal("another command has the same key")
			}
		})
	}
}

// out decodes a hook's stdout.
func out(t *testing.T, o Output) map[string]any {
	t.Helper()
	if len(o.Stdout) == 0 {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(o.Stdout, &m); err != nil {
		t.Fatalf("stdout %q is not JSON: %v", o.Stdout, err)
	}
	return m
}

func get(m map[string]any, path ...string) any {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}

func TestEachAgentGetsTheVerdictInItsOwnFormat(t *testing.T) {
	type check struct {
		path []string
		want any
	}
	for _, tt := range []struct {
		name    string
		agent   Agent
		fixture string
		v       Verdict
		exit    int
		checks  []check
		stderr  bool
	}{
		{"claude_allow", Claude, "PreToolUse-Bash", Verdict{Action: Allow, Reason: "read-only"}, 0,
			[]check{{[]string{"hookSpecificOutput", "hookEventName"}, "PreToolUse"}, {[]string{"hookSpecificOutput", "permissionDecision"}, "allow"}}, false},
		{"claude_deny_blocks_with_exit_2_and_the_reason", Claude, "PreToolUse-Bash", Verdict{Action: Deny, Reason: "rm -rf is never run"}, 2,
			[]check{{[]string{"hookSpecificOutput", "permissionDecision"}, "deny"}, {[]string{"hookSpecificOutput", "permissionDecisionReason"}, "rm -rf is never run"}}, true},
		{"claude_ask", Claude, "PreToolUse-Bash", Verdict{Action: Ask, Reason: "confirm it"}, 0,
			[]check{{[]string{"hookSpecificOutput", "permissionDecision"}, "ask"}}, false},
		{"claude_permission_request_allow", Claude, "PermissionRequest-Bash", Verdict{Action: Allow}, 0,
			[]check{{[]string{"hookSpecificOutput", "hookEventName"}, "PermissionRequest"}, {[]string{"hookSpecificOutput", "decision", "behavior"}, "allow"}}, false},
		{"claude_permission_request_deny", Claude, "PermissionRequest-Bash", Verdict{Action: Deny, Reason: "no"}, 2,
			[]check{{[]string{"hookSpecificOutput", "decision", "behavior"}, "deny"}, {[]string{"hookSpecificOutput", "decision", "message"}, "no"}}, true},
		{"claude_permission_request_ask_leaves_it_to_the_dialog", Claude, "PermissionRequest-Bash", Verdict{Action: Ask}, 0, nil, false},
		{"codex_allow_says_nothing", Codex, "PreToolUse-Bash", Verdict{Action: Allow}, 0, nil, false},
		{"codex_deny", Codex, "PreToolUse-Bash", Verdict{Action: Deny, Reason: "no"}, 2,
			[]check{{[]string{"hookSpecificOutput", "permissionDecision"}, "deny"}, {[]string{"hookSpecificOutput", "permissionDecisionReason"}, "no"}}, true},
		{"codex_cannot_ask_from_pre_tool_use_so_it_is_denied", Codex, "PreToolUse-Bash", Verdict{Action: Ask, Reason: "confirm"}, 2,
			[]check{{[]string{"hookSpecificOutput", "permissionDecision"}, "deny"}}, true},
		{"codex_permission_request_allow", Codex, "PermissionRequest-Bash", Verdict{Action: Allow}, 0,
			[]check{{[]string{"hookSpecificOutput", "decision", "behavior"}, "allow"}}, false},
		{"gemini_allow", Gemini, "BeforeTool-run_shell_command", Verdict{Action: Allow}, 0,
			[]check{{[]string{"decision"}, "allow"}}, false},
		{"gemini_deny", Gemini, "BeforeTool-run_shell_command", Verdict{Action: Deny, Reason: "no"}, 2,
			[]check{{[]string{"decision"}, "deny"}, {[]string{"reason"}, "no"}}, true},
		{"gemini_cannot_ask_so_it_is_denied", Gemini, "BeforeTool-run_shell_command", Verdict{Action: Ask, Reason: "confirm"}, 2,
			[]check{{[]string{"decision"}, "deny"}}, true},
		{"cursor_allow", Cursor, "beforeShellExecution", Verdict{Action: Allow}, 0,
			[]check{{[]string{"permission"}, "allow"}}, false},
		{"cursor_deny_tells_user_and_agent", Cursor, "beforeShellExecution", Verdict{Action: Deny, Reason: "no"}, 2,
			[]check{{[]string{"permission"}, "deny"}, {[]string{"agent_message"}, "no"}, {[]string{"user_message"}, "no"}}, true},
		{"cursor_ask", Cursor, "beforeMCPExecution", Verdict{Action: Ask, Reason: "confirm"}, 0,
			[]check{{[]string{"permission"}, "ask"}}, false},
		{"cursor_before_read_file_cannot_ask_so_it_is_denied", Cursor, "beforeReadFile", Verdict{Action: Ask, Reason: "confirm"}, 2,
			[]check{{[]string{"permission"}, "deny"}}, true},
		{"copilot_allow", Copilot, "preToolUse-bash", Verdict{Action: Allow}, 0,
			[]check{{[]string{"permissionDecision"}, "allow"}}, false},
		{"copilot_deny", Copilot, "preToolUse-bash", Verdict{Action: Deny, Reason: "no"}, 2,
			[]check{{[]string{"permissionDecision"}, "deny"}, {[]string{"permissionDecisionReason"}, "no"}}, true},
		{"copilot_ask", Copilot, "preToolUse-bash", Verdict{Action: Ask, Reason: "confirm"}, 0,
			[]check{{[]string{"permissionDecision"}, "ask"}}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := Parse(tt.agent, "", mustFixture(t, tt.agent, tt.fixture))
			if err != nil {
				t.Fatal(err)
			}
			o := Respond(ev, tt.v)
			if o.Exit != tt.exit {
				t.Fatalf("exit %d, want %d (stdout %s)", o.Exit, tt.exit, o.Stdout)
			}
			m := out(t, o)
			for _, c := range tt.checks {
				if got := get(m, c.path...); !reflect.DeepEqual(got, c.want) {
					t.Fatalf("%s = %v, want %v (stdout %s)", strings.Join(c.path, "."), got, c.want, o.Stdout)
				}
			}
			if tt.checks == nil && len(o.Stdout) != 0 {
				t.Fatalf("stdout %s, want nothing", o.Stdout)
			}
			if tt.stderr != (o.Stderr != "") {
				t.Fatalf("stderr %q", o.Stderr)
			}
		})
	}
}

func TestAPayloadThatCannotBeReadIsDeniedWithTheBlockingStatus(t *testing.T) {
	for _, tt := range []struct {
		name    string
		agent   Agent
		payload string
	}{
		{"not_json", Claude, "{not json"},
		{"null", Gemini, "null"},
		{"a_tool_event_without_a_tool", Claude, `{"hook_event_name":"PreToolUse","tool_input":{}}`},
		{"arguments_that_are_not_an_object", Cursor, `{"hook_event_name":"beforeMCPExecution","tool_name":"x","tool_input":"[1,2]"}`},
		{"no_event_name", Codex, `{"tool_name":"Bash"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.agent, "", []byte(tt.payload))
			if err == nil {
				t.Fatal("parsed")
			}
			o := Fail(tt.agent, "", "airlock could not read the payload: "+err.Error())
			if o.Exit != 2 || !strings.Contains(o.Stderr, "could not read") {
				t.Fatalf("fail answer %+v", o)
			}
		})
	}
}

func TestOtherEventsAreLeftAlone(t *testing.T) {
	ev, err := Parse(Claude, "", []byte(`{"hook_event_name":"SessionStart","session_id":"s"}`))
	if err != nil || ev.Kind != Other {
		t.Fatalf("event %+v, %v", ev, err)
	}
	if o := Acknowledge(ev, ""); o.Exit != 0 || len(o.Stdout) != 0 {
		t.Fatalf("answer %+v", o)
	}
}

func TestIdsAgentsChooseAreMappedToAirlockIdsWithoutMerging(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"9f2c1d7e-5b8a-4c3e-a1f0-2d6b7e8c9a01", "9f2c1d7e-5b8a-4c3e-a1f0-2d6b7e8c9a01"},
		{"", ""},
	} {
		if got := MapID(tt.in, 128); got != tt.want {
			t.Errorf("MapID(%q) = %q", tt.in, got)
		}
	}
	a, b := MapID("session.1", 128), MapID("session/1", 128)
	if a == b || a == "session.1" || len(a) > 128 {
		t.Fatalf("MapID merged or kept invalid ids: %q %q", a, b)
	}
	long := strings.Repeat("x", 200)
	if got := MapID(long, 64); len(got) > 64 || got == MapID(long+"y", 64) {
		t.Fatalf("MapID of a long id: %q", got)
	}
}

func TestAToolNameAirlockCannotUseNeverPassesForAnother(t *testing.T) {
	_, tool := toolOf(Gemini, "read file", "")
	if tool == "read_file" {
		t.Fatal(`"read file" passed for read_file`)
	}
	srv, tool := toolOf(Claude, "mcp__my server__do__it", "")
	if strings.Contains(srv, "__") || strings.Contains(tool, "__") || srv == "" || tool == "" {
		t.Fatalf("server %q tool %q", srv, tool)
	}
}

// An MCP server the user (or a cloned repository's .mcp.json) named like a
// coding agent keeps its tools apart from that agent's built-in tools, in
// every agent's payload form.
func TestAnMCPServerNamedLikeAnAgentIsNotThatAgent(t *testing.T) {
	for _, tt := range []struct {
		name            string
		agent           Agent
		tool, mcpServer string
		want            string
	}{
		{"claude_mcp_tool_of_a_server_named_claude", Claude, "mcp__claude__Read", "", "mcp-claude__Read"},
		{"codex_mcp_tool_of_a_server_named_codex", Codex, "mcp__codex__Bash", "", "mcp-codex__Bash"},
		{"gemini_mcp_context_naming_gemini", Gemini, "read_file", "gemini", "mcp-gemini__read_file"},
		{"another_agents_name_in_any_case", Claude, "mcp__Cursor__Shell", "", "mcp-Cursor__Shell"},
		{"a_server_with_its_own_name_keeps_it", Claude, "mcp__github__create_issue", "", "github__create_issue"},
		{"the_agents_own_tool_is_its_own", Claude, "Read", "", "claude__Read"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, tool := toolOf(tt.agent, tt.tool, tt.mcpServer)
			if got := srv + "__" + tool; got != tt.want {
				t.Fatalf("%s of %s is %s, want %s", tt.tool, tt.agent, got, tt.want)
			}
		})
	}
}

func TestInstallMergesIntoAnExistingConfiguration(t *testing.T) {
	opt := InstallOptions{Command: "/usr/local/bin/airlock hook claude --creds /home/dev/.airlock/laptop.creds.json", Timeout: 330 * time.Second}
	existing := `{
  "model": "opus",
  "permissions": {"allow": ["Bash(npm test)"]},
  "hooks": {
    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "/home/dev/bin/lint-guard.sh"}]},
                   {"hooks": [{"type": "command", "command": "/old/airlock hook claude --creds /old.json"}]}],
    "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]
  }
}`
	merged, err := Merge(Claude, []byte(existing), opt)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(merged, &m); err != nil {
		t.Fatal(err)
	}
	if m["model"] != "opus" || get(m, "permissions", "allow") == nil || get(m, "hooks", "Stop") == nil {
		t.Fatalf("other settings were lost: %s", merged)
	}
	pre := get(m, "hooks", "PreToolUse").([]any)
	if len(pre) != 2 || !strings.Contains(string(merged), "lint-guard.sh") || strings.Contains(string(merged), "/old/airlock") {
		t.Fatalf("PreToolUse %s: want the user's hook kept and the old airlock hook replaced", merged)
	}
	ours := pre[1].(map[string]any)["hooks"].([]any)[0].(map[string]any)
	if ours["command"] != opt.Command || ours["timeout"] != float64(330) {
		t.Fatalf("airlock's hook %v", ours)
	}
	if get(m, "hooks", "PostToolUse") == nil {
		t.Fatal("no PostToolUse hook")
	}
	again, err := Merge(Claude, merged, opt)
	if err != nil || string(again) != string(merged) {
		t.Fatalf("installing twice changed the file:\n%s\n%s", merged, again)
	}
}

func TestInstallWritesEachAgentsOwnShape(t *testing.T) {
	opt := InstallOptions{Command: "airlock hook X --creds c.json", Timeout: 90 * time.Second}
	for _, tt := range []struct {
		agent Agent
		path  []string
		key   string
		want  any
	}{
		{Gemini, []string{"hooks", "BeforeTool"}, "timeout", float64(90000)},
		{Cursor, []string{"hooks", "beforeShellExecution"}, "failClosed", true},
		{Copilot, []string{"hooks", "preToolUse"}, "timeoutSec", float64(90)},
		{Codex, []string{"hooks", "PreToolUse"}, "timeout", float64(90)},
	} {
		t.Run(string(tt.agent), func(t *testing.T) {
			o := opt
			o.Command = strings.Replace(opt.Command, "X", string(tt.agent), 1)
			b, err := Merge(tt.agent, nil, o)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			_ = json.Unmarshal(b, &m)
			entry := get(m, tt.path...).([]any)[0].(map[string]any)
			if inner, ok := entry["hooks"].([]any); ok {
				entry = inner[0].(map[string]any)
			}
			if entry[tt.key] != tt.want {
				t.Fatalf("%s = %v, want %v in %s", tt.key, entry[tt.key], tt.want, b)
			}
			if tt.agent == Copilot && !strings.HasSuffix(entry["bash"].(string), "--event preToolUse") {
				t.Fatalf("copilot hook does not name its event: %v", entry)
			}
		})
	}
	if _, err := ConfigFile(Copilot, User, "/home/dev", "/repo"); err == nil {
		t.Fatal("copilot user scope accepted")
	}
	if _, err := Merge(Claude, []byte(`["not an object"]`), opt); err == nil {
		t.Fatal("merged into a configuration that is not an object")
	}
}

func TestShellQuoteKeepsPathsWithSpacesOneWord(t *testing.T) {
	if got := ShellQuote("/opt/air lock/airlock", "hook", "claude", "--creds", "/h/it's.json"); got != `'/opt/air lock/airlock' hook claude --creds '/h/it'\''s.json'` {
		t.Fatalf("got %s", got)
	}
}
