// Package preview is the one home of what a call's preview is made of
// outside the tools that compute it: its digest, its size bound, the
// precondition forms, the unified diff of a file the demo write_file
// computes, and the one-line summary every notification channel shows.
//
// A preview's text is agent-influenced (the arguments shape it, and the
// file it diffs against may be the agent's): it is bounded here and escaped
// by whoever shows it (services/shared/escape).
package preview

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/calls"
)

// Kinds of previews (Preview.kind).
const (
	KindDiff = "diff"
	KindText = "text"
)

// Absent is the precondition of a file that does not exist.
const Absent = "absent"

// None is what every surface shows for a call without a preview.
const None = "no preview"

// FileState is the precondition of a file: "sha256:<hex>" of its content,
// or Absent.
func FileState(content []byte, exists bool) string {
	if !exists {
		return Absent
	}
	sum := sha256.Sum256(content)
	return FileDigest(sum[:])
}

// FileDigest is FileState of an existing file whose content's SHA-256 is
// sum (for a caller that hashes the file as it streams it).
func FileDigest(sum []byte) string {
	return "sha256:" + hex.EncodeToString(sum)
}

// OfText is the precondition of a tool whose preview is its own account
// (a dry-run tool, a preview endpoint) and names no state of its own: the
// account must be the same when the call runs.
func OfText(text string) string {
	sum := sha256.Sum256([]byte(text))
	return "preview:" + hex.EncodeToString(sum[:])
}

// Digest is the digest of a preview, over its kind, text and precondition
// (length-prefixed, so no two previews share one).
func Digest(p *airlockv1.Preview) string {
	h := sha256.New()
	for _, part := range []string{"preview/v1", p.GetKind(), p.GetText(), p.GetPrecondition(), fmt.Sprint(p.GetTruncated())} {
		fmt.Fprintf(h, "%d:%s", len(part), part)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Finish bounds p's text to maxBytes (cut at a rune boundary, marked
// truncated), stamps it and sets its digest. It returns p.
func Finish(p *airlockv1.Preview, maxBytes int) *airlockv1.Preview {
	if maxBytes > 0 && len(p.Text) > maxBytes {
		p.Text, p.Truncated = calls.Cut(p.Text, maxBytes), true
	}
	if p.At == nil {
		p.At = timestamppb.Now()
	}
	p.Digest = Digest(p)
	return p
}

// Unavailable is the preview of a call that has none, saying why.
func Unavailable(why string) *airlockv1.Preview {
	return &airlockv1.Preview{Unavailable: why, At: timestamppb.Now()}
}

// Has reports whether p is a preview a reviewer can look at.
func Has(p *airlockv1.Preview) bool {
	return p != nil && p.GetUnavailable() == "" && p.GetDigest() != ""
}

// Summary is the one-line account of p that notifications show (the
// channel escapes it): the kind, the lines a diff adds and removes, the
// start of the digest, or None and why.
func Summary(p *airlockv1.Preview) string {
	if !Has(p) {
		if p.GetUnavailable() != "" {
			return None + " (" + p.GetUnavailable() + ")"
		}
		return None
	}
	var b strings.Builder
	if p.GetKind() == KindDiff && p.GetText() != "" {
		add, del := DiffStat(p.GetText())
		fmt.Fprintf(&b, "diff +%d −%d lines", add, del)
	} else {
		fmt.Fprintf(&b, "%s, %d bytes", p.GetKind(), len(p.GetText()))
	}
	if p.GetTruncated() {
		b.WriteString(" (cut)")
	}
	fmt.Fprintf(&b, ", digest %.12s", p.GetDigest())
	return b.String()
}

// EditedNote is what every surface adds to the summary of a call whose
// arguments a reviewer edited: its preview is of the agent's arguments.
const EditedNote = " (of the arguments the agent asked for: a reviewer edited them, and the edited ones run)"

// SummaryOf is Summary of rec's preview, saying so when a reviewer edited
// the arguments since it was made.
func SummaryOf(rec *airlockv1.ApprovalRecord) string {
	s := Summary(rec.GetPreview())
	if rec.GetEditedArguments() != nil && Has(rec.GetPreview()) {
		s += EditedNote
	}
	return s
}

// Excerpt is the start of p's text for a notification: at most lines
// lines and maxBytes bytes, "" when there is no preview.
func Excerpt(p *airlockv1.Preview, lines, maxBytes int) string {
	if !Has(p) {
		return ""
	}
	text := p.GetText()
	more := false
	if ls := strings.SplitAfter(text, "\n"); len(ls) > lines {
		text, more = strings.Join(ls[:lines], ""), true
	}
	if len(text) > maxBytes {
		text, more = calls.Cut(text, maxBytes), true
	}
	if more || p.GetTruncated() {
		text = strings.TrimSuffix(text, "\n") + "\n…"
	}
	return strings.TrimSuffix(text, "\n")
}

// Notified is what a notification (Slack, Teams, mail) shows of rec's
// preview, before its channel escapes it: the summary, and an excerpt of
// at most ExcerptLines lines and ExcerptBytes bytes — none when the policy
// redacts any of the call's arguments, since the preview may show them;
// nor then why there is no preview, since a tool's error may quote them.
func Notified(rec *airlockv1.ApprovalRecord) (summary, excerpt string) {
	summary = SummaryOf(rec)
	if len(rec.GetDecision().GetRedact()) > 0 {
		if Has(rec.GetPreview()) {
			summary += " (withheld here: the policy redacts this call's arguments; open the console)"
		} else if rec.GetPreview().GetUnavailable() != "" {
			summary = None + " (why is withheld here: the policy redacts this call's arguments; open the console)"
		}
		return summary, ""
	}
	return summary, Excerpt(rec.GetPreview(), ExcerptLines, ExcerptBytes)
}

// Bounds of a notification's excerpt of a preview.
const (
	ExcerptLines = 12
	ExcerptBytes = 800
)

// DiffStat counts the lines a unified diff adds and removes.
func DiffStat(diff string) (added, removed int) {
	for _, l := range DiffLines(diff) {
		switch l.Op {
		case "+":
			added++
		case "-":
			removed++
		}
	}
	return added, removed
}

// Bound is s cut to at most n bytes at a rune boundary, marked with "…" when cut.
func Bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return calls.Cut(s, n) + "…"
}
