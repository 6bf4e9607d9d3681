package escape_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/airlock-gate/airlock/services/shared/escape"
	"github.com/airlock-gate/airlock/services/shared/escape/escapetest"
)

func TestVisibleEscapesWhatWouldNotShowAsItself(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"printable_text_is_kept", `{"path": "notes/ä😀.txt"}`, `{"path": "notes/ä😀.txt"}`},
		{"line_breaks_and_tabs_are_kept", "{\n\t\"a\": 1\n}", "{\n\t\"a\": 1\n}"},
		{"a_right_to_left_override", "invoice\u202efdp.sh", `invoice\u202efdp.sh`},
		{"a_zero_width_space", "z\u200bwsp", `z\u200bwsp`},
		{"a_byte_order_mark", "\ufeffx", `\ufeffx`},
		{"a_line_separator", "a\u2028b", `a\u2028b`},
		{"a_tag_character_past_the_bmp", "ok\U000e0041", `ok\U000e0041`},
		{"a_control_character", "a\x1bb", `a\u001bb`},
		{"a_c1_control", "a\u009bb", `a\u009bb`},
		{"a_carriage_return", "a\rb", `a\u000db`},
		{"invalid_utf8", "a\xffb", `a\xffb`},
		{"a_combining_grapheme_joiner", "dry_run\u034f", `dry_run\u034f`},
		{"a_variation_selector", "confirm\ufe0f", `confirm\ufe0f`},
		{"a_mongolian_free_variation_selector", "a\u180bb", `a\u180bb`},
		{"a_khmer_inherent_vowel", "a\u17b4b", `a\u17b4b`},
		{"a_hangul_filler", "a\u3164b", `a\u3164b`},
		{"a_blank_braille_pattern", "a\u2800b", `a\u2800b`},
		{"a_variation_selector_past_the_bmp", "a\U000e0100b", `a\U000e0100b`},
		{"an_accent_that_shows_is_kept", "cafe\u0301", "cafe\u0301"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := escape.Visible(tt.in); got != tt.want {
				t.Fatalf("Visible(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestEachMediumShowsEveryHostileStringInertly(t *testing.T) {
	media := []struct {
		name  string
		fn    func(string) string
		check func(in, out string) []string
	}{
		{"terminal_one_line", escape.Terminal, func(_, out string) []string { return escapetest.RawLine(out) }},
		{"terminal_lines", escape.TerminalLines, func(_, out string) []string { return escapetest.Raw(out) }},
		{"html", escape.HTML, func(_, out string) []string { return append(escapetest.Raw(out), markup(out, `<>"'`)...) }},
		{"html_page", func(s string) string { return string(escape.HTMLPage([]byte(s))) }, func(_, out string) []string { return escapetest.Raw(out) }},
		{"slack_inline_code", escape.Slack, func(_, out string) []string {
			found := append(escapetest.RawLine(out), markup(out, "<>")...)
			if !strings.HasPrefix(out, "`") || !strings.HasSuffix(out, "`") || strings.Count(out, "`") != 2 {
				found = append(found, "not one code span")
			}
			return found
		}},
		{"slack_block", escape.SlackBlock, func(_, out string) []string {
			found := append(escapetest.Raw(out), markup(out, "<>")...)
			if strings.Contains(out, "```") {
				found = append(found, "``` closes the block")
			}
			return found
		}},
		{"slack_plain", escape.SlackPlain, func(_, out string) []string { return escapetest.RawLine(out) }},
		{"teams_text_run", escape.Teams, func(_, out string) []string { return escapetest.Raw(out) }},
		{"teams_line", escape.TeamsLine, func(_, out string) []string { return escapetest.RawLine(out) }},
		{"mail_body", escape.Mail, func(_, out string) []string { return escapetest.Raw(out) }},
		{"push_notification", escape.Push, func(_, out string) []string { return escapetest.RawLine(out) }},
		{"mail_header", escape.MailHeader, func(_, out string) []string { return escapetest.RawLine(out) }},
		{"csv_cell", escape.CSV, func(_, out string) []string {
			found := escapetest.Raw(out)
			if out != "" && strings.ContainsRune("=+-@\t\r", rune(out[0])) {
				found = append(found, "a cell a spreadsheet runs as a formula")
			}
			return found
		}},
	}
	for _, m := range media {
		for _, h := range escapetest.Corpus {
			t.Run(m.name+"/"+h.Name, func(t *testing.T) {
				if found := m.check(h.Text, m.fn(h.Text)); len(found) > 0 {
					t.Errorf("%s of %q shows %v", m.name, cut(h.Text), found)
				}
			})
		}
	}
}

// markup names the characters of chars found raw in out.
func markup(out, chars string) []string {
	var found []string
	for _, c := range chars {
		if strings.ContainsRune(out, c) {
			found = append(found, "raw "+string(c))
		}
	}
	return found
}

func TestPlainTextIsKeptAsItIs(t *testing.T) {
	for _, s := range []string{"notes/todo.txt", "git commit -m 'fix: ä 😀'", "a_b*c~d"} {
		if escape.Terminal(s) != s || escape.Visible(s) != s || escape.CSV(s) != s || escape.MailHeader(s) != s || escape.Teams(s) != s {
			t.Errorf("%q is changed by a medium that should keep it", s)
		}
	}
	if got := escape.Slack("a_b*c"); got != "`a_b*c`" {
		t.Errorf("Slack(%q) = %q, want it as inline code", "a_b*c", got)
	}
	page := []byte(`<p class="x">notes — ok</p>`)
	if got := escape.HTMLPage(page); string(got) != string(page) {
		t.Errorf("HTMLPage changed a page with nothing hidden: %s", got)
	}
}

func cut(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

func TestJSONEscapesHiddenRunesLosslessly(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"printable_text_is_kept", "{\n  \"path\": \"notes/ä😀.txt\"\n}", "{\n  \"path\": \"notes/ä😀.txt\"\n}"},
		{"a_right_to_left_override", `{"r":"invoice` + "\u202e" + `fdp.sh"}`, `{"r":"invoice\u202efdp.sh"}`},
		{"an_isolate_and_a_zero_width_space", `["a` + "\u2066\u200b" + `b"]`, `["a\u2066\u200bb"]`},
		{"a_tag_character_past_the_bmp_as_a_surrogate_pair", `"ok` + "\U000e0041" + `"`, `"ok\udb40\udc41"`},
		{"del", "\"a\x7fb\"", `"a\u007fb"`},
		{"after_an_escaped_backslash", `"\\` + "\u202e" + `"`, `"\\\u202e"`},
		{"invalid_utf8", "\"a\xffb\"", `"a\ufffdb"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := string(escape.JSON([]byte(tt.in)))
			if got != tt.want {
				t.Fatalf("JSON(%q) = %q, want %q", tt.in, got, tt.want)
			}
			var before, after any
			if json.Unmarshal([]byte(tt.in), &before) == nil && utf8.ValidString(tt.in) {
				if err := json.Unmarshal([]byte(got), &after); err != nil || !reflect.DeepEqual(before, after) {
					t.Fatalf("JSON(%q) decodes to %v (%v), the input to %v: want the same value", tt.in, after, err, before)
				}
			}
		})
	}
}
