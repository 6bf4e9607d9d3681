package decide

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/open-policy-agent/opa/v1/topdown/cache"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/canon"
	"github.com/airlock-gate/airlock/services/shared/config"
)

// Query is the one decision path every evaluation asks for.
const Query = "data.airlock.decision"

// AskDefaults are what an ask decision gets when the policy leaves them
// out. They are configuration (approval.default_approvers,
// approval.default_timeout, approval.default_notify), so the policy stamps
// what the approval service would assume.
type AskDefaults struct {
	Approvers []string
	Timeout   time.Duration
	Notify    []string
}

// AskDefaultsFrom reads the ask defaults out of cfg.
func AskDefaultsFrom(cfg config.Config) AskDefaults {
	return AskDefaults{Approvers: cfg.Approval.DefaultApprovers, Timeout: cfg.Approval.DefaultTimeout, Notify: cfg.Approval.DefaultNotify}
}

// Option tunes NewEvaluator.
type Option func(*Evaluator)

// WithAskDefaults sets the ask defaults; without it an evaluator uses
// those of config.Default().
func WithAskDefaults(d AskDefaults) Option { return func(e *Evaluator) { e.defaults = d } }

// WithTopdown makes Evaluate run topdown on every call, as it does for a
// policy that does not pass the compiled rules' decision through
// (passesCompiledDecision): for measuring that path (`airlock bench policy`).
func WithTopdown() Option { return func(e *Evaluator) { e.compiledDecides = false } }

// Evaluator decides calls with one policy revision: compiled code plus data
// (base data, run-time rules, profile bindings). It needs no bus, so the
// service, `airlock policy eval` and `airlock policy replay` share it. It is
// safe for concurrent use.
type Evaluator struct {
	code      *Code
	data      map[string]any
	generated string
	revision  string
	cache     cache.InterQueryValueCache
	defaults  AskDefaults

	// What topdown evaluates Query with, prepared once (see evalQuery).
	compiler      *ast.Compiler
	store         storage.Store
	rules         *ruleSet
	builtins      map[string]*topdown.Builtin
	query         ast.Body // Query, its value captured in decisionVar
	queryCompiler ast.QueryCompiler
	caches        virtualCachePool
	inputs        inputPool
	// fullInput: the policy changes part of its input in an expression
	// (withOnPartOfInput), so every evaluation gets its input built in full.
	fullInput bool
	// compiledDecides: Query's value is the compiled rules' decision
	// whenever they make one (passesCompiledDecision), so Evaluate takes
	// it from them without running topdown.
	compiledDecides bool
}

// decisionVar captures Query's value in the compiled query.
var decisionVar = ast.Var("decision")

// LoadDir loads the policy in dir (see CodeFromDir) with its own data only
// (no run-time rules, no bindings): what `airlock policy replay` evaluates a
// candidate policy with.
func LoadDir(ctx context.Context, dir string, opts ...Option) (*Evaluator, error) {
	c, err := CodeFromDir(dir)
	if err != nil {
		return nil, err
	}
	return NewEvaluator(ctx, c, nil, nil, opts...)
}

// LoadDefault loads the built-in default policy with its own data only.
func LoadDefault(ctx context.Context, opts ...Option) (*Evaluator, error) {
	c, err := DefaultCode()
	if err != nil {
		return nil, err
	}
	return NewEvaluator(ctx, c, nil, nil, opts...)
}

// NewEvaluator prepares code with run-time rules merged into
// data.airlock.rules (a rule replaces a base rule of the same id; a deleted
// rule removes it) and bindings (agent → profile) as data.airlock.bindings.
func NewEvaluator(ctx context.Context, code *Code, rules []*airlockv1.PolicyRule, bindings map[string]string, opts ...Option) (*Evaluator, error) {
	data, err := mergeData(code.Data, rules, bindings)
	if err != nil {
		return nil, err
	}
	dj, _ := json.Marshal(data)
	sum := sha256.Sum256(append([]byte(code.Hash), dj...))
	rs, tables, err := compileRules(data)
	if err != nil {
		return nil, fmt.Errorf("compile rules: %w", err)
	}
	// The tables live in the store, where a lookup reads one entry; as a Rego
	// constant the whole table would be materialized on every decision.
	data[CompiledDataKey] = tables
	gen := generatedModule
	genMod, err := ast.ParseModuleWithOpts(GeneratedModule, gen, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return nil, fmt.Errorf("compile rules: %w", err)
	}
	parsed := maps.Clone(code.parsed)
	parsed[GeneratedModule] = genMod
	comp := ast.NewCompiler().WithEnablePrintStatements(false).WithBuiltins(builtinDecls())
	if comp.Compile(parsed); comp.Failed() {
		return nil, fmt.Errorf("policy with its rules does not compile: %w", comp.Errors)
	}
	// The inter-query value cache keeps compiled globs for every pattern;
	// OPA's global fallback holds only 100, fewer than a policy with 100 rules uses.
	vc := cache.NewInterQueryValueCache(ctx, &cache.Config{InterQueryBuiltinValueCache: cache.InterQueryBuiltinValueCacheConfig{MaxNumEntries: intPtr(10000)}})
	// Query, as rego would prepare it: its value captured in a variable.
	qc := comp.QueryCompiler().WithContext(ast.NewQueryContext()).WithEnablePrintStatements(false).WithStrict(false)
	query, err := qc.Compile(ast.NewBody(ast.Equality.Expr(ast.MustParseTerm(Query), ast.NewTerm(decisionVar))))
	if err != nil {
		return nil, fmt.Errorf("prepare policy: %w", err)
	}
	e := &Evaluator{code: code, data: data, generated: gen, revision: hex.EncodeToString(sum[:])[:16], cache: vc,
		defaults: AskDefaultsFrom(config.Default()),
		compiler: comp, store: inmem.NewFromObjectWithOpts(data, inmem.OptRoundTripOnWrite(true), inmem.OptReturnASTValuesOnRead(true)),
		rules: rs, builtins: rs.builtins(), query: query, queryCompiler: qc, fullInput: withOnPartOfInput(comp.Modules)}
	e.compiledDecides = !e.fullInput && passesCompiledDecision(comp, data)
	for _, o := range opts {
		o(e)
	}
	return e, nil
}

func intPtr(i int) *int { return &i }

// withOnPartOfInput reports whether a module evaluates an expression `with
// input.<path> as ...`. OPA applies it to a copy of the input, and a lazy
// object's copy is the object itself: the change would outlast the
// expression (an unverified person read as verified for the rest of the
// decision), and the built-in functions would match the call as sent
// inside it. Such a policy gets its input built in full.
func withOnPartOfInput(modules map[string]*ast.Module) bool {
	found := false
	for _, m := range modules {
		ast.WalkWiths(m, func(w *ast.With) bool {
			r, ok := w.Target.Value.(ast.Ref)
			found = found || ok && len(r) > 1 && r[0].Equal(ast.InputRootDocument)
			return found
		})
	}
	return found
}

// compiledDecisionRef is the generated module's decision: the compiled
// rules' whole decision, undefined when they make none.
var compiledDecisionRef = ast.MustParseRef("data.airlock_compiled_rules.decision")

// passesCompiledDecision reports whether Query's value is, by the compiled
// policy's structure, data.airlock_compiled_rules.decision whenever that is
// defined: Query is one complete rule (no default, no other definition,
// nothing under it, no base document there) whose first body is `d :=
// data.airlock_compiled_rules.decision` and whose value is d, and that
// document is the generated module's one rule (it reads input.call only,
// through the built-in function). airlock.rego's decision is such a rule.
// Topdown would then evaluate that body first, call the built-in function
// once and give its value; Evaluate takes it straight from the compiled
// rules, which costs a fifth of running topdown. When the compiled rules
// make no decision (an agent with a profile, no rule matching), topdown
// decides as ever, from the else branches.
func passesCompiledDecision(comp *ast.Compiler, data map[string]any) bool {
	if _, ok := data["airlock_compiled_rules"]; ok {
		return false
	}
	if al, _ := data["airlock"].(map[string]any); al != nil {
		if _, ok := al["decision"]; ok {
			return false
		}
	}
	only := func(ref ast.Ref) *ast.Rule {
		n := comp.RuleTree.Find(ref)
		if n == nil || len(n.Values) != 1 || len(n.Children) != 0 {
			return nil
		}
		r := n.Values[0]
		if r.Default || r.Head.DocKind() != ast.CompleteDoc || len(r.Head.Args) != 0 || r.Module == nil || !r.Ref().Equal(ref) {
			return nil
		}
		return r
	}
	gen := only(compiledDecisionRef)
	if gen == nil || gen.Module != comp.Modules[GeneratedModule] {
		return false
	}
	r := only(ast.MustParseRef(Query))
	if r == nil || len(r.Body) != 1 {
		return false
	}
	v, ok := r.Head.Value.Value.(ast.Var)
	x := r.Body[0]
	if !ok || x.Negated || len(x.With) != 0 || !x.IsEquality() {
		return false
	}
	a, b := x.Operand(0), x.Operand(1)
	if a.Equal(ast.RefTerm(compiledDecisionRef...)) {
		a, b = b, a
	}
	return a.Equal(ast.VarTerm(string(v))) && b.Equal(ast.RefTerm(compiledDecisionRef...))
}

// Revision identifies the policy code and data this evaluator decides with;
// replicas with the same code, rules and bindings have the same revision.
func (e *Evaluator) Revision() string { return e.revision }

// Data is the whole data document the evaluator decides with (base data,
// run-time rules sorted by priority, bindings). Callers must not modify it.
func (e *Evaluator) Data() map[string]any { return e.data }

// Input is the input document the policy sees for call decided at time now,
// as JSON-ready Go values (what OPA's REST API would be sent): input.call,
// the call, and input.time, now in RFC 3339 (UTC).
func Input(call *airlockv1.ToolCall, now time.Time) (any, error) {
	v, err := inputValue(call, now)
	if err != nil {
		return nil, err
	}
	return ast.JSON(v)
}

// Modules are every Rego module the evaluator runs: the policy's own and
// the one generated from its rules (GeneratedModule).
func (e *Evaluator) Modules() map[string]string {
	m := maps.Clone(e.code.Modules)
	m[GeneratedModule] = e.generated
	return m
}

// Code is the code the evaluator runs.
func (e *Evaluator) Code() *Code { return e.code }

// Evaluate decides call at time now: the policy reads now as input.time,
// and time.now_ns() answers it, so a replay decides as of the time given (a
// zero now is the wall clock's). It always returns a decision: when the
// policy fails (an evaluation error, an undefined or malformed document) the
// decision is a deny whose reason says so, and err says what went wrong.
// Standing grants are not consulted here (they are bus state); see Engine.
func (e *Evaluator) Evaluate(ctx context.Context, call *airlockv1.ToolCall, now time.Time) (*airlockv1.Decision, error) {
	if now.IsZero() {
		now = time.Now()
	}
	d, err := e.evaluate(ctx, call, now)
	if err != nil {
		d = &airlockv1.Decision{
			Action: airlockv1.Action_ACTION_DENY,
			Reason: "policy failed, so the call is denied (fail closed): " + err.Error(),
			Risk:   airlockv1.Risk_RISK_HIGH,
		}
	}
	e.stamp(d, call, now)
	return d, err
}

func (e *Evaluator) evaluate(ctx context.Context, call *airlockv1.ToolCall, now time.Time) (*airlockv1.Decision, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("policy evaluation not started: %w", err)
	}
	in := e.inputs.get()
	// Given back once the decision is read out of what the policy gave.
	defer e.inputs.put(in)
	var err error
	if e.fullInput {
		// The document built in full, the call converted once; no view:
		// the built-in functions read the operand they are given.
		in.doc, err = inputValue(call, now)
	} else if e.compiledDecides {
		// The document is made only if topdown runs.
		err = in.fillView(call)
	} else {
		err = in.fill(call, now)
	}
	if err != nil {
		return nil, err
	}
	if e.compiledDecides {
		if t := e.rules.decisionTerm(&in.view); t != nil {
			return e.rules.document(t.Value)
		}
		// Undefined: topdown takes the else branches (the built-in
		// function gives the same answer, remembered in the view).
		in.fillDoc(call, now)
	}
	t, err := e.evalQuery(context.WithValue(ctx, callInputKey{}, in), in, now)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("policy evaluation error: %w (%w)", err, ctx.Err())
		}
		return nil, fmt.Errorf("policy evaluation error: %w", err)
	}
	if t == nil {
		return nil, fmt.Errorf("%s is undefined for this call", Query)
	}
	return e.rules.document(t.Value)
}

// evalQuery evaluates Query with in.doc as input at time now (what
// time.now_ns() answers): its value, nil when it is undefined. It runs topdown as rego's prepared query would (same compiler,
// store, built-in functions, strict built-in errors, indexing, early exit),
// without rego's per-evaluation wrapping, which costs as much again as a
// small policy: an evaluation context, options, a result set converted from
// the bindings.
func (e *Evaluator) evalQuery(ctx context.Context, in *callInput, now time.Time) (*ast.Term, error) {
	txn, err := e.store.NewTransaction(ctx)
	if err != nil {
		return nil, err
	}
	defer e.store.Abort(ctx, txn)
	// topdown's virtual-document cache, kept from one evaluation to the
	// next (see virtualCache).
	vc := e.caches.get()
	defer e.caches.put(vc)
	// Watch ctx without a goroutine of our own: AfterFunc cancels the
	// evaluation when ctx ends. A cancellation that was not fired serves
	// the next evaluation too.
	if in.cancel == nil {
		in.cancel = topdown.NewCancel()
		in.cancelFn = in.cancel.Cancel
	}
	stop := context.AfterFunc(ctx, in.cancelFn)
	defer func() {
		if !stop() || in.cancel.Cancelled() {
			in.cancel = nil
		}
	}()
	if in.collect == nil {
		in.collect = func(qr topdown.QueryResult) error {
			if in.result == nil { // the first result, as rego's rs[0]
				in.result = qr[decisionVar]
			}
			return nil
		}
	}
	in.term.Value, in.result = in.doc, nil
	err = topdown.NewQuery(e.query).
		WithQueryCompiler(e.queryCompiler).
		WithCompiler(e.compiler).
		WithStore(e.store).
		WithTransaction(txn).
		WithBuiltins(e.builtins).
		WithInput(&in.term).
		WithTime(now).
		WithInterQueryBuiltinValueCache(e.cache).
		WithStrictBuiltinErrors(true).
		WithVirtualCache(vc).
		WithCancel(in.cancel).
		// Nobody reads per-evaluation metrics; a fresh set costs allocations.
		WithMetrics(metrics.NoOp()).
		Iter(ctx, in.collect)
	if err != nil {
		return nil, err
	}
	return in.result, nil
}

// stamp adds what every decision carries: defaults, revision, ids, digest.
func (e *Evaluator) stamp(d *airlockv1.Decision, call *airlockv1.ToolCall, now time.Time) {
	if d.Action == airlockv1.Action_ACTION_ASK {
		if len(d.Approvers) == 0 {
			d.Approvers = slices.Clone(e.defaults.Approvers)
		}
		if d.Quorum == 0 {
			d.Quorum = 1 // SPEC §4: one approval unless the policy asks for more
		}
		if (d.Timeout == nil || d.Timeout.AsDuration() <= 0) && e.defaults.Timeout > 0 {
			d.Timeout = durationpb.New(e.defaults.Timeout)
		}
		if len(d.Notify) == 0 {
			d.Notify = slices.Clone(e.defaults.Notify)
		}
	}
	if d.Risk == airlockv1.Risk_RISK_UNSPECIFIED {
		d.Risk = airlockv1.Risk_RISK_MEDIUM
	}
	d.PolicyRevision = e.revision
	d.DecisionId = newDecisionID()
	d.DecidedAt = timestamppb.New(now)
	if dg, err := canon.Digest(call.GetArguments()); err == nil {
		d.ArgumentsDigest = dg
	}
}

func newDecisionID() string {
	// Built in one buffer: the string is the only allocation.
	const prefix = "dec_"
	var raw [12]byte
	_, _ = rand.Read(raw[:])
	var id [len(prefix) + 2*len(raw)]byte
	copy(id[:], prefix)
	hex.Encode(id[len(prefix):], raw[:])
	return string(id[:])
}
