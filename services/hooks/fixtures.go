package hooks

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// The recorded hook payloads of each agent (testdata/<agent>/<event>[-<tool>].json),
// built from the agents' documented formats. The tests replay them;
// `airlock hook test` sends one as a sample.
//
//go:embed testdata
var fixtures embed.FS

// Fixture returns agent's recorded payload name (the file name without
// .json, e.g. "PreToolUse-Bash").
func Fixture(agent Agent, name string) ([]byte, error) {
	b, err := fs.ReadFile(fixtures, path.Join("testdata", string(agent), name+".json"))
	if err != nil {
		return nil, fmt.Errorf("no recorded %s payload %q: `airlock hook test %s --list` shows them", agent, name, agent)
	}
	return b, nil
}

// FixtureNames lists agent's recorded payloads, sorted.
func FixtureNames(agent Agent) []string {
	entries, _ := fs.ReadDir(fixtures, path.Join("testdata", string(agent)))
	var out []string
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".json"))
	}
	slices.Sort(out)
	return out
}

// SampleName is the payload `airlock hook test` sends by default: the
// agent's pre-tool shell command `git status`.
func SampleName(agent Agent) string {
	return map[Agent]string{
		Claude: "PreToolUse-Bash", Codex: "PreToolUse-Bash", Gemini: "BeforeTool-run_shell_command",
		Cursor: "beforeShellExecution", Copilot: "preToolUse-bash",
	}[agent]
}
