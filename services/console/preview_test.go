package console_test

import (
	"strings"
	"testing"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/preview"
)

// TestCallPageShowsThePreviewAsInertText: a call's preview (a diff of a
// file the agent may have written) shows as coloured lines of text —
// markup as characters, terminal escapes and bidi overrides made visible —
// and a call without one says "No preview" and why.
func TestCallPageShowsThePreviewAsInertText(t *testing.T) {
	e := newEnv(t)
	hostile := "<script>alert(1)</script><img src=x onerror=alert(2)>\x1b[2J\x1b]8;;http://evil/\x07link\u202eexe.txt"
	diff, _ := preview.Diff("notes.txt", "kept\n"+hostile+"\n", "kept\nnew line\n", true, 0)
	withDiff := pending("call_d", "bot", "demo__write_file", map[string]any{"path": "notes.txt", "content": "kept\nnew line\n"}, 0)
	withDiff.Preview = preview.Finish(&airlockv1.Preview{Kind: preview.KindDiff, Text: diff, Precondition: "sha256:abc"}, 0)
	none := pending("call_n", "bot", "demo__write_file", map[string]any{"path": "x", "content": "y"}, 0)
	none.Preview = preview.Unavailable("the preview did not finish within 3s")
	e.approval.put(withDiff)
	e.approval.put(none)
	b := e.browser()
	b.signIn("alice")

	for _, tc := range []struct {
		name, path string
		want, not  []string
	}{
		{"a_diff_shows_its_lines_escaped", "/calls/bot/call_d",
			[]string{`id="preview"`, `<span class="dadd">&#43;new line</span>`, `<span class="dhdr">--- a/notes.txt</span>`,
				`-&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;\u001b[2J\u001b]8;;http://evil/\u0007link\u202eexe.txt`,
				"diff &#43;1 −1 lines", "made against sha256:abc", withDiff.Preview.Digest[:12]},
			[]string{"<script>", "<img", "\x1b", "\u202e", `id="no-preview"`}},
		{"no_preview_says_so_and_why", "/calls/bot/call_n",
			[]string{`id="no-preview">No preview: the preview did not finish within 3s.`}, []string{`id="preview"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := b.get(tc.path)
			for _, w := range tc.want {
				if !strings.Contains(p.Body, w) {
					t.Errorf("page lacks %q", w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(p.Body, n) {
					t.Errorf("page holds %q", n)
				}
			}
		})
	}
}
