package decide

import (
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"

	"github.com/gobwas/glob"
)

// matchFilter is a regular expression with a cheap necessary condition in
// front of it (literalFilter). Go's backtracker on a secret-shaped
// arguments_match costs several microseconds per string, more than the
// rest of a decision; the filter lets almost every ordinary argument pass
// without it.
type matchFilter struct {
	re   *regexp.Regexp
	lits literalFilter
}

func newMatchFilter(re *regexp.Regexp) *matchFilter {
	return &matchFilter{re: re, lits: literalFilterOf(re.String())}
}

// MatchString reports whether re matches s, exactly as re.MatchString.
func (f *matchFilter) MatchString(s string) bool {
	return f.lits.mayMatch(s) && f.re.MatchString(s)
}

// globFilter is a glob with the same necessary condition in front of it:
// a tool-name glob such as {*fetch*,*http*,...}__* walks every alternative
// of its tree before it fails, on every call.
type globFilter struct {
	g    *glob.Pattern
	lits literalFilter
}

func newGlobFilter(g *glob.Pattern) *globFilter {
	f := &globFilter{g: g}
	if re, ok := globRegexp(g.String()); ok {
		f.lits = literalFilterOf(re)
	}
	return f
}

// Match reports whether the glob matches s, exactly as g.Match.
func (f *globFilter) Match(s string) bool { return f.lits.mayMatch(s) && f.g.Match(s) }

// globRegexp is a regular expression matching every string glob matches
// (and maybe more: a class is any character, a star crosses separators),
// for finding the literals every match holds; false for a glob it does
// not read.
func globRegexp(pattern string) (string, bool) {
	var b strings.Builder
	b.WriteString("(?s)^")
	depth := 0
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; c {
		case '\\':
			if i++; i == len(pattern) {
				return "", false
			}
			b.WriteString(regexp.QuoteMeta(pattern[i : i+1]))
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		case '[':
			end := strings.IndexByte(pattern[i+1:], ']')
			// A class ending in '-' is a range whose end may be the ']'
			// found ([A-]] is A to ]): not read, so no filter.
			if end <= 0 || strings.ContainsAny(pattern[i+1:i+1+end], `\[`) || pattern[i+1:i+1+end] == "!" || strings.HasSuffix(pattern[i+1:i+1+end], "-") {
				return "", false
			}
			b.WriteString(".")
			i += 1 + end
		case '{':
			depth++
			b.WriteString("(?:")
		case '}':
			if depth == 0 {
				return "", false
			}
			depth--
			b.WriteString(")")
		case ',':
			if depth == 0 {
				b.WriteString(",")
			} else {
				b.WriteString("|")
			}
		default:
			b.WriteString(regexp.QuoteMeta(pattern[i : i+1]))
		}
	}
	if depth != 0 {
		return "", false
	}
	b.WriteString("$")
	return b.String(), true
}

// literalFilter holds sets of literals (lower-cased, ASCII), found once
// from an expression's syntax, such that every match contains a literal of
// each set. A string missing every literal of some set cannot match. The
// zero value lets every string through.
type literalFilter struct {
	sets []literalSet
}

type literalSet struct {
	// lits, sorted: those starting with byte c are
	// lits[starts[c]:starts[c+1]].
	lits   [][]byte
	starts *[257]uint16
}

func newLiteralSet(lits []string) literalSet {
	var set literalSet
	for _, l := range compact(slices.Clone(lits)) {
		// A literal holding another one is implied by it.
		if !slices.ContainsFunc(lits, func(o string) bool { return o != l && strings.Contains(l, o) }) {
			set.lits = append(set.lits, []byte(l))
		}
	}
	set.starts = new([257]uint16)
	for c := range 256 {
		set.starts[c+1] = set.starts[c]
		for _, l := range set.lits {
			if int(l[0]) == c {
				set.starts[c+1]++
			}
		}
	}
	return set
}

// maxRequiredSets bounds how many sets a filter checks: the most
// selective ones are enough.
const maxRequiredSets = 3

// literalFilterOf analyses a regular expression (Perl syntax); one it
// cannot parse, or whose matches need no literal, gets the zero filter.
func literalFilterOf(expr string) literalFilter {
	var f literalFilter
	p, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return f
	}
	sets := literalsOf(p.Simplify()).required()
	slices.SortStableFunc(sets, func(a, b []string) int {
		if better(a, b) {
			return -1
		}
		if better(b, a) {
			return 1
		}
		return 0
	})
	for _, lits := range sets[:min(len(sets), maxRequiredSets)] {
		f.sets = append(f.sets, newLiteralSet(lits))
	}
	return f
}

// mayMatch is false only when s cannot match: s is ASCII (so that ASCII
// lower-casing is exactly how (?i) folds it; (?i)s also matches ſ, for
// one) and lacks every literal of some set.
func (f *literalFilter) mayMatch(s string) bool {
	for k := range f.sets {
		if !f.sets[k].mayHold(s) {
			return false
		}
	}
	return true
}

// mayHold reports whether s, lower-cased, holds one of the set's literals,
// or is not ASCII.
func (set *literalSet) mayHold(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			return true
		}
		c = lowerByte(c)
		for _, l := range set.lits[set.starts[c]:set.starts[c+1]] {
			if hasLowerPrefix(s[i:], l) {
				return true
			}
		}
	}
	return false
}

// hasLowerPrefix reports whether s, ASCII lower-cased, starts with l.
func hasLowerPrefix(s string, l []byte) bool {
	if len(s) < len(l) {
		return false
	}
	for j, b := range l {
		if lowerByte(s[j]) != b {
			return false
		}
	}
	return true
}

func lowerByte(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// maxExactSet bounds the exact sets the analysis builds: a larger one is
// dropped (no longer exact) rather than grown.
const maxExactSet = 64

// maxRequiredSet bounds a set of required literals (a union of
// alternatives'): beyond it the set says too little to be worth checking.
const maxRequiredSet = 1024

// literalInfo is what the analysis knows of a sub-expression, every string
// lower-cased: exact, when isExact, holds every string it can match (a
// finite, small set); req are sets such that each match contains a
// literal of every one.
type literalInfo struct {
	exact   []string
	isExact bool
	req     [][]string
}

var (
	unknownLiterals = literalInfo{}
	emptyLiterals   = literalInfo{exact: []string{""}, isExact: true}
)

// required are the sets every match holds a literal of, leaving out the
// ones trivially met (holding the empty literal).
func (i literalInfo) required() [][]string {
	if i.isExact && !slices.Contains(i.exact, "") {
		return [][]string{i.exact}
	}
	var out [][]string
	for _, set := range i.req {
		if len(set) > 0 && !slices.Contains(set, "") {
			out = append(out, set)
		}
	}
	return out
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

// best is the most selective of sets (nil for none).
func best(sets [][]string) []string {
	var b []string
	for _, s := range sets {
		if b == nil || better(s, b) {
			b = s
		}
	}
	return b
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
		return literalInfo{req: literalsOf(re.Sub[0]).required()}
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return literalInfo{req: literalsOf(re.Sub[0]).required()}
		}
		return unknownLiterals
	case syntax.OpConcat:
		return concatLiterals(re.Sub)
	case syntax.OpAlternate:
		return alternateLiterals(re.Sub)
	}
	return unknownLiterals // any character, repetitions that may be empty
}

// concatLiterals joins runs of exact parts into their products; what each
// run and each other part requires, every match requires.
func concatLiterals(subs []*syntax.Regexp) literalInfo {
	var req [][]string
	run, exact := []string{""}, true
	for _, s := range subs {
		sub := literalsOf(s)
		if sub.isExact && len(run)*len(sub.exact) <= maxExactSet {
			run = product(run, sub.exact)
			continue
		}
		// The run ends here; the next one starts empty.
		req = append(req, literalInfo{exact: run, isExact: true}.required()...)
		req = append(req, sub.required()...)
		run, exact = []string{""}, false
	}
	if exact {
		return literalInfo{exact: run, isExact: true}
	}
	req = append(req, literalInfo{exact: run, isExact: true}.required()...)
	return literalInfo{req: req}
}

// alternateLiterals is the union of the alternatives' sets: exact when
// every one is, else the union of each one's most selective required set
// when every one requires something.
func alternateLiterals(subs []*syntax.Regexp) literalInfo {
	var exact, req []string
	allExact, allRequire := true, true
	for _, s := range subs {
		sub := literalsOf(s)
		if sub.isExact {
			exact = append(exact, sub.exact...)
		} else {
			allExact = false
		}
		if b := best(sub.required()); b != nil {
			req = append(req, b...)
		} else {
			allRequire = false
		}
	}
	switch {
	case allExact && len(exact) <= maxExactSet:
		return literalInfo{exact: compact(exact), isExact: true}
	case allRequire && len(req) <= maxRequiredSet:
		return literalInfo{req: [][]string{compact(req)}}
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
