package hooks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Scope is where `airlock hook install` writes an agent's hook
// configuration: the project's (this checkout) or the user's (every
// project of this user).
type Scope int

const (
	Project Scope = iota
	User
)

// ConfigFile is the file agent reads its hooks from for scope: under
// project (Project) or home (User). For Claude Code the project file is
// .claude/settings.local.json, which is not committed: the hook names this
// machine's airlock binary and credential.
func ConfigFile(agent Agent, scope Scope, home, project string) (string, error) {
	base := project
	if scope == User {
		base = home
	}
	switch agent {
	case Claude:
		if scope == Project {
			return filepath.Join(base, ".claude", "settings.local.json"), nil
		}
		return filepath.Join(base, ".claude", "settings.json"), nil
	case Codex:
		return filepath.Join(base, ".codex", "hooks.json"), nil
	case Gemini:
		return filepath.Join(base, ".gemini", "settings.json"), nil
	case Cursor:
		return filepath.Join(base, ".cursor", "hooks.json"), nil
	case Copilot:
		if scope == User {
			return "", fmt.Errorf("GitHub Copilot CLI reads hooks only from a repository's .github/hooks: install with --project in each repository")
		}
		return filepath.Join(base, ".github", "hooks", "airlock.json"), nil
	}
	return "", fmt.Errorf("unknown coding agent %q", agent)
}

// InstallOptions say what the installed hooks run.
type InstallOptions struct {
	// Command runs `airlock hook <agent>` with its flags, quoted for a
	// shell (see ShellQuote); Merge adds --event where the agent's payload
	// does not name its event.
	Command string
	// Timeout is the agent's own limit on the hook: it must exceed the
	// hook's --wait, or the agent kills a hook that is still waiting (and
	// several agents then let the call through).
	Timeout time.Duration
}

// events are the hook events airlock installs for an agent: its pre-tool
// and post-tool events.
var events = map[Agent][]string{
	Claude:  {"PreToolUse", "PostToolUse"},
	Codex:   {"PreToolUse", "PostToolUse"},
	Gemini:  {"BeforeTool", "AfterTool"},
	Cursor:  {"beforeShellExecution", "beforeMCPExecution", "beforeReadFile", "afterShellExecution", "afterMCPExecution"},
	Copilot: {"preToolUse", "postToolUse"},
}

// Events lists the hook events Merge installs for agent.
func Events(agent Agent) []string { return slices.Clone(events[agent]) }

// Merge returns the agent's hook configuration existing (empty for none)
// with airlock's hooks for every event of Events(agent): an earlier
// airlock hook of the same agent is replaced, every other setting and hook
// is kept. existing must be a JSON object.
func Merge(agent Agent, existing []byte, opt InstallOptions) ([]byte, error) {
	cfg := map[string]any{}
	if len(bytes.TrimSpace(existing)) > 0 {
		if err := json.Unmarshal(existing, &cfg); err != nil || cfg == nil {
			return nil, fmt.Errorf("the existing %s hook configuration is not a JSON object (%v): fix or move it, then install again", agent, errOr(err, "it is null"))
		}
	}
	hooksObj, ok := cfg["hooks"].(map[string]any)
	if cfg["hooks"] != nil && !ok {
		return nil, fmt.Errorf("the existing %s configuration's \"hooks\" is not an object: fix it, then install again", agent)
	}
	if hooksObj == nil {
		hooksObj = map[string]any{}
	}
	secs := int(max(opt.Timeout, time.Second) / time.Second)
	for _, event := range events[agent] {
		list, _ := hooksObj[event].([]any)
		if hooksObj[event] != nil && list == nil {
			return nil, fmt.Errorf("the existing %s configuration's hooks.%s is not a list: fix it, then install again", agent, event)
		}
		list = withoutOurs(agent, list)
		switch agent {
		case Claude, Codex:
			list = append(list, map[string]any{"hooks": []any{map[string]any{"type": "command", "command": opt.Command, "timeout": secs}}})
		case Gemini:
			list = append(list, map[string]any{"hooks": []any{map[string]any{"type": "command", "name": "airlock", "command": opt.Command, "timeout": secs * 1000}}})
		case Cursor:
			list = append(list, map[string]any{"command": opt.Command, "failClosed": true})
		case Copilot:
			list = append(list, map[string]any{"type": "command", "bash": opt.Command + " --event " + event, "timeoutSec": secs})
		}
		hooksObj[event] = list
	}
	cfg["hooks"] = hooksObj
	if agent == Cursor || agent == Copilot {
		if _, ok := cfg["version"]; !ok {
			cfg["version"] = 1
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(cfg); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// withoutOurs drops airlock's own earlier hooks of agent from an event's
// list: a whole entry (Cursor, Copilot) or a handler inside a matcher group
// (Claude Code, Codex, Gemini CLI), the group too once it is empty.
func withoutOurs(agent Agent, list []any) []any {
	var out []any
	for _, e := range list {
		entry, ok := e.(map[string]any)
		if !ok {
			out = append(out, e)
			continue
		}
		if isOurs(agent, entry) {
			continue
		}
		if inner, ok := entry["hooks"].([]any); ok {
			var keep []any
			for _, h := range inner {
				if hm, ok := h.(map[string]any); ok && isOurs(agent, hm) {
					continue
				}
				keep = append(keep, h)
			}
			if len(keep) == 0 {
				continue
			}
			entry["hooks"] = keep
		}
		out = append(out, entry)
	}
	return out
}

// isOurs recognises a hook `airlock hook install` wrote: its command runs
// an airlock binary's `hook <agent>`.
func isOurs(agent Agent, h map[string]any) bool {
	for _, key := range []string{"command", "bash"} {
		c, _ := h[key].(string)
		if strings.Contains(c, "airlock") && strings.Contains(c, " hook "+string(agent)) {
			return true
		}
	}
	return false
}

// ShellQuote quotes each word for a POSIX shell and joins them.
func ShellQuote(words ...string) string {
	q := make([]string, len(words))
	for i, w := range words {
		if w != "" && strings.IndexFunc(w, func(r rune) bool {
			return !(r == '/' || r == '.' || r == '-' || r == '_' || r == '=' || r == ':' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
		}) < 0 {
			q[i] = w
			continue
		}
		q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
