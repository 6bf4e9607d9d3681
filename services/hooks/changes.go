package hooks

import (
	"regexp"
	"slices"
	"strings"
)

// ReadOnlyShellRule is the coding profile's rule that allows a shell
// command as read-only (policies/data.json): a shell call it allowed
// changes nothing, so `airlock hook` saves nothing before it.
const ReadOnlyShellRule = "coding-shell-allow"

// Change is what a tool use may change on disk, as far as its arguments
// say: the files it names, or (a shell command) anything under its working
// directory.
type Change struct {
	// Paths are the files the tool names, as the agent wrote them (absolute,
	// or relative to the event's Cwd). Agent text: never trust them.
	Paths []string
	// Shell: a shell command, which may change anything it can reach.
	Shell bool
	// Command is the shell command line (Shell).
	Command string
}

// editTools are the agents' built-in tools that write files, each with the
// arguments that name them (the coding profile's rules coding-edit and
// coding-edit-secrets name the same tools; the latter reads these arguments,
// and apply_patch's header lines, for a secret's name).
var editTools = map[Agent]map[string][]string{
	Claude:  {"Edit": {"file_path"}, "MultiEdit": {"file_path"}, "Write": {"file_path"}, "NotebookEdit": {"notebook_path"}},
	Codex:   {"Edit": {"file_path"}, "Write": {"file_path"}, "apply_patch": nil},
	Gemini:  {"write_file": {"file_path"}, "replace": {"file_path"}},
	Cursor:  {"Write": {"file_path", "path"}, "Edit": {"file_path", "path"}, "Delete": {"file_path", "path"}},
	Copilot: {"create": {"path"}, "edit": {"path"}},
}

// shellTools are the agents' built-in shell tools (rules coding-shell-*).
var shellTools = map[Agent][]string{
	Claude: {"Bash"}, Codex: {"Bash", "shell"}, Gemini: {"run_shell_command"}, Cursor: {"Shell"}, Copilot: {"bash"},
}

// patchFile finds the files an apply_patch patch names (Codex trims a
// header line's blanks before reading it).
var patchFile = regexp.MustCompile(`(?m)^[ \t]*\*\*\* (?:Add File|Update File|Delete File|Move to): (.+)$`)

// Changes reports what the tool use may change; ok is false for a tool
// that changes no file airlock knows of (reads, MCP tools: their effects
// are the server's).
func (e Event) Changes() (Change, bool) {
	if e.Server != string(e.Agent) {
		return Change{}, false // an MCP server's tool
	}
	if slices.Contains(shellTools[e.Agent], e.Tool) {
		return Change{Shell: true, Command: commandOf(e.Args["command"])}, true
	}
	keys, ok := editTools[e.Agent][e.Tool]
	if !ok {
		return Change{}, false
	}
	var c Change
	for _, k := range keys {
		if p, _ := e.Args[k].(string); p != "" {
			c.Paths = append(c.Paths, p)
		}
	}
	if keys == nil { // apply_patch: the files its patch names
		for _, v := range e.Args {
			if s, ok := v.(string); ok {
				for _, m := range patchFile.FindAllStringSubmatch(s, -1) {
					c.Paths = append(c.Paths, strings.TrimSpace(m[1]))
				}
			}
		}
	}
	return c, true
}

// commandOf is a shell tool's command as one line: Codex passes an argv.
func commandOf(v any) string {
	switch c := v.(type) {
	case string:
		return c
	case []any:
		words := make([]string, 0, len(c))
		for _, w := range c {
			if s, ok := w.(string); ok {
				words = append(words, s)
			}
		}
		return strings.Join(words, " ")
	}
	return ""
}
