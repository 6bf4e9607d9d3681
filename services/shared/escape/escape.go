// Package escape is the one home of the functions that show a string an
// agent chose (a reason, a tool or thread name, an argument, a result, an
// error a tool wrote; reviewers' comments are treated the same) to a person:
// one function per medium, called where the string is rendered. Each
// builds on Visible, so that on every surface nothing an agent wrote can
// hide itself, reorder the text around it or drive the device showing it
// (a terminal's escape sequences, a page's markup, a Slack mention, a
// spreadsheet formula, a mail header).
//
// Media and their functions:
//
//   - terminal: Terminal (one line), TerminalLines (text already laid out
//     in lines, such as arguments under a label; JSON goes through JSON,
//     below);
//
//   - HTML: HTMLPage over every page and fragment html/template rendered,
//     HTML for markup written by hand;
//
//   - Slack mrkdwn: Slack (inline code), SlackBlock (inside a ``` block),
//     SlackText (text an operator wrote), SlackPlain (plain_text objects);
//
//   - Microsoft Teams Adaptive Cards: Teams (a TextRun), TeamsLine (a
//     one-line TextRun);
//
//   - mail: Mail (a plain-text body), MailHeader (a header value);
//
//   - CSV: CSV (one cell);
//
//   - a phone's notification (Web Push): Push (title or body).
//
//   - JSON text printed or sent as it is (a CLI's --json, an export, a
//     webhook body): JSON.
//
// encoding/json and protojson escape controls and write valid UTF-8 but
// leave bidi and zero-width characters raw; JSON rewrites those as \u
// escapes, which every JSON reader decodes to the same runes (lossless),
// so the text shows nothing hidden wherever it is read. Logs neither (checked with Go 1.26's log/slog):
// the text handler quotes a message or value with anything unprintable in
// it (strconv.Quote: ESC, C1 controls, bidi and zero-width characters,
// invalid UTF-8 are escaped; a combining grapheme joiner stays), and the
// JSON handler writes valid JSON (controls escaped, invalid UTF-8 as
// U+FFFD, bidi and zero-width characters raw: the log viewer's to show).
package escape

import (
	"fmt"
	"html"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Visible escapes, in text a person reads, every rune that would not show
// as itself: control and format characters (ESC and every other C0 or C1
// control, CR, backspace, bidi overrides and isolates such as U+202E and
// U+2066, zero-width spaces and joiners, the byte order mark), line and
// paragraph separators, default-ignorable and unassigned code points become
// \uXXXX (\U00XXXXXX past U+FFFF), and a byte that is not UTF-8 becomes
// \xNN. What an agent wrote then cannot reorder, hide or run anything on a
// reviewer's screen. Printable text, spaces, tabs and line breaks (\n) are
// kept as they are; the output holds only the input's printable runes and
// ASCII, so it adds no markup to whatever it is put in.
func Visible(s string) string { return visible(s, false) }

// Terminal is s as one line on a terminal: Visible, and line breaks and
// tabs shown as \n and \t, so that an agent's text can neither draw lines
// that pass for the command's own output nor move a table's columns.
func Terminal(s string) string { return visible(s, true) }

// TerminalLines is text already laid out in lines (a block of arguments)
// for a terminal: Visible, line breaks and tabs kept. JSON printed as it
// is goes through JSON instead: Visible writes \U00XXXXXX past U+FFFF and
// \xNN, which are no JSON escapes.
func TerminalLines(s string) string { return visible(s, false) }

// HTMLPage makes every hidden rune visible (Visible) in a page or fragment
// that html/template has already escaped. The templates write no such rune
// themselves, so whatever is changed came from data: a reason, a timeline
// detail, a thread id, an argument — in text, attributes and form values
// alike (inside a JSON or JavaScript string, \uXXXX stands for the same
// rune). Markup is left as it is: Visible adds only ASCII letters, digits
// and backslashes.
func HTMLPage(b []byte) []byte {
	s := string(b)
	v := visible(s, false)
	if len(v) == len(s) {
		return b // nothing hidden: the common case keeps the rendered bytes
	}
	return []byte(v)
}

// HTML is s as HTML text or an attribute value written without
// html/template: escaped (html.EscapeString) and Visible.
func HTML(s string) string { return html.EscapeString(Visible(s)) }

// Slack is s as inline code in Slack mrkdwn, backticks included: one line
// (Terminal), &, < and > as entities so that nothing becomes a mention
// (<!channel>) or a link whose label lies (<http://x|y>), and no backtick,
// so the code span cannot close early. Inside code, mrkdwn draws no bold,
// italics, strike-through, quotes or emoji: an agent's text cannot pass for
// the card's own lines. An empty s is "-".
func Slack(s string) string {
	s = strings.TrimSpace(Terminal(s))
	if s == "" {
		return "-"
	}
	return "`" + strings.ReplaceAll(SlackText(s), "`", "ˋ") + "`"
}

// SlackBlock is s inside a ``` block of Slack mrkdwn: Visible (lines
// kept), &, < and > as entities, and no ``` that would close the block
// (the third backtick of a run is shown as ˋ).
func SlackBlock(s string) string {
	s = SlackText(s)
	for strings.Contains(s, "```") {
		s = strings.ReplaceAll(s, "```", "``ˋ")
	}
	return s
}

// SlackText is text an operator wrote (a policy reason, a configured name)
// in Slack mrkdwn: Visible, and &, < and > as entities, so that it makes
// no mention or link; its own *bold* and _italics_ are kept. Text an agent
// or a reviewer chose goes through Slack or SlackBlock instead.
func SlackText(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(Visible(s))
}

// SlackPlain is s in a Slack plain_text object (a header, a button): one
// line (Terminal). Slack draws no formatting in plain text.
func SlackPlain(s string) string { return Terminal(s) }

// Teams is s in the text of an Adaptive Card TextRun: Visible (line
// breaks kept). Adaptive Cards draw markdown (bold, italics, links, lists)
// in a TextBlock but none in a TextRun, so cards put every string they did
// not write themselves in TextRuns, never in a TextBlock, a FactSet or a
// title; what an agent wrote then shows as the characters it is, and
// nothing in it can hide, reorder or pass for the card's own lines.
func Teams(s string) string { return Visible(s) }

// TeamsLine is Teams on one line (Terminal): for a card's title and the
// short values beside a label, which an agent's line breaks must not
// stretch into lines of their own.
func TeamsLine(s string) string { return Terminal(s) }

// Mail is s in a plain-text mail body: Visible (line breaks kept; a CR,
// which mail reserves for its own line ends, shown as \u000d).
func Mail(s string) string { return Visible(s) }

// MailHeader is s in a mail header (a subject, a display name): one line
// (Terminal), so that no CR or LF reaches the header and starts another
// header or the body.
func MailHeader(s string) string { return Terminal(s) }

// Push is s in a Web Push notification's title or body, which the phone
// shows as plain text: one line (Terminal), so that an agent's text can
// neither hide itself nor draw lines that pass for the notification's own.
func Push(s string) string { return Terminal(s) }

// CSV is s as one cell of a CSV file a spreadsheet may open: Visible, and a
// cell that starts with = + - @, a tab or a carriage return gets a leading
// apostrophe, so that it is never run as a formula (OWASP "CSV injection";
// =HYPERLINK(...) would otherwise send data away when clicked).
func CSV(s string) string {
	s = Visible(s)
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// JSON is JSON text (as encoding/json or protojson wrote it: valid UTF-8,
// controls inside strings already escaped) with every rune that would not
// show as itself (as Visible judges it) written as a JSON \u escape,
// a surrogate pair past U+FFFF. Such runes can only stand inside strings,
// where \uXXXX means the same rune: the JSON decodes to the same value,
// and no bidi override or zero-width character in an agent's text reaches
// the terminal, file or on-call human reading it. A byte that is not
// UTF-8 becomes \ufffd, which is what a JSON reader would make of it.
func JSON(b []byte) []byte {
	i := 0
	for i < len(b) { // the common case, nothing hidden, keeps b
		if b[i] < utf8.RuneSelf && b[i] != 0x7f { // encoding/json escapes the other controls, not DEL
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 || hidden(r) {
			break
		}
		i += size
	}
	if i == len(b) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	out = append(out, b[:i]...)
	for i < len(b) {
		c := b[i]
		if c < utf8.RuneSelf && c != 0x7f {
			out = append(out, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out = append(out, `\ufffd`...)
		case !hidden(r):
			out = append(out, b[i:i+size]...)
		case r > 0xFFFF:
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		default:
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += size
	}
	return out
}

// visible is Visible; oneLine also escapes line breaks and tabs.
func visible(s string, oneLine bool) string {
	shown := func(r rune) bool { return !hidden(r) && !(oneLine && (r == '\n' || r == '\t')) }
	i := 0
	for i < len(s) { // the common case, text with nothing hidden, is returned as it is
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c < 0x7f || !oneLine && (c == '\n' || c == '\t') {
				i++
				continue
			}
			break
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || !shown(r) {
			break
		}
		i += size
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n' && oneLine:
			b.WriteString(`\n`)
		case r == '\t' && oneLine:
			b.WriteString(`\t`)
		case shown(r):
			b.WriteString(s[i : i+size])
		case r > 0xFFFF:
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
	}
	return b.String()
}

// hidden reports whether r does not show as itself: not printable, or
// drawn as nothing although Go counts it printable (default-ignorable code
// points such as the combining grapheme joiner, variation selectors and
// Hangul fillers, and the blank Braille pattern).
func hidden(r rune) bool {
	if r == '\n' || r == '\t' {
		return false
	}
	return !strconv.IsPrint(r) || r == '\u2800' ||
		unicode.Is(unicode.Variation_Selector, r) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r)
}

// Hidden reports whether r draws nothing a reader can see (or is not
// printable): what the look-alike detector treats as a gap in a name.
func Hidden(r rune) bool { return hidden(r) }
