package hooks

import (
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
)

// ---------------------------------------------------------------- payload helpers

func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// object reads an object field, or a string field holding a JSON object
// (Cursor's tool_input, Copilot's toolArgs); nil when absent.
func object(m map[string]any, key string) (map[string]any, error) {
	switch v := m[key].(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return v, nil
	case string:
		if strings.TrimSpace(v) == "" {
			return nil, nil
		}
		var o map[string]any
		if err := json.Unmarshal([]byte(v), &o); err != nil {
			return nil, fmt.Errorf("%s is a string that is not a JSON object: %v", key, err)
		}
		return o, nil
	}
	return nil, fmt.Errorf("%s must be an object", key)
}

// raw is a field as JSON (nil when absent).
func raw(m map[string]any, key string) json.RawMessage {
	v, ok := m[key]
	if !ok || v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

var nameChars = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,120}$`)

// safeName keeps a tool or server name airlock accepts as it is; anything
// else is replaced by a readable form plus a digest, so it can never pass
// for another tool's name.
func safeName(s string) string {
	if nameChars.MatchString(s) && !strings.Contains(s, "__") {
		return s
	}
	clean := strings.Map(func(r rune) rune {
		if r < 128 && (r == '.' || r == ':' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return r
		}
		return '_'
	}, s)
	clean = strings.ReplaceAll(clean, "__", "_")
	if len(clean) > 60 {
		clean = clean[:60]
	}
	return clean + "-" + MapID("\x00"+s, 13)[1:]
}

// toolOf names an agent's tool for airlock: an MCP tool
// (mcp__<server>__<tool>, or a tool whose MCP server the payload names) is
// <server>__<tool> of its own server; a built-in tool is <agent>__<tool>.
func toolOf(agent Agent, name, mcpServer string) (server, tool string) {
	if rest, ok := strings.CutPrefix(name, "mcp__"); ok {
		if srv, t, ok := strings.Cut(rest, "__"); ok && srv != "" && t != "" {
			return mcpServerName(srv), safeName(t)
		}
	}
	if mcpServer != "" {
		return mcpServerName(mcpServer), safeName(name)
	}
	if name == "" {
		return "", ""
	}
	return string(agent), safeName(name)
}

// mcpServerName is the airlock server of an MCP server's tools: its own
// name, except that a server named like a coding agent ("claude", "Gemini",
// whatever a cloned repository's .mcp.json says) is "mcp-<name>", so its
// tools are never decided or shown as that agent's built-in tools
// (mcp__claude__Read is not claude__Read).
func mcpServerName(name string) string {
	n := safeName(name)
	for _, a := range Agents {
		if strings.EqualFold(n, string(a)) {
			return "mcp-" + n
		}
	}
	return n
}

// setTool reads the tool's name (nameKey) and arguments (argsKey) of a
// payload into ev; mcpServer names the tool's MCP server when the payload
// does (Gemini CLI's mcp_context, Cursor's url).
func (ev *Event) setTool(agent Agent, m map[string]any, nameKey, argsKey, mcpServer string) error {
	args, err := object(m, argsKey)
	if err != nil {
		return err
	}
	ev.Args, ev.AgentTool = args, str(m, nameKey)
	ev.Server, ev.Tool = toolOf(agent, ev.AgentTool, mcpServer)
	return nil
}

// ---------------------------------------------------------------- Claude Code and Codex CLI

// Claude Code and Codex CLI share a payload: session_id, cwd,
// hook_event_name, tool_name, tool_input, tool_use_id, and tool_response
// after the tool ran.
func parseClaude(agent Agent) func(map[string]any, string) (Event, error) {
	return func(m map[string]any, event string) (Event, error) {
		if event == "" {
			event = str(m, "hook_event_name")
		}
		ev := Event{Name: event, Session: str(m, "session_id"), ToolUseID: str(m, "tool_use_id"), Cwd: str(m, "cwd")}
		switch event {
		case "PreToolUse":
			ev.Kind = Pre
		case "PermissionRequest":
			ev.Kind = Permission
		case "PostToolUse", "PostToolUseFailure":
			ev.Kind = Post
			ev.Failed = event == "PostToolUseFailure"
			ev.Result = raw(m, "tool_response")
			ev.Error = str(m, "error")
		case "":
			return Event{}, fmt.Errorf("the %s hook payload names no hook_event_name: pass --event", agent)
		default:
			return ev, nil // SessionStart, Stop, ...: nothing to do
		}
		if err := ev.setTool(agent, m, "tool_name", "tool_input", ""); err != nil {
			return Event{}, err
		}
		ev.Reason = str(ev.Args, "description")
		if r, ok := m["tool_response"].(map[string]any); ok && ev.Kind == Post {
			if e, _ := r["is_error"].(bool); e {
				ev.Failed = true
			}
		}
		return ev, nil
	}
}

// hookOutput is Claude Code's and Codex's hookSpecificOutput envelope.
func hookOutput(event string, fields map[string]any) map[string]any {
	fields["hookEventName"] = event
	return map[string]any{"hookSpecificOutput": fields}
}

// respondClaude: PreToolUse answers permissionDecision allow | deny | ask;
// PermissionRequest answers as permissionAnswer says. Exit 2 blocks; exit 1
// would let the call through.
func respondClaude(ev Event, v Verdict) Output {
	if ev.Kind == Permission {
		return permissionAnswer(v)
	}
	fields := map[string]any{"permissionDecision": v.Action.String(), "permissionDecisionReason": v.Reason}
	if v.Action == Deny {
		return denyOutput(hookOutput("PreToolUse", fields), v.Reason)
	}
	return Output{Stdout: mustJSON(hookOutput("PreToolUse", fields))}
}

// permissionAnswer is Claude Code's and Codex's answer to PermissionRequest:
// decision.behavior allow | deny, and nothing at all for ask (the agent then
// asks its user with its own dialog).
func permissionAnswer(v Verdict) Output {
	switch v.Action {
	case Allow:
		return Output{Stdout: mustJSON(hookOutput("PermissionRequest", map[string]any{"decision": map[string]any{"behavior": "allow"}}))}
	case Ask:
		return Output{}
	}
	return denyOutput(hookOutput("PermissionRequest", map[string]any{"decision": map[string]any{"behavior": "deny", "message": v.Reason}}), v.Reason)
}

// respondCodex: Codex's PreToolUse honours only a deny (anything else
// proceeds to Codex's own approval), so an allow answers nothing and an
// ask cannot be expressed: it is a deny. PermissionRequest answers
// decision.behavior allow | deny.
func respondCodex(ev Event, v Verdict) Output {
	if ev.Kind == Permission {
		return permissionAnswer(v)
	}
	if v.Action == Allow {
		return Output{}
	}
	v = askIsDeny(ev, v)
	return denyOutput(hookOutput("PreToolUse", map[string]any{"permissionDecision": "deny", "permissionDecisionReason": v.Reason}), v.Reason)
}

// askIsDeny turns an ask the agent cannot show into a deny that says so.
func askIsDeny(ev Event, v Verdict) Verdict {
	if v.Action != Ask {
		return v
	}
	return Verdict{Action: Deny, Reason: v.Reason + fmt.Sprintf(" (%s cannot ask its user from this hook, so airlock denies it: decide it in airlock instead)", ev.Agent)}
}

// ---------------------------------------------------------------- Gemini CLI

// parseGemini reads BeforeTool and AfterTool: session_id, cwd,
// hook_event_name, tool_name, tool_input, mcp_context, and tool_response
// ({llmContent, returnDisplay, error}) after the tool ran.
func parseGemini(m map[string]any, event string) (Event, error) {
	if event == "" {
		event = str(m, "hook_event_name")
	}
	ev := Event{Name: event, Session: str(m, "session_id"), Cwd: str(m, "cwd")}
	switch event {
	case "BeforeTool":
		ev.Kind = Pre
	case "AfterTool":
		ev.Kind = Post
		ev.Result = raw(m, "tool_response")
		if r, ok := m["tool_response"].(map[string]any); ok && r["error"] != nil && r["error"] != "" {
			ev.Failed = true
			ev.Error = fmt.Sprint(r["error"])
			if e, ok := r["error"].(map[string]any); ok {
				ev.Error = str(e, "message")
			}
		}
	case "":
		return Event{}, fmt.Errorf("the gemini hook payload names no hook_event_name: pass --event")
	default:
		return ev, nil
	}
	var mcpServer string
	if mc, ok := m["mcp_context"].(map[string]any); ok {
		mcpServer = str(mc, "server_name")
	}
	if err := ev.setTool(Gemini, m, "tool_name", "tool_input", mcpServer); err != nil {
		return Event{}, err
	}
	return ev, nil
}

// respondGemini: {"decision":"allow"} or {"decision":"deny","reason":...}
// with exit 2 (its blocking status, stderr as the reason). Gemini CLI
// cannot ask from a hook.
func respondGemini(ev Event, v Verdict) Output {
	v = askIsDeny(ev, v)
	if v.Action == Allow {
		return Output{Stdout: mustJSON(map[string]any{"decision": "allow"})}
	}
	return denyOutput(map[string]any{"decision": "deny", "reason": v.Reason}, v.Reason)
}

// ---------------------------------------------------------------- Cursor

// parseCursor reads beforeShellExecution ({command, cwd}),
// beforeMCPExecution ({tool_name, tool_input, url | command}) and their
// after* counterparts ({command, output} and {tool_name, tool_input,
// result_json}), and beforeReadFile ({file_path, content}: the call is
// cursor__Read of the path; the file's content is not sent to airlock);
// conversation_id is the session. The MCP server is named by the url's
// host or the command's package (Cursor does not name it). Cursor has no
// hook before an edit, so its edits cannot be gated.
func parseCursor(m map[string]any, event string) (Event, error) {
	if event == "" {
		event = str(m, "hook_event_name")
	}
	ev := Event{Name: event, Session: str(m, "conversation_id"), Cwd: str(m, "cwd")}
	switch event {
	case "beforeShellExecution", "afterShellExecution":
		ev.Kind = Pre
		if event == "afterShellExecution" {
			ev.Kind = Post
			ev.Result = mustRaw(map[string]any{"output": m["output"]})
		}
		args := map[string]any{"command": str(m, "command")}
		if ev.Cwd != "" {
			args["cwd"] = ev.Cwd
		}
		ev.Args, ev.Server, ev.Tool = args, string(Cursor), "Shell"
		return ev, nil
	case "beforeReadFile":
		file := str(m, "file_path")
		if file == "" {
			return Event{}, fmt.Errorf("the cursor beforeReadFile payload names no file_path")
		}
		ev.Kind, ev.Args, ev.Server, ev.Tool = Pre, map[string]any{"file_path": file}, string(Cursor), "Read"
		return ev, nil
	case "beforeMCPExecution", "afterMCPExecution":
		ev.Kind = Pre
		if event == "afterMCPExecution" {
			ev.Kind = Post
			ev.Result = cursorResult(m)
		}
		if err := ev.setTool(Cursor, m, "tool_name", "tool_input", cursorServer(m)); err != nil {
			return Event{}, err
		}
		return ev, nil
	case "":
		return Event{}, fmt.Errorf("the cursor hook payload names no hook_event_name: pass --event")
	}
	return ev, nil
}

func mustRaw(v any) json.RawMessage { return json.RawMessage(mustJSON(v)) }

// cursorResult is afterMCPExecution's result_json, kept as JSON when it is.
func cursorResult(m map[string]any) json.RawMessage {
	if s := str(m, "result_json"); s != "" {
		if json.Valid([]byte(s)) {
			return json.RawMessage(s)
		}
		return mustRaw(s)
	}
	return raw(m, "result_json")
}

// cursorServer names the MCP server of a Cursor payload: the url's host,
// else the package or script its command starts, else "mcp".
func cursorServer(m map[string]any) string {
	if u, err := url.Parse(str(m, "url")); err == nil && u.Hostname() != "" {
		return u.Hostname()
	}
	fields := strings.Fields(str(m, "command"))
	for i := len(fields) - 1; i >= 0; i-- {
		f := fields[i]
		if strings.HasPrefix(f, "-") {
			continue
		}
		if strings.ContainsAny(f, "/@") || strings.HasSuffix(f, ".js") || strings.HasSuffix(f, ".py") {
			base := path.Base(strings.TrimSuffix(strings.TrimSuffix(f, ".js"), ".py"))
			if at := strings.LastIndex(base, "@"); at > 0 {
				base = base[:at]
			}
			return base
		}
	}
	if len(fields) > 0 {
		return path.Base(fields[0])
	}
	return "mcp"
}

// respondCursor: {"permission": "allow"|"deny"|"ask", "user_message",
// "agent_message"}; a deny also exits 2. beforeReadFile answers only allow
// or deny, so an ask is a deny there.
func respondCursor(ev Event, v Verdict) Output {
	if ev.Name == "beforeReadFile" {
		v = askIsDeny(ev, v)
	}
	out := map[string]any{"permission": v.Action.String(), "user_message": v.Reason, "agent_message": v.Reason}
	if v.Action == Deny {
		return denyOutput(out, v.Reason)
	}
	return Output{Stdout: mustJSON(out)}
}

// ---------------------------------------------------------------- GitHub Copilot CLI

// parseCopilot reads preToolUse and postToolUse ({timestamp, cwd, toolName,
// toolArgs, toolResult: {resultType, textResultForLlm}}). The payload does
// not name its event: it is postToolUse when it carries a toolResult, else
// preToolUse, unless the caller says (install passes --event).
func parseCopilot(m map[string]any, event string) (Event, error) {
	if event == "" {
		event = "preToolUse"
		if _, ok := m["toolResult"]; ok {
			event = "postToolUse"
		}
	}
	ev := Event{Name: event, Session: str(m, "sessionId"), Cwd: str(m, "cwd")}
	switch event {
	case "preToolUse":
		ev.Kind = Pre
	case "postToolUse":
		ev.Kind = Post
		if r, ok := m["toolResult"].(map[string]any); ok {
			ev.Result = raw(m, "toolResult")
			switch str(r, "resultType") {
			case "failure", "denied":
				ev.Failed, ev.Error = true, str(r, "resultType")+": "+str(r, "textResultForLlm")
			}
		}
	default:
		return ev, nil
	}
	if err := ev.setTool(Copilot, m, "toolName", "toolArgs", ""); err != nil {
		return Event{}, err
	}
	ev.Reason = str(ev.Args, "description")
	return ev, nil
}

// respondCopilot: {"permissionDecision": "allow"|"deny"|"ask",
// "permissionDecisionReason"}; a deny also exits 2.
func respondCopilot(ev Event, v Verdict) Output {
	out := map[string]any{"permissionDecision": v.Action.String(), "permissionDecisionReason": v.Reason}
	if v.Action == Deny {
		return denyOutput(out, v.Reason)
	}
	return Output{Stdout: mustJSON(out)}
}
