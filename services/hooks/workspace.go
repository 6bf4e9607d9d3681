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

// pathArg is an argument naming where a search or multi-file read looks.
type pathArg struct {
	name string
	// patterns: the tool reads each value as a glob pattern (Gemini CLI's
	// read_many_files), so only its literal leading directories can be
	// resolved.
	patterns bool
}

// workspacePathArgs are, per tool, the arguments the coding profile's
// coding-read-scope rule asks about when they leave the workspace.
var workspacePathArgs = map[string][]pathArg{
	"claude__Grep":                {{name: "path"}},
	"codex__Grep":                 {{name: "path"}},
	"gemini__search_file_content": {{name: "dir_path"}, {name: "path"}},
	// include holds patterns the tool merges with paths.
	"gemini__read_many_files": {{name: "paths", patterns: true}, {name: "include", patterns: true}},
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
// A glob pattern (read_many_files' paths and include) is resolved up to its first
// segment holding a glob character. What cannot be resolved stays as the
// agent spelled it, which the coding profile judges as before (an absolute
// path asks): a path that does not exist, a pattern whose literal leading
// directories do not, one with a ".." segment, "~" or a backslash, and
// every path of a session whose working directory is missing, relative,
// not clean, the root or the home directory (no workspace to speak of).
//
// The tool runs with the agent's own arguments: they name the same file as
// the rewritten ones as long as nothing changes the links in between (which
// takes an edit or a shell command, both of which the profile asks about).
// Arguments of any tool that already hold AskedKey are an error: the key is
// the hook's, and denying (rather than stripping it) keeps what the policy
// judges and what the tool receives the same arguments.
func (ev *Event) InWorkspaceTerms(ws Workspace) error {
	// On every tool, not only those it rewrites: a reviewer and the audit
	// read the key as the hook's word on what the agent asked for.
	if _, ok := ev.Args[AskedKey]; ok {
		return fmt.Errorf("the %s arguments carry %q, which airlock's hook writes itself (the agent's spelling of the paths it rewrote); a call that sets it is denied", ev.QualifiedTool(), AskedKey)
	}
	pathArgs := workspacePathArgs[ev.QualifiedTool()]
	if len(pathArgs) == 0 || ev.Args == nil {
		return nil
	}
	root, ok := ws.root(ev.Cwd)
	if !ok {
		return nil
	}
	args, asked := maps.Clone(ev.Args), map[string]any{}
	for _, a := range pathArgs {
		switch v := args[a.name].(type) {
		case string:
			if p, ok := ws.resolve(root, ev.Cwd, v, a.patterns); ok {
				asked[a.name], args[a.name] = v, p
			}
		case []any:
			out, changed := slices.Clone(v), false
			for i, e := range v {
				if s, isString := e.(string); isString {
					if p, ok := ws.resolve(root, ev.Cwd, s, a.patterns); ok {
						out[i], changed = p, true
					}
				}
			}
			if changed {
				asked[a.name], args[a.name] = v, out
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
// cannot be resolved. A pattern (patterns) that does not name a file as it
// is spelled is resolved up to its first segment holding a glob character
// and keeps the rest: "/…/repo/src/**/*.go" is "src/**/*.go", and "out/*.go"
// through a link pointing out is where the link leads, then "/*.go".
func (ws Workspace) resolve(root, cwd, p string, patterns bool) (string, bool) {
	if p == "" || strings.HasPrefix(p, "~") || strings.ContainsAny(p, "\\\x00") || slices.Contains(strings.Split(p, "/"), "..") {
		return "", false
	}
	abs := p
	if !filepath.IsAbs(p) {
		abs = cwd + "/" + p
	}
	out, ok := ws.inTerms(root, abs)
	if !ok && patterns {
		segs := strings.Split(abs, "/")
		first := slices.IndexFunc(segs, func(s string) bool { return strings.ContainsAny(s, globChars) })
		if first <= 0 {
			return "", false
		}
		dir, resolved := ws.inTerms(root, strings.Join(segs[:first], "/"))
		if !resolved {
			return "", false
		}
		rest := strings.Join(segs[first:], "/")
		if out, ok = rest, true; dir != "." {
			out = strings.TrimSuffix(dir, "/") + "/" + rest
		}
	}
	return out, ok && out != p
}

// globChars are the characters that make a path segment a pattern in the
// glob libraries coding agents use (wildcards, classes, braces, extglobs).
const globChars = "*?[]{}()!+@"

// inTerms is the absolute path abs, links resolved, relative to the
// workspace root when it lies there, else absolute.
func (ws Workspace) inTerms(root, abs string) (string, bool) {
	real, err := ws.RealPath(abs)
	if err != nil || !filepath.IsAbs(real) {
		return "", false
	}
	switch {
	case real == root:
		return ".", true
	case strings.HasPrefix(real, root+"/"):
		return real[len(root)+1:], true
	}
	return real, true
}
