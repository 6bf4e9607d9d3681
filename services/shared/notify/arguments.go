package notify

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/escape"
)

// Limits of an argument summary: they keep a Slack card inside its block
// limits (section text 3000 characters) and a Teams card readable,
// whatever an agent sends.
const (
	maxValueChars    = 400  // one argument value
	maxKeyChars      = 40   // one argument name
	maxArguments     = 15   // arguments listed before "and N more"
	maxSummaryChars  = 2600 // the whole summary
	argumentsMissing = "(no arguments)"
)

// RememberURL is the console's form that makes a standing grant from a
// call revision: the decision remembered for calls like it.
func RememberURL(publicURL, agent, callID string, rev uint32) string {
	q := url.Values{"agent": {agent}, "from": {callID}, "rev": {fmt.Sprint(max(rev, 1))}}
	return strings.TrimRight(publicURL, "/") + "/grants/new?" + q.Encode()
}

// ArgumentLines lists the call's arguments one per line as "key: value"
// with values in compact JSON, keys that are not plain words quoted (an
// argument name cannot draw other lines), long values shortened, paths the
// policy redacts masked, and the whole bounded in size; whole reports
// whether it shows every argument in full (none left out for size, no name
// or value cut short). Only a whole summary may be approved where it is
// shown (a Slack or Teams card): an agent that adds arguments until the
// one that matters is cut off must not get a click on what the reviewer
// never saw. The text is plain; each channel escapes it for its markup.
func ArgumentLines(rec *airlockv1.ApprovalRecord) (string, bool) {
	args := calls.Redacted(rec.GetCall().GetArguments(), rec.GetDecision().GetRedact())
	if len(args) == 0 {
		return argumentsMissing, true
	}
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	whole := true
	for i, k := range keys {
		name, nameWhole := keyText(k)
		value, valueWhole := valueText(args[k])
		line := name + ": " + value
		if i == maxArguments || b.Len()+len(line) > maxSummaryChars {
			fmt.Fprintf(&b, "… and %d more arguments: approve in the console, where every argument is shown", len(keys)-i)
			return b.String(), false
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(line)
		whole = whole && nameWhole && valueWhole
	}
	if !whole {
		b.WriteString("\n(cut short above: approve in the console, where every argument is shown in full)")
	}
	return b.String(), whole
}

// keyText is an argument name as a card shows it: a plain word as it is,
// anything else (spaces, line breaks, quotes, colons) quoted; whole is
// false when it had to be cut.
func keyText(k string) (text string, whole bool) {
	if plainKey.MatchString(k) {
		return k, true
	}
	short := calls.Shorten(k, maxKeyChars)
	return strconv.Quote(short), short == k
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_.\-]{1,40}$`)

// valueText is an argument value as a card shows it: a string quoted,
// anything else as JSON, cut after maxValueChars (whole is then false).
func valueText(v any) (text string, whole bool) {
	var s string
	if str, ok := v.(string); ok {
		s = strconv.Quote(str)
	} else {
		raw, err := json.Marshal(v)
		if err != nil {
			raw = []byte(fmt.Sprint(v))
		}
		s = escape.Visible(string(raw)) // JSON keeps bidi overrides and zero-width spaces raw; the size is that of what is shown
	}
	n := utf8.RuneCountInString(s)
	if n <= maxValueChars {
		return s, true
	}
	return string([]rune(s)[:maxValueChars]) + fmt.Sprintf("… (%d characters)", n), false
}

// ArgumentsFit reports whether ArgumentLines shows every argument of rec
// in full: only then may rec be approved where the summary is shown.
func ArgumentsFit(rec *airlockv1.ApprovalRecord) bool {
	_, whole := ArgumentLines(rec)
	return whole
}
