package decide

import (
	"bytes"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
)

// matchFilter is a regular expression with a cheap necessary condition in
// front of it: the literals one of which every match contains (lower-cased,
// ASCII), found once when the rule is compiled. A string with none of them
// cannot match, so the regular expression is run only on strings that hold
// one — for a secret-shaped arguments_match, almost none. Go's backtracker
// on such an expression costs several microseconds per string, more than
// the rest of a decision.
type matchFilter struct {
	re *regexp.Regexp
	// lits: every match holds one of them, lower-cased; nil when the
	// expression has no such set (the filter then always runs re).
	lits [][]byte
}

// maxExactSet bounds the exact sets the analysis builds: a larger one is
// dropped (no longer exact) rather than grown.
const maxExactSet = 64

func newMatchFilter(re *regexp.Regexp) *matchFilter {
	f := &matchFilter{re: re}
	if p, err := syntax.Parse(re.String(), syntax.Perl); err == nil {
		if lits, ok := literalsOf(p.Simplify()).required(); ok {
			for _, l := range lits {
				// A literal holding another one is implied by it.
				if !slices.ContainsFunc(lits, func(o string) bool { return o != l && strings.Contains(l, o) }) {
					f.lits = append(f.lits, []byte(l))
				}
			}
		}
	}
	return f
}

// MatchString reports whether re matches s, exactly as re.MatchString.
func (f *matchFilter) MatchString(s string) bool {
	return f.mayMatch(s) && f.re.MatchString(s)
}

// mayMatch is false only when s cannot match: s is ASCII (so that ASCII
// lower-casing is exactly how (?i) folds it; (?i)s also matches ſ, for
// one) and holds none of the literals.
func (f *matchFilter) mayMatch(s string) bool {
	if f.lits == nil {
		return true
	}
	var buf [128]byte
	lower := buf[:0]
	if len(s) > len(buf) {
		lower = make([]byte, 0, len(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			return true
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower = append(lower, c)
	}
	for _, l := range f.lits {
		if bytes.Contains(lower, l) {
			return true
		}
	}
	return false
}

// literalInfo is what the analysis knows of a sub-expression, every string
// lower-cased: exact, when set, holds every string it can match (a finite,
// small set); req, when set, literals one of which each match contains.
type literalInfo struct {
	exact, req []string
	isExact    bool
	hasReq     bool
}

var (
	unknownLiterals = literalInfo{}
	emptyLiterals   = literalInfo{exact: []string{""}, isExact: true}
)

// required is a set one of whose literals every match holds, if there is
// one that is not trivially met (no empty literal).
func (i literalInfo) required() ([]string, bool) {
	if i.isExact && !slices.Contains(i.exact, "") {
		return i.exact, true
	}
	if i.hasReq && !slices.Contains(i.req, "") {
		return i.req, true
	}
	return nil, false
}

// better reports whether literal set a is the more selective one: its
// shortest literal is longer, or as long with fewer literals.
func better(a, b []string) bool {
	shortest := func(l []string) int {
		n := len(l[0])
		for _, s := range l[1:] {
			n = min(n, len(s))
		}
		return n
	}
	if sa, sb := shortest(a), shortest(b); sa != sb {
		return sa > sb
	}
	return len(a) < len(b)
}

// literalsOf analyses a simplified expression. Only ASCII literals and
// classes count: anything else is unknown, never assumed, so a string is
// never filtered out that the expression matches.
func literalsOf(re *syntax.Regexp) literalInfo {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return emptyLiterals
	case syntax.OpLiteral:
		b := make([]byte, 0, len(re.Rune))
		for _, r := range re.Rune {
			if r >= 0x80 {
				return unknownLiterals
			}
			b = append(b, byte(lowerASCII(r)))
		}
		return literalInfo{exact: []string{string(b)}, isExact: true}
	case syntax.OpCharClass:
		var set []string
		for k := 0; k+1 < len(re.Rune); k += 2 {
			lo, hi := re.Rune[k], re.Rune[k+1]
			if hi >= 0x80 || hi-lo >= maxExactSet {
				return unknownLiterals
			}
			for r := lo; r <= hi; r++ {
				set = append(set, string(rune(lowerASCII(r))))
			}
		}
		set = compact(set)
		if len(set) == 0 || len(set) > 8 {
			return unknownLiterals
		}
		return literalInfo{exact: set, isExact: true}
	case syntax.OpCapture:
		return literalsOf(re.Sub[0])
	case syntax.OpQuest:
		if sub := literalsOf(re.Sub[0]); sub.isExact {
			return literalInfo{exact: compact(append(slices.Clone(sub.exact), "")), isExact: true}
		}
		return unknownLiterals
	case syntax.OpPlus:
		if req, ok := literalsOf(re.Sub[0]).required(); ok {
			return literalInfo{req: req, hasReq: true}
		}
		return unknownLiterals
	case syntax.OpRepeat:
		if re.Min >= 1 {
			if req, ok := literalsOf(re.Sub[0]).required(); ok {
				return literalInfo{req: req, hasReq: true}
			}
		}
		return unknownLiterals
	case syntax.OpConcat:
		return concatLiterals(re.Sub)
	case syntax.OpAlternate:
		return alternateLiterals(re.Sub)
	}
	return unknownLiterals // any character, repetitions that may be empty
}

// concatLiterals joins runs of exact parts into their products and keeps
// the most selective set that some part, or run of parts, requires.
func concatLiterals(subs []*syntax.Regexp) literalInfo {
	var best []string
	consider := func(l []string, ok bool) {
		if ok && (best == nil || better(l, best)) {
			best = l
		}
	}
	run, exact := []string{""}, true
	for _, s := range subs {
		sub := literalsOf(s)
		if sub.isExact && len(run)*len(sub.exact) <= maxExactSet {
			run = product(run, sub.exact)
			continue
		}
		// The run ends here: what it requires is a candidate, and so is
		// what this part requires; the next run starts empty.
		consider(literalInfo{exact: run, isExact: true}.required())
		consider(sub.required())
		run, exact = []string{""}, false
	}
	if exact {
		return literalInfo{exact: run, isExact: true}
	}
	consider(literalInfo{exact: run, isExact: true}.required())
	if best == nil {
		return unknownLiterals
	}
	return literalInfo{req: best, hasReq: true}
}

// alternateLiterals is the union of the alternatives' sets: exact when
// every one is, else required when every one requires something.
func alternateLiterals(subs []*syntax.Regexp) literalInfo {
	var exact, req []string
	allExact, allReq := true, true
	for _, s := range subs {
		sub := literalsOf(s)
		if sub.isExact {
			exact = append(exact, sub.exact...)
		} else {
			allExact = false
		}
		if l, ok := sub.required(); ok {
			req = append(req, l...)
		} else {
			allReq = false
		}
	}
	if allExact && len(exact) <= maxExactSet {
		return literalInfo{exact: compact(exact), isExact: true}
	}
	if allReq {
		return literalInfo{req: compact(req), hasReq: true}
	}
	return unknownLiterals
}

func product(a, b []string) []string {
	out := make([]string, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			out = append(out, x+y)
		}
	}
	return compact(out)
}

func compact(l []string) []string {
	slices.Sort(l)
	return slices.Compact(l)
}

func lowerASCII(r rune) rune {
	if 'A' <= r && r <= 'Z' {
		return r + 'a' - 'A'
	}
	return r
}
