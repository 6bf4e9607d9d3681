package decide

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/gobwas/glob"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/open-policy-agent/opa/v1/types"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/calls"
)

// The built-in functions the generated module calls. They exist only in
// airlock's evaluator; a policy run elsewhere (opa test, opa eval) never
// loads the generated module and decides with the plain rules instead.
// Their names are one word: topdown spells a dotted name that is not one
// of OPA's own into a new string on every call.
const (
	builtinHits     = "airlock_rule_hits"
	builtinDecision = "airlock_rules_decision"
)

// rule is one entry of data.airlock.rules, compiled for matching in Go
// exactly as airlock.rego's plain path matches it: every condition the rule
// sets must hold ("*" or absent is any).
type rule struct {
	server, tool, agent string // "*" = any
	toolGlob, nameGlob  *globFilter
	// First literal characters of the globs, for the index ("" = none).
	toolInitial, nameInitial string
	// The names a pattern lists exactly ("{claude__Bash,codex__Bash}"),
	// matched instead of its glob (nameGlob is then nil), and their tools,
	// for the index; nil for any other pattern.
	names     map[string]bool
	nameTools []string
	args      []argCond
	commands  []commandCond
	// named, for an allow rule whose conditions test arguments, are the
	// only top-level arguments a call may have (airlock.rego's
	// only_named_arguments); nil lets any through.
	named map[string]bool
	// argumentsMatch, when set, must match some string of the arguments
	// (airlock.rego's arguments_match).
	argumentsMatch *matchFilter
	// notMatching: the rule matches only when some string at one of these
	// pointers falls outside its expression (airlock.rego's
	// arguments_not_matching).
	notMatching []namedArgCond
	// matching: the rule matches only when some string at one of these
	// pointers matches its expression (airlock.rego's arguments_matching).
	matching []namedArgCond
	// annotations must hold as airlock.rego's annotation_holds reads them;
	// trustedOnly (an allow rule's) believes only trusted annotations.
	annotations map[string]bool
	trustedOnly bool
	anyWord     bool
	words       map[string]bool
	// principals, when set, are the people whose verified calls the rule
	// applies to; everyone else's matching calls hit its refusal instead
	// (airlock.rego's hit).
	principals []string
}

// outcome is one entry airlock.rego's hits may hold: a rule's own, or the
// refusal of a rule that names principals.
type outcome struct {
	// Ordering, as airlock.rego's entry: deny entries (class 0) first, then
	// priority, then index.
	class    int
	priority float64
	rank     int
	redact   []string

	// entry is the hits entry, solo the decision when it matches alone
	// (entry's fifth element) and verdict its part of a decision.
	entry, solo *ast.Term
	verdict     ast.Object
}

// argCond is one argument condition: the JSON pointer's tokens and the glob
// the string they point at must match (airlock.rego's arg_matches).
type argCond struct {
	path []string
	glob *glob.Pattern
	// allow: an allow rule's condition, which only a clean value not
	// ending in a separator (the directory itself) meets; an ask or deny
	// rule's also meets any spelling of a path its glob matches.
	allow bool
}

func newArgCond(ptr, pattern, effect string) (argCond, error) {
	g, err := compileGlob(pattern, []rune{'/'})
	if err != nil {
		return argCond{}, err
	}
	return argCond{path: pointerPath(ptr), glob: g, allow: effect == "allow"}, nil
}

// pointerPath is a JSON pointer's tokens (airlock.rego's pointer).
func pointerPath(ptr string) []string { return calls.PointerTokens(ptr) }

// stringAt is the string argument at path (object.get(input.call.arguments,
// path, null) that is_string), false when there is none. Its tokens are
// object keys: object.get reads no array by a string key.
func stringAt(args any, path []string) (string, bool) {
	v, ok := valueAt(args, path)
	s, isString := v.(string)
	return s, ok && isString
}

// valueAt is the value at path through nested objects (object.get with a
// path, as airlock.rego reads an argument).
func valueAt(args any, path []string) (any, bool) {
	cur := args
	for _, k := range path {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = obj[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// commandCond is one command condition (airlock.rego's command_matches):
// the shell command at the pointer, split into its parts, matched part by
// part with a glob that has no separators. every is the allow form: every
// part must match and the command may hold no substitution or redirection;
// otherwise (ask, deny) one matching part is enough.
type commandCond struct {
	path  []string
	glob  *glob.Pattern
	every bool
}

func newCommandCond(ptr, pattern, effect string) (commandCond, error) {
	g, err := compileGlob(pattern, nil)
	if err != nil {
		return commandCond{}, err
	}
	return commandCond{path: pointerPath(ptr), glob: g, every: effect == "allow"}, nil
}

// The expressions of airlock.rego's command_matches and command_parts, the
// same text, which OPA runs with Go's regexp too.
var (
	commandUnsafe    = regexp.MustCompile(`[<>\x60$'"\\{*?[]`)
	commandRunsMore  = regexp.MustCompile(`(^|\s)` + calls.RunsMore)
	commandOperators = regexp.MustCompile(`&&|\|\||\$\(|[;&|\n()\x60]`)
	commandBlanks    = regexp.MustCompile(`\s+`)
	commandQuotes    = regexp.MustCompile(`["'\\]`)
)

// commandParts is airlock.rego's command_parts: the command split at its
// operators, each part trimmed with its runs of blanks made one space,
// empty parts dropped.
func commandParts(cmd string) []string {
	var parts []string
	for _, s := range commandOperators.Split(cmd, -1) {
		if p := commandBlanks.ReplaceAllString(strings.TrimSpace(s), " "); p != "" {
			parts = append(parts, p)
		}
	}
	return parts
}

func (c commandCond) matches(args any) bool {
	s, ok := stringAt(args, c.path)
	if !ok {
		return false
	}
	if !c.every {
		return slices.ContainsFunc(commandParts(commandQuotes.ReplaceAllString(s, "")), c.glob.Match)
	}
	if commandUnsafe.MatchString(s) || commandRunsMore.MatchString(s) {
		return false
	}
	parts := commandParts(s)
	return len(parts) > 0 && !slices.ContainsFunc(parts, func(p string) bool { return !c.glob.Match(p) })
}

// literalNames returns the exact qualified names a pattern lists — "a__b"
// or "{a__b,c__d}", no wildcards, each name split unambiguously at one
// "__" — or false for any other pattern.
func literalNames(g string) ([]string, bool) {
	names := []string{g}
	if strings.HasPrefix(g, "{") && strings.HasSuffix(g, "}") {
		names = strings.Split(g[1:len(g)-1], ",")
	}
	if strings.ContainsAny(strings.Join(names, ""), `*?[]{}\`) {
		return nil, false
	}
	for _, n := range names {
		if strings.Count(n, "__") != 1 || strings.Contains(n, "___") ||
			strings.HasPrefix(n, "__") || strings.HasSuffix(n, "__") {
			return nil, false
		}
	}
	return names, true
}

// compileGlobOrAny compiles a glob with its literal filter; "*" (which
// matches everything when there are no separators) is nil, so matching
// skips it.
func compileGlobOrAny(pattern string, sep []rune) (*globFilter, error) {
	if pattern == "*" && len(sep) == 0 {
		return nil, nil
	}
	g, err := compileGlob(pattern, sep)
	if err != nil {
		return nil, err
	}
	return newGlobFilter(g), nil
}

// ruleSet is data.airlock.rules compiled for the built-in functions, with an
// index that, like OPA's rule index over the plain rules, leaves out the
// rules whose exact tool, server, words, glob initial or agent cannot match,
// so a call's cost does not grow with the number of rules.
type ruleSet struct {
	rules []rule
	// outcomes are indexed as airlock.rego's hits entries: rule i's own at
	// i, its refusal (a rule naming principals) at n + i, n being the
	// number of rules.
	outcomes []outcome
	n        int32
	// Each rule is filed under the most selective condition it sets.
	byTool, byServer, byWord, byToolInitial, byNameInitial, byAgent map[string][]int32
	always                                                          []int32
	// bound: an agent with a profile binding (or "*" bound) is decided by
	// airlock.rego's general path, profiles included.
	bindings map[string]bool
	anyBound bool

	// combined caches the decisions of sets of up to four entries matching
	// together; a decision depends only on which entries match.
	mu       sync.RWMutex
	combined map[[4]int32]*ast.Term
	// decoded holds the decision documents rs makes (each outcome's solo,
	// each combined one), read as decisionFromValue reads them, so that a
	// decision the policy passes through unchanged is not read again.
	// Guarded by mu.
	decoded map[ast.Value]*airlockv1.Decision
}

// newRuleSet makes the set for n rules.
func newRuleSet(bindings any, n int) *ruleSet {
	rs := &ruleSet{
		rules: make([]rule, 0, n), outcomes: make([]outcome, 2*n), n: int32(n),
		byTool: map[string][]int32{}, byServer: map[string][]int32{}, byWord: map[string][]int32{},
		byToolInitial: map[string][]int32{}, byNameInitial: map[string][]int32{}, byAgent: map[string][]int32{},
		bindings: map[string]bool{}, combined: map[[4]int32]*ast.Term{},
		decoded: map[ast.Value]*airlockv1.Decision{},
	}
	b, _ := bindings.(map[string]any)
	for agent, profile := range b {
		// profile_name := data.airlock.bindings[agent] holds for any value but false.
		if profile != false {
			rs.bindings[agent] = true
		}
	}
	rs.anyBound = rs.bindings["*"]
	return rs
}

// add files the next rule, with its own outcome and its refusal (the
// zero outcome for a rule naming no principals).
func (rs *ruleSet) add(r rule, own, refusal outcome) {
	i := int32(len(rs.rules))
	rs.rules = append(rs.rules, r)
	rs.outcomes[i], rs.outcomes[rs.n+i] = own, refusal
	for _, o := range []outcome{own, refusal} {
		if o.solo != nil {
			rs.remember(o.solo)
		}
	}
	switch {
	case r.tool != "*":
		rs.byTool[r.tool] = append(rs.byTool[r.tool], i)
	case len(r.nameTools) > 0:
		for _, t := range r.nameTools {
			rs.byTool[t] = append(rs.byTool[t], i)
		}
	case r.server != "*":
		rs.byServer[r.server] = append(rs.byServer[r.server], i)
	case !r.anyWord:
		for w := range r.words {
			rs.byWord[w] = append(rs.byWord[w], i)
		}
		// An empty list matches no tool: the rule is filed nowhere.
	case r.toolInitial != "":
		rs.byToolInitial[r.toolInitial] = append(rs.byToolInitial[r.toolInitial], i)
	case r.nameInitial != "":
		rs.byNameInitial[r.nameInitial] = append(rs.byNameInitial[r.nameInitial], i)
	case r.agent != "*":
		rs.byAgent[r.agent] = append(rs.byAgent[r.agent], i)
	default:
		rs.always = append(rs.always, i)
	}
}

// callView is what matching reads of input.call: arguments and
// annotations as Go values (see nativeStruct), nil when absent.
type callView struct {
	agent, server, tool string
	// name is server__tool, made when a rule first needs it (qualified);
	// "" until then (a made name holds at least "__").
	name               string
	onBehalfOf         string
	verified           bool
	args               any
	annotations        map[string]any
	annotationsTrusted bool
	// decision is decisionTerm's answer, once decided: an evaluation asks
	// before topdown runs (Evaluator.compiledDecides) and again in it.
	decision *ast.Term
	decided  bool
}

// viewOf reads what matching needs out of an input.call given as AST (keys
// from input.go); an evaluation's own call has its view already (callInput).
func viewOf(t *ast.Term) (callView, error) {
	obj, ok := t.Value.(ast.Object)
	if !ok {
		return callView{}, fmt.Errorf("input.call must be an object")
	}
	str := func(k *ast.Term) (string, error) {
		v := obj.Get(k)
		if v == nil {
			return "", nil // as an absent field never equals a rule's value
		}
		s, ok := v.Value.(ast.String)
		if !ok {
			return "", fmt.Errorf("input.call.%s must be a string", k.Value.(ast.String))
		}
		return string(s), nil
	}
	var c callView
	var err error
	if c.agent, err = str(keyAgentID); err != nil {
		return c, err
	}
	if c.server, err = str(keyServer); err != nil {
		return c, err
	}
	if c.tool, err = str(keyTool); err != nil {
		return c, err
	}
	if c.onBehalfOf, err = str(keyOnBehalfOf); err != nil {
		return c, err
	}
	// principal_allowed reads on_behalf_of_verified == true.
	if v := obj.Get(keyVerified); v != nil {
		b, _ := v.Value.(ast.Boolean)
		c.verified = bool(b)
	}
	if a := obj.Get(keyArguments); a != nil {
		if c.args, err = nativeOf(a.Value); err != nil {
			return c, fmt.Errorf("input.call.arguments: %w", err)
		}
	}
	if a := obj.Get(keyAnnots); a != nil {
		ann, err := nativeOf(a.Value)
		if err != nil {
			return c, fmt.Errorf("input.call.annotations: %w", err)
		}
		c.annotations, _ = ann.(map[string]any)
	}
	if v := obj.Get(keyAnnTrusted); v != nil {
		b, _ := v.Value.(ast.Boolean)
		c.annotationsTrusted = bool(b)
	}
	return c, nil
}

// qualified is c's server__tool (airlock.rego's name).
func (c *callView) qualified() string {
	if c.name == "" {
		c.name = c.server + "__" + c.tool
	}
	return c.name
}

// nameInitial is initial(c.qualified()) without making the name.
func nameInitial(c *callView) string {
	if c.server == "" {
		return "_"
	}
	return initial(c.server)
}

// matches reports whether r matches c (airlock.rego's hits body).
func (r *rule) matches(c *callView) bool {
	if r.server != "*" && r.server != c.server || r.tool != "*" && r.tool != c.tool || r.agent != "*" && r.agent != c.agent {
		return false
	}
	if !r.anyWord && !r.anyWordOf(c.tool) {
		return false
	}
	if r.toolGlob != nil && !r.toolGlob.Match(c.tool) || r.nameGlob != nil && !r.nameGlob.Match(c.qualified()) {
		return false
	}
	if r.names != nil && !r.names[c.qualified()] {
		return false
	}
	for _, a := range r.args {
		if !a.matches(c.args) {
			return false
		}
	}
	for _, cmd := range r.commands {
		if !cmd.matches(c.args) {
			return false
		}
	}
	if r.named != nil {
		obj, _ := c.args.(map[string]any)
		for k := range obj {
			if !r.named[k] {
				return false
			}
		}
	}
	if r.argumentsMatch != nil && !anyString(c.args, r.argumentsMatch.MatchString) {
		return false
	}
	if len(r.notMatching) > 0 && !slices.ContainsFunc(r.notMatching, func(n namedArgCond) bool { return n.holds(c.args) }) {
		return false
	}
	if len(r.matching) > 0 && !slices.ContainsFunc(r.matching, func(n namedArgCond) bool { return n.holds(c.args) }) {
		return false
	}
	for k, want := range r.annotations {
		if r.trustedOnly && !c.annotationsTrusted || c.annotations == nil {
			return false
		}
		if b, ok := c.annotations[k].(bool); !ok || b != want {
			return false
		}
	}
	return true
}

// namedArgCond is one entry of arguments_not_matching or
// arguments_matching: the pointer's tokens and the test a string there must
// pass (outside the expression, or matching it).
type namedArgCond struct {
	ptr  []string
	test func(string) bool
}

// holds reports whether the argument at the pointer is a string, or a list
// holding a string, that passes the test (airlock.rego's strings_of): an
// absent argument never does.
func (n namedArgCond) holds(args any) bool {
	v, ok := valueAt(args, n.ptr)
	if !ok {
		return false
	}
	switch x := v.(type) {
	case string:
		return n.test(x)
	case []any:
		return slices.ContainsFunc(x, func(e any) bool { s, ok := e.(string); return ok && n.test(s) })
	}
	return false
}

// anyString reports whether f holds for some string in v, at any depth
// (the values airlock.rego's walk yields; object keys are not values).
func anyString(v any, f func(string) bool) bool {
	switch x := v.(type) {
	case string:
		return f(x)
	case map[string]any:
		for _, e := range x {
			if anyString(e, f) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if anyString(e, f) {
				return true
			}
		}
	}
	return false
}

// anyWordOf reports whether one of tool's words is among r's words.
func (r *rule) anyWordOf(tool string) bool {
	for w := range calls.NameWords(tool) {
		if r.words[w] {
			return true
		}
	}
	return false
}

// allows reports whether the rule applies to c's person (airlock.rego's
// principal_allowed): it names no principals, or c acts for one of them as
// airlock verified.
func (r *rule) allows(c *callView) bool {
	return len(r.principals) == 0 || c.verified && slices.Contains(r.principals, c.onBehalfOf)
}

// matches is arg_matches: the value at the pointer is a string the glob
// matches. An allow rule's glob matches it only as spelled, clean (no "."
// or ".." segment, either slash separating them) and not ending in a
// separator, so it allows only the path the tool uses. An ask or deny
// rule's glob matches it as spelled or resolved lexically (calls.LexicalPath),
// and a relative path climbing above its start always, so no other
// spelling of a path it restricts gets past it.
func (a argCond) matches(args any) bool {
	s, ok := stringAt(args, a.path)
	if !ok {
		return false
	}
	if a.allow {
		return calls.CleanPath(s) && !calls.EndsInSeparator(s) && a.glob.Match(s)
	}
	if a.glob.Match(s) {
		return true
	}
	lexical, climbs := calls.LexicalPath(s)
	return climbs || lexical != s && a.glob.Match(lexical)
}

// initial is s's first character as ranging over s yields it ("" for ""),
// without allocating: a slice of s, or U+FFFD for a byte that is not UTF-8.
func initial(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && n <= 1 {
		if n == 0 {
			return ""
		}
		return string(utf8.RuneError)
	}
	return s[:n]
}

// match returns the hits entries of c, in index order: rule i's own (i)
// when it matches and applies to c's person, its refusal (n + i) when it
// matches and does not.
func (rs *ruleSet) match(c *callView, buf []int32) []int32 {
	hits := buf[:0]
	consider := func(list []int32) {
		for _, i := range list {
			r := &rs.rules[i]
			if !r.matches(c) {
				continue
			}
			if !r.allows(c) {
				i += rs.n
			}
			if !slices.Contains(hits, i) {
				hits = append(hits, i)
			}
		}
	}
	consider(rs.byTool[c.tool])
	consider(rs.byServer[c.server])
	for w := range calls.NameWords(c.tool) {
		consider(rs.byWord[w])
	}
	consider(rs.byToolInitial[initial(c.tool)])
	consider(rs.byNameInitial[nameInitial(c)])
	consider(rs.byAgent[c.agent])
	consider(rs.always)
	slices.Sort(hits)
	return hits
}

// less orders entries as min over airlock.rego's hits entries ([class,
// priority, index]) does.
func (rs *ruleSet) less(i, j int32) bool {
	a, b := &rs.outcomes[i], &rs.outcomes[j]
	if a.class != b.class {
		return a.class < b.class
	}
	if a.priority != b.priority {
		return a.priority < b.priority
	}
	return i < j
}

// hitsTerm is airlock.rego's hits for c: the set of matching entries.
func (rs *ruleSet) hitsTerm(c *callView) *ast.Term {
	var buf [8]int32
	hits := rs.match(c, buf[:])
	terms := make([]*ast.Term, len(hits))
	for k, i := range hits {
		terms[k] = rs.outcomes[i].entry
	}
	return ast.SetTerm(terms...)
}

// decisionTerm is the decision airlock.rego's general path reaches for an
// agent without a profile whose call some rule matches: the first entry's
// verdict, the highest risk of every matching entry and every path they
// mask. nil when the agent has a profile or no rule matches.
func (rs *ruleSet) decisionTerm(c *callView) *ast.Term {
	if !c.decided {
		c.decision, c.decided = rs.decide(c), true
	}
	return c.decision
}

// decide is decisionTerm's answer for c, worked out.
func (rs *ruleSet) decide(c *callView) *ast.Term {
	if rs.anyBound || rs.bindings[c.agent] {
		return nil
	}
	var buf [8]int32
	hits := rs.match(c, buf[:])
	switch len(hits) {
	case 0:
		return nil
	case 1:
		return rs.outcomes[hits[0]].solo
	}
	var key [4]int32
	cacheable := len(hits) <= len(key)
	if cacheable {
		for k := range key {
			key[k] = -1
		}
		copy(key[:], hits)
		rs.mu.RLock()
		t := rs.combined[key]
		rs.mu.RUnlock()
		if t != nil {
			return t
		}
	}
	t := rs.combine(hits)
	if cacheable {
		rs.mu.Lock()
		if _, ok := rs.combined[key]; !ok && len(rs.combined) < 4096 {
			rs.combined[key] = t
			rs.rememberLocked(t)
		}
		rs.mu.Unlock()
	}
	return t
}

// remember reads decision document t once, for decoded; a document that
// does not read is left to be refused when a policy gives it.
func (rs *ruleSet) remember(t *ast.Term) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.rememberLocked(t)
}

func (rs *ruleSet) rememberLocked(t *ast.Term) {
	if d, err := decisionFromValue(t.Value); err == nil {
		rs.decoded[t.Value] = d
	}
}

// document reads decision document v: the compiled rules' decision,
// passed through by the policy, was read when the rules made it.
func (rs *ruleSet) document(v ast.Value) (*airlockv1.Decision, error) {
	if d := rs.decision(v); d != nil {
		return d, nil
	}
	return decisionFromValue(v)
}

// decision returns the decision document v read, when v is one rs made;
// nil otherwise. The caller gets a copy of its own.
func (rs *ruleSet) decision(v ast.Value) *airlockv1.Decision {
	if _, ok := v.(ast.Object); !ok {
		return nil
	}
	rs.mu.RLock()
	d := rs.decoded[v]
	rs.mu.RUnlock()
	if d == nil {
		return nil
	}
	return copyDocumentFields(d)
}

func (rs *ruleSet) combine(hits []int32) *ast.Term {
	top, rank := hits[0], 0
	var redact []*ast.Term
	for _, i := range hits {
		if rs.less(i, top) {
			top = i
		}
		o := &rs.outcomes[i]
		rank = max(rank, o.rank)
		for _, p := range o.redact {
			redact = append(redact, ast.StringTerm(p))
		}
	}
	d := rs.outcomes[top].verdict.Copy()
	d.Insert(ast.StringTerm("risk"), ast.StringTerm(riskLevels[rank]))
	d.Insert(ast.StringTerm("redact"), ast.SetTerm(redact...))
	return ast.NewTerm(d)
}

// builtins are the generated module's functions, bound to rs, for
// topdown. As rego would register them, a function's error is reported as
// a built-in error naming it, and a nil result is undefined. Given the
// evaluation's own input.call (the object itself, not an equal one), they
// match the view made with it; given any other, they read it.
func (rs *ruleSet) builtins() map[string]*topdown.Builtin {
	decls := builtinDecls()
	fn := func(name string, f func(*callView) *ast.Term) *topdown.Builtin {
		return &topdown.Builtin{Decl: decls[name], Func: func(bctx topdown.BuiltinContext, operands []*ast.Term, iter func(*ast.Term) error) error {
			var c *callView
			if in, ok := bctx.Context.Value(callInputKey{}).(*callInput); ok && operands[0].Value == in.call {
				c = &in.view
			} else {
				v, err := viewOf(operands[0])
				if err != nil {
					return (&topdown.Error{Code: topdown.BuiltinErr, Message: name + ": " + err.Error(), Location: bctx.Location}).Wrap(err)
				}
				c = &v
			}
			if t := f(c); t != nil {
				return iter(t)
			}
			return nil
		}}
	}
	return map[string]*topdown.Builtin{
		builtinHits:     fn(builtinHits, rs.hitsTerm),
		builtinDecision: fn(builtinDecision, rs.decisionTerm), // nil: undefined
	}
}

// builtinDecls declares the functions to the compiler.
func builtinDecls() map[string]*ast.Builtin {
	decl := types.NewFunction(types.Args(types.A), types.A)
	return map[string]*ast.Builtin{
		builtinHits:     {Name: builtinHits, Decl: decl},
		builtinDecision: {Name: builtinDecision, Decl: decl},
	}
}
