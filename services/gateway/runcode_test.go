package gateway

import (
	"strings"
	"testing"

	"github.com/airlock-gate/airlock/services/gateway/codemode"
	"github.com/airlock-gate/airlock/services/shared/ingress"
)

func TestAScriptIsRecordedOnceEscapedAndBounded(t *testing.T) {
	src := "await tools.fs__write({path: \"a\u202e.txt\\x1b[2J\"}); // \u202e\x1b[31m\n" + strings.Repeat("//x\n", 10000)
	run := newScriptRun(src, []string{"fs__write"})
	first := run.ref(1)
	run.recorded.Store(true) // the first call was taken
	second := run.ref(2)
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"the_digest_is_of_the_script_as_sent", first.GetDigest() == codemode.Digest(src) && second.GetDigest() == first.GetDigest()},
		{"the_calls_carry_the_text_until_one_was_recorded", first.GetText() != "" && second.GetText() == ""},
		{"the_text_shows_what_would_not_show_as_itself_escaped", !strings.ContainsAny(first.GetText(), "\u202e\x1b") && strings.Contains(first.GetText(), `\u202e`)},
		{"the_text_is_cut_to_the_limit_and_keeps_the_whole_size", len(first.GetText()) <= ingress.MaxScriptText && int(first.GetSize()) == len(src)},
		{"the_preview_is_escaped_too", len(first.GetPreview()) == 1 && !strings.ContainsAny(first.GetPreview()[0], "\u202e\x1b")},
		{"the_calls_are_counted", first.GetIndex() == 1 && second.GetIndex() == 2 && first.GetRunId() == second.GetRunId()},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !c.ok {
				t.Fatalf("first %+v\nsecond %+v", first, second)
			}
		})
	}
	// A name is one line of the preview whatever it holds.
	if p := newScriptRun("tools[\"a\\nb\"]();", []string{"a\nb"}).ref(1).GetPreview(); len(p) != 1 || strings.Contains(p[0], "\n") {
		t.Fatalf("a preview entry of a name with a line break: %q", p)
	}
	// A name that is none of the tools is no entry.
	if p := newScriptRun(`tools.fs__write({}); tools["made up"]();`, []string{"fs__write"}).ref(1).GetPreview(); len(p) != 1 {
		t.Fatalf("the preview lists names that are no tools: %q", p)
	}
	// Names that are no tools do not push the real calls out, and the
	// preview fits what a call may carry, counting what it leaves out.
	long := strings.Repeat("tools.nope(); ", 30) + strings.Repeat(`tools.fs__write({path: "`+strings.Repeat("\u202e", 150)+`"}); `, 30)
	p := newScriptRun(long, []string{"fs__write"}).ref(1).GetPreview()
	size := 0
	for _, e := range p {
		size += len(e)
	}
	if len(p) == 0 || !strings.HasPrefix(p[0], "tools.fs__write(") || !strings.Contains(p[len(p)-1], "more calls not shown") ||
		len(p) > ingress.MaxScriptPreview || size > ingress.MaxPreviewBytes {
		t.Fatalf("the preview of 30 made-up calls, then 30 long real ones (%d bytes): %q", size, p)
	}
	if text := previewText(second, reasonPreview); !strings.Contains(text, "may be incomplete") || !strings.Contains(text, "fs__write") {
		t.Fatalf("the preview as reviewers see it: %q", text)
	}
}
