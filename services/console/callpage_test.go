package console_test

import (
	"strings"
	"testing"

	"github.com/airlock-gate/airlock/services/shared/config"
)

// TestCallPageSaysWhereTheCallRuns: a coding agent's command shows the
// working directory the agent gave (escaped: the agent chose it), and a
// call of the demo tools shows the sandbox they work in and the file its
// path lands on.
func TestCallPageSaysWhereTheCallRuns(t *testing.T) {
	e := newEnvWith(t, func(c *config.Config) { c.Executor.Sandbox = "/srv/airlock-sandbox" })
	shell := pending("call_sh", "laptop", "claude__Bash", map[string]any{"command": "make build"}, 0)
	shell.Call.AgentRuns, shell.Call.Cwd = true, `/home/dev/<b>shop</b>`
	e.approval.put(shell)
	e.approval.put(pending("call_w", "bot", "demo__write_file", map[string]any{"path": "notes/todo.txt", "content": "x"}, 0))
	e.approval.put(pending("call_out", "bot", "demo__write_file", map[string]any{"path": "../etc/passwd", "content": "x"}, 0))
	e.approval.put(pending("call_fs", "bot", "fs__write_file", map[string]any{"path": "notes/todo.txt"}, 0))
	b := e.browser()
	b.signIn("alice")

	for _, tc := range []struct {
		name, path string
		want       []string
		not        []string
	}{
		{"a_shell_command_shows_its_working_directory_escaped", "/calls/laptop/call_sh",
			[]string{`id="call-cwd"><code>/home/dev/&lt;b&gt;shop&lt;/b&gt;</code>`}, []string{"<b>shop</b>", `id="call-sandbox"`}},
		{"a_demo_write_shows_the_sandbox_file", "/calls/bot/call_w",
			[]string{`id="call-sandbox"`, "<code>/srv/airlock-sandbox</code>", "<code>/srv/airlock-sandbox/notes/todo.txt</code>"}, []string{`id="call-cwd"`}},
		{"a_path_leaving_the_sandbox_names_no_file_there", "/calls/bot/call_out",
			[]string{"<code>/srv/airlock-sandbox</code> (paths are relative to it)"}, []string{"/srv/airlock-sandbox/"}},
		{"another_servers_tool_names_no_sandbox", "/calls/bot/call_fs", nil, []string{`id="call-sandbox"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := b.get(tc.path)
			for _, w := range tc.want {
				if !strings.Contains(p.Body, w) {
					t.Errorf("the page lacks %q", w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(p.Body, n) {
					t.Errorf("the page has %q", n)
				}
			}
			if t.Failed() {
				t.Logf("%d:\n%s", p.Status, p.Body)
			}
		})
	}
}
