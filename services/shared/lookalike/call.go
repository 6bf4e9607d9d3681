package lookalike

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/calls"
)

// MaxWarnings bounds the look-alike warnings a surface shows for
// one call; past it one line says how many more there are, so an agent
// cannot bury a card or page under them.
const MaxWarnings = 5

// maxLookAlikeChars bounds how much of a look-alike name a warning quotes:
// the value itself is shown in full where it stands.
const maxLookAlikeChars = 80

// Prefix starts every warning of a name with letters, digits or marks
// that pass for others (Name.Characters).
const Prefix = "Look-alike letters: "

// LeadsElsewhere starts every warning of a name in ASCII that reads as
// leading to a host or domain it does not lead to: it holds no look-alike
// letter, and a reviewer told of one would look for it in vain (R10 F4).
const LeadsElsewhere = "Leads elsewhere: "

// Heading is what starts l's warning: Prefix, or LeadsElsewhere for a
// name with no look-alike character.
func (l Name) Heading() string {
	if len(l.Characters) == 0 {
		return LeadsElsewhere
	}
	return Prefix
}

// InCall is Find over everything of c a reviewer reads — its agent, the
// person it acts for, server and tool, thread, each argument's name and
// string value, its working directory and its reason — each name once.
// What the call does comes first: the names of its identity and
// arguments, then of its working directory, then of its reason; within
// each, addresses, hosts and e-mail addresses before paths and other
// names. So decoys the agent writes in its working directory or reason,
// or paths beside a spoofed host, cannot take the warnings' places
// (MaxWarnings, a phone's one line) from a spoofed host in its arguments.
// redact is the decision's redact, for a surface that shows the arguments
// redacted (calls.Redacted): a value it hides is not quoted in a warning
// either; nil for one that shows them all.
func InCall(c *airlockv1.ToolCall, redact []string) []Name {
	texts := []string{c.GetAgentId(), c.GetOnBehalfOf(), calls.ToolName(c.GetServer(), c.GetTool()), c.GetThreadId()}
	// Arguments walked with a stack, not recursion: their depth is the
	// agent's choice.
	stack := []any{calls.Redacted(c.GetArguments(), redact)}
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		switch v := v.(type) {
		case map[string]any:
			names := slices.Sorted(maps.Keys(v))
			texts = append(texts, names...)
			for _, name := range slices.Backward(names) {
				stack = append(stack, v[name])
			}
		case []any:
			for _, e := range slices.Backward(v) {
				stack = append(stack, e)
			}
		case string:
			texts = append(texts, v)
		}
	}
	// Within a place, a name with letters that pass for others comes
	// before one that only leads elsewhere in ASCII: ordinary logs hold
	// many CDN and hosting names the ASCII rules flag (R10 F2), which must
	// not take the bounded lines from a spoofed host.
	type ranked struct {
		l                  Name
		place, ascii, kind int
	}
	var found []ranked
	seen := map[string]bool{}
	for place, group := range [][]string{texts, {c.GetCwd()}, {c.GetReason()}} {
		for _, t := range group {
			for _, l := range Find(t) {
				if !seen[l.Text] {
					seen[l.Text] = true
					ascii := 0
					if len(l.Characters) == 0 {
						ascii = 1
					}
					found = append(found, ranked{l, place, ascii, kindRank(l.Kind)})
				}
			}
		}
	}
	slices.SortStableFunc(found, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(a.place, b.place), cmp.Compare(a.ascii, b.ascii), cmp.Compare(a.kind, b.kind))
	})
	out := make([]Name, len(found))
	for i, r := range found {
		out[i] = r.l
	}
	return out
}

// kindRank orders look-alikes by kind: what a call reaches (an address, a
// host, an e-mail address) before paths and other names.
func kindRank(kind string) int {
	switch kind {
	case "address", "host", "e-mail address":
		return 0
	case "path":
		return 1
	}
	return 2
}

// moreLine is the last warning line, for the names past MaxWarnings.
func moreLine(rest []Name) string {
	letters, leads := 0, 0
	for _, l := range rest {
		if len(l.Characters) > 0 {
			letters++
		} else {
			leads++
		}
	}
	switch {
	case leads == 0:
		return fmt.Sprintf("%s%d more names hold letters or digits that pass for Latin ones.", Prefix, letters)
	case letters == 0:
		return fmt.Sprintf("%s%d more names lead to hosts or domains other than they read as.", LeadsElsewhere, leads)
	}
	return fmt.Sprintf("%s%d more names hold letters or digits that pass for Latin ones, and %d lead to hosts or domains other than they read as.", Prefix, letters, leads)
}

// Warnings are the lines every surface shows for a call whose
// words hold look-alike letters or lead elsewhere (InCall): one per name,
// "Look-alike letters: the host pаypal.com mixes Latin and Cyrillic
// letters: а (U+0430 CYRILLIC SMALL LETTER A) looks like a; in ASCII its
// host is xn--pypal-4ve.com", "Leads elsewhere: the address
// https://paypal.com@evil.example/ leads to the host evil.example: …"
// (Name.Heading, Name.Warning), the agent's words shown
// by esc, the medium's escape for them (a long name shortened); at most
// MaxWarnings, then one line saying how many more; none for a
// call with none. redact is as for InCall.
func Warnings(c *airlockv1.ToolCall, redact []string, esc func(string) string) []string {
	found := InCall(c, redact)
	short := func(s string) string { return esc(calls.Shorten(s, maxLookAlikeChars)) }
	var lines []string
	for i, l := range found {
		if i == MaxWarnings {
			lines = append(lines, moreLine(found[i:]))
			break
		}
		lines = append(lines, l.Heading()+l.Warning(short))
	}
	return lines
}
