package hooks

import (
	"slices"
	"testing"
)

func TestChangesNamesWhatAToolUseMayChange(t *testing.T) {
	tests := []struct {
		name      string
		ev        Event
		ok, shell bool
		paths     []string
		command   string
	}{
		{"a_claude_edit_names_its_file", Event{Agent: Claude, Server: "claude", Tool: "Edit", Args: map[string]any{"file_path": "/w/a.go"}}, true, false, []string{"/w/a.go"}, ""},
		{"a_notebook_edit_names_its_notebook", Event{Agent: Claude, Server: "claude", Tool: "NotebookEdit", Args: map[string]any{"notebook_path": "n.ipynb"}}, true, false, []string{"n.ipynb"}, ""},
		{"a_shell_command_may_change_anything", Event{Agent: Claude, Server: "claude", Tool: "Bash", Args: map[string]any{"command": "make"}}, true, true, nil, "make"},
		{"codex_passes_its_command_as_words", Event{Agent: Codex, Server: "codex", Tool: "shell", Args: map[string]any{"command": []any{"bash", "-lc", "make"}}}, true, true, nil, "bash -lc make"},
		{"a_patch_names_the_files_it_touches", Event{Agent: Codex, Server: "codex", Tool: "apply_patch", Args: map[string]any{"input": "*** Begin Patch\n*** Update File: a.go\n@@\n*** Add File: b/c.go\n*** End Patch"}}, true, false, []string{"a.go", "b/c.go"}, ""},
		// Codex trims a header's blanks before reading it.
		{"an_indented_patch_header_names_its_file_too", Event{Agent: Codex, Server: "codex", Tool: "apply_patch", Args: map[string]any{"input": "*** Begin Patch\n *** Add File: .claude/settings.json\n+{}\n\t*** Delete File: d.go\n*** End Patch"}}, true, false, []string{".claude/settings.json", "d.go"}, ""},
		{"a_read_changes_nothing", Event{Agent: Claude, Server: "claude", Tool: "Read", Args: map[string]any{"file_path": "a.go"}}, false, false, nil, ""},
		{"an_mcp_tool_named_like_an_edit_is_its_servers", Event{Agent: Claude, Server: "fs", Tool: "Edit", Args: map[string]any{"file_path": "a.go"}}, false, false, nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := tc.ev.Changes()
			if ok != tc.ok || c.Shell != tc.shell || !slices.Equal(c.Paths, tc.paths) || c.Command != tc.command {
				t.Fatalf("Changes() = %+v, %v", c, ok)
			}
		})
	}
}
