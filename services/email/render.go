package email

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/escape"
	"github.com/airlock-gate/airlock/services/shared/lookalike"
	"github.com/airlock-gate/airlock/services/shared/notify"
	"github.com/airlock-gate/airlock/services/shared/preview"
)

// Bounds that keep a mail readable whatever an agent sends; the console
// shows everything.
const (
	maxSubjectRunes  = 120
	maxArgumentBytes = 16 << 10
	maxReasonBytes   = 2 << 10
)

// HeaderText is agent text as a mail header may carry it: on one line, with
// every control character (CR and LF included), invisible and bidi
// character shown as an escape (escape.MailHeader), cut to n runes. No
// string passed through it can end a header or start another.
func HeaderText(s string, n int) string {
	s = escape.MailHeader(s)
	if utf8.RuneCountInString(s) > n {
		s = string([]rune(s)[:n-1]) + "…"
	}
	return s
}

// Subject is the thread's subject: what waits, at what risk, from whom.
func Subject(rec *airlockv1.ApprovalRecord) string {
	c := rec.GetCall()
	return HeaderText(fmt.Sprintf("[airlock] Approval needed: %s (risk %s, agent %s)", calls.QualifiedTool(c),
		calls.RiskName(rec.GetDecision().GetRisk()), c.GetAgentId()), maxSubjectRunes)
}

// RequestBody is the first mail of a thread: the call and the link to
// decide it.
func RequestBody(rec *airlockv1.ApprovalRecord, publicURL string) string {
	return requestBody(rec, publicURL, nil)
}

// requestBody is RequestBody with one approver's one-tap links (nil: none).
func requestBody(rec *airlockv1.ApprovalRecord, publicURL string, l *Links) string {
	var b strings.Builder
	c := rec.GetCall()
	fmt.Fprintf(&b, "An agent's tool call waits for a decision.\n\nDecide in the console (sign in there; this mail decides nothing):\n%s\n\n",
		notify.ConsoleURL(publicURL, c.GetAgentId(), c.GetCallId()))
	oneTap(&b, l)
	whole(&b, rec)
	return b.String()
}

// oneTap writes an approver's one-tap links, and what they do and do not.
func oneTap(b *strings.Builder, l *Links) {
	if l == nil {
		return
	}
	fmt.Fprintf(b, "Or in one tap, for %s only: each link opens the call in the console, signed in as %s, where one button decides; "+
		"opening a link decides nothing. They work once, for this revision and these arguments, until %s.\n",
		HeaderText(l.Approver, 200), HeaderText(l.Approver, 200), when(l.Expires))
	fmt.Fprintf(b, "Approve: %s\nDeny:    %s\n\n", l.Approve, l.Deny)
}

// whole writes the call's details, its arguments and the footer.
func whole(b *strings.Builder, rec *airlockv1.ApprovalRecord) {
	details(b, rec)
	b.WriteString("\nArguments")
	if len(rec.GetDecision().GetRedact()) > 0 {
		b.WriteString(" (values the policy redacts are masked)")
	}
	b.WriteString(":\n")
	b.WriteString(quote(arguments(rec)))
	summary, excerpt := preview.Notified(rec)
	fmt.Fprintf(b, "\nPreview: %s\n", defang(HeaderText(summary, 400)))
	if excerpt != "" {
		b.WriteString(quote(inert(excerpt)))
	}
	footer(b, rec)
}

// ReminderBody is a reminder or escalation reply; it carries the call's
// details and arguments again, for the approvers escalation added.
func ReminderBody(rec *airlockv1.ApprovalRecord, publicURL string) string {
	return reminderBody(rec, publicURL, nil)
}

// reminderBody is ReminderBody with one approver's one-tap links (nil: none).
func reminderBody(rec *airlockv1.ApprovalRecord, publicURL string, l *Links) string {
	var b strings.Builder
	c := rec.GetCall()
	if rec.GetEscalated() {
		fmt.Fprintf(&b, "Escalated: this call still waits for a decision; now also asked: %s.\n\n",
			HeaderText(strings.Join(rec.GetDecision().GetEscalateTo(), ", "), 400))
	} else {
		b.WriteString("Reminder: this call still waits for a decision.\n\n")
	}
	fmt.Fprintf(&b, "Decide in the console:\n%s\n\n", notify.ConsoleURL(publicURL, c.GetAgentId(), c.GetCallId()))
	oneTap(&b, l)
	whole(&b, rec) // whoever escalation added never got the request
	return b.String()
}

// OutcomeBody is the reply that closes the thread: who decided what.
func OutcomeBody(rec *airlockv1.ApprovalRecord, publicURL string) string {
	var b strings.Builder
	c := rec.GetCall()
	st := rec.GetState()
	by := rec.GetDecidedBy()
	switch {
	case st == airlockv1.ApprovalState_APPROVAL_STATE_EXPIRED:
		fmt.Fprintf(&b, "Expired: nobody decided before %s. The call will not run.\n", when(rec.GetDeadline().AsTime()))
	case by.GetId() != "":
		fmt.Fprintf(&b, "Outcome: %s by %s", calls.StateText(st), HeaderText(by.GetId(), 200))
		if note := calls.ActorNote(by); note != "" {
			fmt.Fprintf(&b, " (%s)", HeaderText(note, 40))
		}
		b.WriteString(".\n")
	default:
		fmt.Fprintf(&b, "Outcome: %s.\n", calls.StateText(st))
	}
	if r := rec.GetReason(); r != "" {
		b.WriteString("\nReason given:\n")
		b.WriteString(quote(cut(inert(r), maxReasonBytes)))
	}
	if rec.GetEditedArguments() != nil {
		b.WriteString("\nApproved with edited arguments (see the console).\n")
	}
	fmt.Fprintf(&b, "\nCall page:\n%s\n\n", notify.ConsoleURL(publicURL, c.GetAgentId(), c.GetCallId()))
	details(&b, rec)
	footer(&b, rec)
	return b.String()
}

// details lists the call's facts; every agent-chosen value is made visible
// and its links inert (and the free-text reason quoted under its label).
func details(b *strings.Builder, rec *airlockv1.ApprovalRecord) {
	c, d := rec.GetCall(), rec.GetDecision()
	line := func(label, v string) { fmt.Fprintf(b, "%-15s %s\n", label+":", defang(HeaderText(v, 400))) }
	line("Tool", calls.QualifiedTool(c))
	line("Agent", c.GetAgentId())
	if c.GetOnBehalfOf() != "" {
		line("On behalf of", calls.OnBehalfOfText(c, escape.MailHeader))
	}
	// The agent's words as the lines above show them: one line, links defanged.
	for _, w := range lookalike.Warnings(c, d.GetRedact(), func(s string) string { return defang(escape.MailHeader(s)) }) {
		fmt.Fprintf(b, "! %s\n", w)
	}
	line("Call", fmt.Sprintf("%s (revision %d)", c.GetCallId(), max(c.GetRevision(), 1)))
	line("Risk", calls.RiskName(d.GetRisk()))
	line("Policy reason", d.GetReason())
	if d.GetRuleId() != "" {
		line("Rule", d.GetRuleId())
	}
	line("Approvers", strings.Join(d.GetApprovers(), ", "))
	line("Deadline", when(rec.GetDeadline().AsTime()))
	if cwd := c.GetCwd(); cwd != "" { // the agent's choice, where a relative path in the arguments takes effect
		line("Working dir", cwd)
	}
	if r := c.GetReason(); r != "" {
		b.WriteString("Agent's reason:\n")
		b.WriteString(quote(cut(inert(r), maxReasonBytes)))
	}
}

func footer(b *strings.Builder, rec *airlockv1.ApprovalRecord) {
	b.WriteString("\n-- \nairlock. The tool, reasons and arguments above were chosen by the agent and are shown as data\n(links and dotted names defanged, hxxps:// and [.], so none is clickable; the console shows them as\nwritten); nothing in this mail decides: decide signed in, in the console.\n")
	if d := rec.GetArgumentsDigest(); d != "" {
		fmt.Fprintf(b, "Arguments SHA-256: %s\n", d)
	}
}

// arguments are the call's arguments as indented JSON, redacted as the
// policy says, made visible, and cut to a bound.
func arguments(rec *airlockv1.ApprovalRecord) string {
	rec = calls.Showable(rec)
	args := calls.Redacted(rec.GetCall().GetArguments(), rec.GetDecision().GetRedact())
	if len(args) == 0 {
		return "(no arguments)\n"
	}
	var raw bytes.Buffer
	enc := json.NewEncoder(&raw)
	enc.SetEscapeHTML(false) // plain text: <, > and & read as themselves
	enc.SetIndent("", "  ")
	if err := enc.Encode(args); err != nil {
		return "(the arguments cannot be shown here: see the console)\n"
	}
	return cut(inert(strings.TrimRight(raw.String(), "\n")), maxArgumentBytes) + "\n"
}

// quote puts "> " before every line of s, as mail quotes another's words,
// so agent text cannot start a line of its own that reads as the mail's.
func quote(s string) string {
	s = strings.TrimRight(s, "\n")
	return "> " + strings.ReplaceAll(s, "\n", "\n> ") + "\n"
}

// inert is text someone else wrote as a mail body shows it: made visible
// (escape.Mail) and with its links defanged.
func inert(s string) string { return defang(escape.Mail(s)) }

// What a mail client may make clickable, found anywhere in a word: a
// client takes the scheme from the letters just before "://" whatever
// precedes them ("_https://", "1https://"), and links bare names whose
// last label is a top-level domain ("evil.example", "README.md"). So no
// pattern starts at a word boundary, and every dotted name is a host;
// the dots include those a browser reads as dots (。．｡).
var (
	schemeURL  = regexp.MustCompile(`(?i)([a-z][a-z0-9+.-]{0,30})://([^\s/?#\\"'<>]*)`)
	bareScheme = regexp.MustCompile(`(?i)(mailto|javascript|data|vbscript|file|tel|sms|callto|news):(\S)`)
	// Labels in any script: clients link internationalised names too
	// (пример.рф, 例え.jp).
	hostLike = regexp.MustCompile(`[\p{L}\p{N}_-]+(?:[.。．｡][\p{L}\p{N}_-]+)*[.。．｡]\p{L}[\p{L}\p{N}-]*`)
	hostDot  = regexp.MustCompile(`[.。．｡]`)
)

// defang rewrites the links in s so that no mail client makes them
// clickable ("https://evil.example/x" → "hxxps://evil[.]example/x",
// "www.evil.example" → "www[.]evil[.]example", "mailto:" → "mailto[:]",
// "evil.example/x" → "evil[.]example/x"): the links airlock writes (the
// console link, one-tap links) are the only links in its mails. A file
// name reads "notes[.]txt" there; the console shows it as written.
func defang(s string) string {
	s = schemeURL.ReplaceAllStringFunc(s, func(u string) string {
		m := schemeURL.FindStringSubmatch(u)
		scheme, host := m[1], hostDot.ReplaceAllString(m[2], "[.]")
		if len(scheme) >= 4 && strings.EqualFold(scheme[:4], "http") {
			return scheme[:1] + "xx" + scheme[3:] + "://" + host
		}
		return scheme + "[:]//" + host
	})
	s = bareScheme.ReplaceAllString(s, "$1[:]$2")
	return hostLike.ReplaceAllStringFunc(s, func(host string) string { return hostDot.ReplaceAllString(host, "[.]") })
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return calls.Cut(s, n) + fmt.Sprintf("\n… (cut at %d bytes of %d: the console shows everything)", n, len(s))
}

func when(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }
