package hooks

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
)

// AskedKey is the argument the hook adds to a call whose path arguments it
// put in workspace terms: the agent's own spelling of each argument it
// rewrote, so a reviewer and the audit see what the agent asked for.
const AskedKey = "airlock_asked"

// workspacePathArgs are, per tool, the arguments naming where a search or
// multi-file read looks: the ones the coding profile's coding-read-scope
// rule asks about when they leave the workspace.
var workspacePathArgs = map[string][]string{
	"claude__Grep":                {"path"},
	"codex__Grep":                 {"path"},
	"gemini__search_file_content": {"dir_path", "path"},
	"gemini__read_many_files":     {"paths"},
}

// Workspace is what the hook needs of the agent's machine to say where a
// path really leads. The hooks package touches no files: the caller gives
// it filepath.EvalSymlinks and the user's home directory.
type Workspace struct {
	// RealPath resolves every symbolic link of an absolute path
	// (filepath.EvalSymlinks); an error when it cannot (the path does not
	// exist).
	RealPath func(string) (string, error)
	// Home is the user's home directory ("" when unknown).
	Home string
}

// InWorkspaceTerms puts the path arguments of a search or multi-file read
// (workspacePathArgs) in the terms the coding profile decides on, so that
// the policy sees where the tool will really read: a path that resolves,
// symbolic links followed, to the session's working directory (the
// workspace) or below it becomes relative to it ("src/main.go", "."),
// whether the agent spelled it absolute or relative; a path that resolves
// outside becomes the absolute path it resolves to (a relative "notes.go"
// that links to ~/.ssh/id_rsa is that key, and asks). The agent's spelling of
// each rewritten argument is kept under AskedKey.
//
// What cannot be resolved stays as the agent spelled it, which the coding
// profile judges as before (an absolute path asks): a path that does not
// exist or is a pattern, one with a ".." segment, "~" or a backslash, and
// every path of a session whose working directory is missing, relative,
// not clean, the root or the home directory (no workspace to speak of).
//
// The tool runs with the agent's own arguments: they name the same file as
// the rewritten ones as long as nothing changes the links in between (which
// takes an edit or a shell command, both of which the profile asks about).
// Arguments that already hold AskedKey are an error: the key is the hook's.
func (ev *Event) InWorkspaceTerms(ws Workspace) error {
	names := workspacePathArgs[ev.QualifiedTool()]
	if len(names) == 0 || ev.Args == nil {
		return nil
	}
	if _, ok := ev.Args[AskedKey]; ok {
		return fmt.Errorf("the %s arguments carry %q, which airlock's hook writes itself (the agent's spelling of the paths it rewrote); a call that sets it is denied", ev.QualifiedTool(), AskedKey)
	}
	root, ok := ws.root(ev.Cwd)
	if !ok {
		return nil
	}
	args, asked := maps.Clone(ev.Args), map[string]any{}
	for _, name := range names {
		switch v := args[name].(type) {
		case string:
			if p, ok := ws.resolve(root, ev.Cwd, v); ok {
				asked[name], args[name] = v, p
			}
		case []any:
			out, changed := slices.Clone(v), false
			for i, e := range v {
				if s, isString := e.(string); isString {
					if p, ok := ws.resolve(root, ev.Cwd, s); ok {
						out[i], changed = p, true
					}
				}
			}
			if changed {
				asked[name], args[name] = v, out
			}
		}
	}
	if len(asked) > 0 {
		args[AskedKey] = asked
		ev.Args = args
	}
	return nil
}

// root is the real path of the workspace: the session's working directory,
// links resolved. ok is false when there is no workspace to speak of.
func (ws Workspace) root(cwd string) (string, bool) {
	if ws.RealPath == nil || cwd == "" || !filepath.IsAbs(cwd) || filepath.Clean(cwd) != cwd {
		return "", false
	}
	real, err := ws.RealPath(cwd)
	if err != nil || real == "/" || !filepath.IsAbs(real) {
		return "", false
	}
	if ws.Home != "" {
		if home, err := ws.RealPath(ws.Home); err == nil && home == real {
			return "", false
		}
	}
	return real, true
}

// resolve is p in workspace terms; ok is false when that is p itself or p
// cannot be resolved.
func (ws Workspace) resolve(root, cwd, p string) (string, bool) {
	if p == "" || strings.HasPrefix(p, "~") || strings.ContainsAny(p, "\\\x00") || slices.Contains(strings.Split(p, "/"), "..") {
		return "", false
	}
	abs := p
	if !filepath.IsAbs(p) {
		abs = cwd + "/" + p
	}
	real, err := ws.RealPath(abs)
	if err != nil || !filepath.IsAbs(real) {
		return "", false
	}
	var out string
	switch {
	case real == root:
		out = "."
	case strings.HasPrefix(real, root+"/"):
		out = real[len(root)+1:]
	default:
		out = real
	}
	return out, out != p
}
