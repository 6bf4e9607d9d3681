package hooks

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// workspaceLayout makes base/repo (the workspace) and base/repo-secrets
// (its sibling) with links from the one to the other, and returns base
// with links resolved (t.TempDir may sit under a link, /tmp on macOS).
func workspaceLayout(t *testing.T) string {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"repo/src", "repo-secrets", "home"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"repo/src/main.go", "repo/.env", "repo-secrets/deploy.pem"} {
		if err := os.WriteFile(filepath.Join(base, f), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"repo/out":       "../repo-secrets",            // a directory outside
		"repo/notes.go":  "../repo-secrets/deploy.pem", // a file outside, named like source
		"repo/config.go": ".env",                       // a file inside, named like source
		"repo/code":      "src",                        // a directory inside
		"repo/src/up":    "..",                         // the workspace itself
		"ws":             "repo",                       // the workspace through a link
		"repo/rootlink":  "/",                          // the root
	} {
		if err := os.Symlink(target, filepath.Join(base, link)); err != nil {
			t.Fatal(err)
		}
	}
	return base
}

func TestPathsInsideTheWorkspaceAreWrittenRelativeAndOnlyThose(t *testing.T) {
	base := workspaceLayout(t)
	repo := base + "/repo"
	ws := Workspace{RealPath: filepath.EvalSymlinks, Home: base + "/home"}
	for _, tt := range []struct {
		name string
		tool string
		cwd  string
		args map[string]any
		want map[string]any // the arguments after; nil: as they were
	}{
		// The ordinary case: absolute paths inside the workspace.
		{"the workspace itself", "claude__Grep", repo, map[string]any{"pattern": "x", "path": repo},
			map[string]any{"pattern": "x", "path": ".", AskedKey: map[string]any{"path": repo}}},
		{"a directory in it", "claude__Grep", repo, map[string]any{"path": repo + "/src"},
			map[string]any{"path": "src", AskedKey: map[string]any{"path": repo + "/src"}}},
		{"a trailing slash", "codex__Grep", repo, map[string]any{"path": repo + "/src/"},
			map[string]any{"path": "src", AskedKey: map[string]any{"path": repo + "/src/"}}},
		{"a file in it", "gemini__search_file_content", repo, map[string]any{"dir_path": repo + "/src/main.go"},
			map[string]any{"dir_path": "src/main.go", AskedKey: map[string]any{"dir_path": repo + "/src/main.go"}}},
		{"through a link to the workspace", "claude__Grep", repo, map[string]any{"path": base + "/ws/src"},
			map[string]any{"path": "src", AskedKey: map[string]any{"path": base + "/ws/src"}}},
		{"a link inside back up to the workspace", "claude__Grep", repo, map[string]any{"path": "src/up"},
			map[string]any{"path": ".", AskedKey: map[string]any{"path": "src/up"}}},
		{"a link inside to inside", "claude__Grep", repo, map[string]any{"path": "code"},
			map[string]any{"path": "src", AskedKey: map[string]any{"path": "code"}}},
		{"a paths array, each its own", "gemini__read_many_files", repo, map[string]any{"paths": []any{repo + "/src/main.go", "src/**/*.go", base + "/repo-secrets/deploy.pem"}},
			map[string]any{"paths": []any{"src/main.go", "src/**/*.go", base + "/repo-secrets/deploy.pem"},
				AskedKey: map[string]any{"paths": []any{repo + "/src/main.go", "src/**/*.go", base + "/repo-secrets/deploy.pem"}}}},

		// Links that lead out become the absolute path they lead to.
		{"a link to a directory outside", "claude__Grep", repo, map[string]any{"path": repo + "/out"},
			map[string]any{"path": base + "/repo-secrets", AskedKey: map[string]any{"path": repo + "/out"}}},
		{"a relative link to a directory outside", "claude__Grep", repo, map[string]any{"path": "out"},
			map[string]any{"path": base + "/repo-secrets", AskedKey: map[string]any{"path": "out"}}},
		{"a relative link to a file outside named like source", "claude__Grep", repo, map[string]any{"path": "notes.go"},
			map[string]any{"path": base + "/repo-secrets/deploy.pem", AskedKey: map[string]any{"path": "notes.go"}}},
		{"a link to a secret inside shows its name", "claude__Grep", repo, map[string]any{"path": "config.go"},
			map[string]any{"path": ".env", AskedKey: map[string]any{"path": "config.go"}}},

		// Left as the agent spelled them.
		{"already relative", "claude__Grep", repo, map[string]any{"path": "src"}, nil},
		{"no path", "claude__Grep", repo, map[string]any{"pattern": "x"}, nil},
		{"dot dot after the prefix", "claude__Grep", repo, map[string]any{"path": repo + "/../repo-secrets"}, nil},
		{"dot dot back in", "claude__Grep", repo, map[string]any{"path": repo + "/out/../repo/src"}, nil},
		{"a sibling with the same prefix", "claude__Grep", repo, map[string]any{"path": base + "/repo-secrets"}, nil},
		{"another case", "claude__Grep", repo, map[string]any{"path": base + "/REPO/src"}, nil},
		{"a look-alike slash", "claude__Grep", repo, map[string]any{"path": repo + "\u2215src"}, nil},
		{"a decomposed accent", "claude__Grep", repo, map[string]any{"path": base + "/repo\u0301/src"}, nil},
		{"a path that does not exist", "claude__Grep", repo, map[string]any{"path": repo + "/nope"}, nil},
		{"an absolute pattern", "gemini__read_many_files", repo, map[string]any{"paths": []any{repo + "/src/**/*.go"}},
			map[string]any{"paths": []any{"src/**/*.go"}, AskedKey: map[string]any{"paths": []any{repo + "/src/**/*.go"}}}},
		{"a pattern of the workspace itself", "gemini__read_many_files", repo, map[string]any{"paths": []any{repo + "/*.go"}},
			map[string]any{"paths": []any{"*.go"}, AskedKey: map[string]any{"paths": []any{repo + "/*.go"}}}},
		{"a pattern through a link pointing out", "gemini__read_many_files", repo, map[string]any{"paths": []any{"out/**/*.go"}},
			map[string]any{"paths": []any{base + "/repo-secrets/**/*.go"}, AskedKey: map[string]any{"paths": []any{"out/**/*.go"}}}},
		{"an include pattern", "gemini__read_many_files", repo, map[string]any{"paths": []any{"src/main.go"}, "include": []any{repo + "/src/**/*.go", base + "/repo-secrets/deploy.pem", "out/*.pem"}},
			map[string]any{"paths": []any{"src/main.go"}, "include": []any{"src/**/*.go", base + "/repo-secrets/deploy.pem", base + "/repo-secrets/*.pem"},
				AskedKey: map[string]any{"include": []any{repo + "/src/**/*.go", base + "/repo-secrets/deploy.pem", "out/*.pem"}}}},
		{"a pattern of a sibling", "gemini__read_many_files", repo, map[string]any{"paths": []any{base + "/repo-secrets/*.pem"}}, nil},
		{"a pattern from its first segment", "gemini__read_many_files", repo, map[string]any{"paths": []any{"**/*.go"}}, nil},
		{"a pattern of the root", "gemini__read_many_files", repo, map[string]any{"paths": []any{"/*"}}, nil},
		{"a pattern with dot dot", "gemini__read_many_files", repo, map[string]any{"paths": []any{repo + "/*/../../repo-secrets/*"}}, nil},
		{"a search's path is no pattern", "claude__Grep", repo, map[string]any{"path": repo + "/src/*.go"}, nil},
		{"a tilde", "claude__Grep", repo, map[string]any{"path": "~/src"}, nil},
		{"a backslash", "claude__Grep", repo, map[string]any{"path": repo + `\src`}, nil},
		{"the root", "claude__Grep", repo, map[string]any{"path": "/"}, nil},
		{"a tool whose paths the profile does not scope", "claude__Read", repo, map[string]any{"file_path": repo + "/src/main.go"}, nil},
		{"an MCP tool's path", "github__search", repo, map[string]any{"path": repo + "/src"}, nil},

		// No workspace to speak of: nothing is rewritten.
		{"no cwd", "claude__Grep", "", map[string]any{"path": repo + "/src"}, nil},
		{"a relative cwd", "claude__Grep", "repo", map[string]any{"path": repo + "/src"}, nil},
		{"a cwd with a trailing slash", "claude__Grep", repo + "/", map[string]any{"path": repo + "/src"}, nil},
		{"a cwd with dot dot", "claude__Grep", repo + "/src/..", map[string]any{"path": repo + "/src"}, nil},
		{"a cwd that does not exist", "claude__Grep", base + "/gone", map[string]any{"path": repo + "/src"}, nil},
		{"the root as cwd", "claude__Grep", "/", map[string]any{"path": repo + "/src"}, nil},
		{"a cwd linking to the root", "claude__Grep", repo + "/rootlink", map[string]any{"path": repo + "/src"}, nil},
		{"the home directory as cwd", "claude__Grep", base + "/home", map[string]any{"path": base + "/home/.ssh"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			server, tool, _ := strings.Cut(tt.tool, "__")
			ev := Event{Server: server, Tool: tool, Cwd: tt.cwd, Args: tt.args}
			before := copyArgs(t, tt.args)
			if err := ev.InWorkspaceTerms(ws); err != nil {
				t.Fatal(err)
			}
			want := tt.want
			if want == nil {
				want = before
			}
			if !reflect.DeepEqual(ev.Args, want) {
				t.Errorf("arguments %v, want %v", ev.Args, want)
			}
			if !reflect.DeepEqual(tt.args, before) {
				t.Errorf("the payload's own arguments changed to %v", tt.args)
			}
		})
	}
}

func copyArgs(t *testing.T, args map[string]any) map[string]any {
	t.Helper()
	out := map[string]any{}
	for k, v := range args {
		if a, ok := v.([]any); ok {
			v = append([]any(nil), a...)
		}
		out[k] = v
	}
	return out
}

func TestArgumentsThatAlreadyCarryTheHooksKeyAreRefused(t *testing.T) {
	base := workspaceLayout(t)
	// Every tool, not only those whose paths the hook rewrites: the key is
	// the hook's word on what the agent asked for, wherever it appears.
	for _, tt := range []struct {
		tool string
		args map[string]any
	}{
		{"claude__Grep", map[string]any{"path": base + "/repo-secrets", AskedKey: map[string]any{"path": "src"}}},
		{"claude__Read", map[string]any{"file_path": base + "/repo/src/main.go", AskedKey: map[string]any{"file_path": "x"}}},
		{"gemini__run_shell_command", map[string]any{"command": "ls", AskedKey: "x"}},
		{"github__search", map[string]any{"q": "x", AskedKey: nil}},
	} {
		t.Run(tt.tool, func(t *testing.T) {
			server, tool, _ := strings.Cut(tt.tool, "__")
			ev := Event{Server: server, Tool: tool, Cwd: base + "/repo", Args: tt.args}
			err := ev.InWorkspaceTerms(Workspace{RealPath: filepath.EvalSymlinks})
			if err == nil || !strings.Contains(err.Error(), AskedKey) {
				t.Fatalf("err = %v, want a refusal naming %s", err, AskedKey)
			}
		})
	}
}
