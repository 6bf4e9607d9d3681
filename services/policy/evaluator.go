package policy

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/open-policy-agent/opa/v1/topdown/cache"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/airlock-gate/airlock/policies"
	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// Query is the one decision path every evaluation asks for.
const Query = "data.airlock.decision"

// Defaults the policy service fills into an ask decision when the policy
// leaves them out.
var (
	DefaultApprovers = []string{"group:reviewers"}
	DefaultNotify    = []string{"console"}
)

// DefaultTimeout is how long a person has to decide when the policy says nothing.
const DefaultTimeout = 5 * time.Minute

// Code is a policy's source: its Rego modules (test modules excluded) and
// its base data document. It is immutable once loaded.
type Code struct {
	// Modules maps a file name to its Rego text.
	Modules map[string]string
	// Data is the base data document (data.json), e.g. {"airlock": {"rules": [...]}}.
	Data map[string]any
	// Hash is a short hex digest of Modules and Data.
	Hash string

	parsed map[string]*ast.Module
}

// DefaultCode returns the default policy built into the binary.
func DefaultCode() (*Code, error) {
	c, err := CodeFromFS(policies.Default())
	if err != nil {
		return nil, fmt.Errorf("built-in default policy: %w", err)
	}
	return c, nil
}

// CodeFromDir reads every *.rego file (except *_test.rego) and data.json in
// dir (not recursive) and compiles them. A policy that does not compile is
// an error that names the file and line.
func CodeFromDir(dir string) (*Code, error) {
	c, err := CodeFromFS(os.DirFS(dir))
	if err != nil {
		return nil, fmt.Errorf("policy dir %s: %w", dir, err)
	}
	return c, nil
}

// CodeFromFS is CodeFromDir over a file system.
func CodeFromFS(fsys fs.FS) (*Code, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read policy files: %w", err)
	}
	c := &Code{Modules: map[string]string{}, Data: map[string]any{}}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		switch {
		case strings.HasSuffix(name, "_test.rego"):
		case strings.HasSuffix(name, ".rego"):
			b, err := fs.ReadFile(fsys, name)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", name, err)
			}
			c.Modules[name] = string(b)
		case name == "data.json":
			b, err := fs.ReadFile(fsys, name)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", name, err)
			}
			if err := json.Unmarshal(b, &c.Data); err != nil {
				return nil, fmt.Errorf("%s is not a JSON object: %w", name, err)
			}
		}
	}
	return NewCode(c.Modules, c.Data)
}

// NewCode compiles modules (file name → Rego) with base data.
func NewCode(modules map[string]string, data map[string]any) (*Code, error) {
	if len(modules) == 0 {
		return nil, fmt.Errorf("no .rego files: a policy needs at least one module defining %s", Query)
	}
	if data == nil {
		data = map[string]any{}
	}
	parsed := map[string]*ast.Module{}
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(modules)) {
		m, err := ast.ParseModuleWithOpts(name, modules[name], ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return nil, fmt.Errorf("policy does not parse: %w", err)
		}
		parsed[name] = m
		fmt.Fprintf(h, "%s\x00%s\x00", name, modules[name])
	}
	dj, err := json.Marshal(data) // map keys sort, so this is canonical
	if err != nil {
		return nil, fmt.Errorf("policy data: %w", err)
	}
	h.Write(dj)
	comp := ast.NewCompiler().WithEnablePrintStatements(false)
	if comp.Compile(parsed); comp.Failed() {
		return nil, fmt.Errorf("policy does not compile: %w", comp.Errors)
	}
	return &Code{Modules: modules, Data: data, Hash: hex.EncodeToString(h.Sum(nil))[:12], parsed: parsed}, nil
}

// Evaluator decides calls with one policy revision: compiled code plus data
// (base data, run-time rules, profile bindings). It needs no bus, so the
// service, `airlock policy eval` and `airlock policy replay` share it. It is
// safe for concurrent use.
type Evaluator struct {
	code      *Code
	data      map[string]any
	generated string
	revision  string
	pq        rego.PreparedEvalQuery
	cache     cache.InterQueryValueCache
}

// LoadDir loads the policy in dir (see CodeFromDir) with its own data only
// (no run-time rules, no bindings): what `airlock policy replay` evaluates a
// candidate policy with.
func LoadDir(ctx context.Context, dir string) (*Evaluator, error) {
	c, err := CodeFromDir(dir)
	if err != nil {
		return nil, err
	}
	return NewEvaluator(ctx, c, nil, nil)
}

// LoadDefault loads the built-in default policy with its own data only.
func LoadDefault(ctx context.Context) (*Evaluator, error) {
	c, err := DefaultCode()
	if err != nil {
		return nil, err
	}
	return NewEvaluator(ctx, c, nil, nil)
}

// NewEvaluator prepares code with run-time rules merged into
// data.airlock.rules (a rule replaces a base rule of the same id; a deleted
// rule removes it) and bindings (agent → profile) as data.airlock.bindings.
func NewEvaluator(ctx context.Context, code *Code, rules []*airlockv1.PolicyRule, bindings map[string]string) (*Evaluator, error) {
	return newEvaluator(ctx, code, rules, bindings, Query)
}

func newEvaluator(ctx context.Context, code *Code, rules []*airlockv1.PolicyRule, bindings map[string]string, query string) (*Evaluator, error) {
	data, err := mergeData(code.Data, rules, bindings)
	if err != nil {
		return nil, err
	}
	dj, _ := json.Marshal(data)
	sum := sha256.Sum256(append([]byte(code.Hash), dj...))
	gen, tables := compileRules(data)
	// The tables live in the store, where a lookup reads one entry; as a Rego
	// constant the whole table would be materialized on every decision.
	data[CompiledDataKey] = tables
	genMod, err := ast.ParseModuleWithOpts(GeneratedModule, gen, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return nil, fmt.Errorf("compile rules: %w", err)
	}
	parsed := maps.Clone(code.parsed)
	parsed[GeneratedModule] = genMod
	comp := ast.NewCompiler().WithEnablePrintStatements(false)
	if comp.Compile(parsed); comp.Failed() {
		return nil, fmt.Errorf("policy with its rules does not compile: %w", comp.Errors)
	}
	// The inter-query value cache keeps compiled globs for every pattern;
	// OPA's global fallback holds only 100, fewer than a policy with 100 rules uses.
	vc := cache.NewInterQueryValueCache(ctx, &cache.Config{InterQueryBuiltinValueCache: cache.InterQueryBuiltinValueCacheConfig{MaxNumEntries: intPtr(10000)}})
	pq, err := rego.New(
		rego.Query(query),
		rego.Compiler(comp),
		rego.Store(inmem.NewFromObjectWithOpts(data, inmem.OptRoundTripOnWrite(true), inmem.OptReturnASTValuesOnRead(true))),
		rego.StrictBuiltinErrors(true),
	).PrepareForEval(ctx)
	if err != nil {
		return nil, fmt.Errorf("prepare policy: %w", err)
	}
	return &Evaluator{code: code, data: data, generated: gen, revision: hex.EncodeToString(sum[:])[:16], pq: pq, cache: vc}, nil
}

func intPtr(i int) *int { return &i }

// Revision identifies the policy code and data this evaluator decides with;
// replicas with the same code, rules and bindings have the same revision.
func (e *Evaluator) Revision() string { return e.revision }

// Data is the whole data document the evaluator decides with (base data,
// run-time rules sorted by priority, bindings). Callers must not modify it.
func (e *Evaluator) Data() map[string]any { return e.data }

// Input is the input document the policy sees for call, as JSON-ready Go
// values (what OPA's REST API would be sent).
func Input(call *airlockv1.ToolCall) (any, error) {
	v, err := inputValue(call)
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

// Evaluate decides call at time now. It always returns a decision: when the
// policy fails (an evaluation error, an undefined or malformed document) the
// decision is a deny whose reason says so, and err says what went wrong.
// Standing grants are not consulted here (they are bus state); see Engine.
func (e *Evaluator) Evaluate(ctx context.Context, call *airlockv1.ToolCall, now time.Time) (*airlockv1.Decision, error) {
	d, err := e.evaluate(ctx, call)
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

func (e *Evaluator) evaluate(ctx context.Context, call *airlockv1.ToolCall) (*airlockv1.Decision, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("policy evaluation not started: %w", err)
	}
	input, err := inputValue(call)
	if err != nil {
		return nil, err
	}
	// rego starts a goroutine per evaluation to watch ctx unless it is given
	// a Cancel; AfterFunc does the same watching without one.
	cancel := topdown.NewCancel()
	stop := context.AfterFunc(ctx, cancel.Cancel)
	defer stop()
	rs, err := e.pq.Eval(ctx,
		rego.EvalParsedInput(input),
		rego.EvalInterQueryBuiltinValueCache(e.cache),
		rego.EvalExternalCancel(cancel),
		// Nobody reads per-evaluation metrics; a fresh set costs allocations.
		rego.EvalMetrics(metrics.NoOp()),
		// The document is read from its AST form (decisionFromValue), so
		// skip rego's conversion to Go maps.
		rego.EvalGenerateJSON(keepTerm),
	)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("policy evaluation error: %w (%w)", err, ctx.Err())
		}
		return nil, fmt.Errorf("policy evaluation error: %w", err)
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return nil, fmt.Errorf("%s is undefined for this call", Query)
	}
	t, ok := rs[0].Expressions[0].Value.(*ast.Term)
	if !ok {
		return nil, fmt.Errorf("malformed decision: %s evaluated to %T", Query, rs[0].Expressions[0].Value)
	}
	return decisionFromValue(t.Value)
}

func keepTerm(t *ast.Term, _ *rego.EvalContext) (any, error) { return t, nil }

// stamp adds what every decision carries: defaults, revision, ids, digest.
func (e *Evaluator) stamp(d *airlockv1.Decision, call *airlockv1.ToolCall, now time.Time) {
	if d.Action == airlockv1.Action_ACTION_ASK {
		if len(d.Approvers) == 0 {
			d.Approvers = slices.Clone(DefaultApprovers)
		}
		if d.Quorum == 0 {
			d.Quorum = 1
		}
		if d.Timeout == nil || d.Timeout.AsDuration() <= 0 {
			d.Timeout = durationpb.New(DefaultTimeout)
		}
		if len(d.Notify) == 0 {
			d.Notify = slices.Clone(DefaultNotify)
		}
	}
	if d.Risk == airlockv1.Risk_RISK_UNSPECIFIED {
		d.Risk = airlockv1.Risk_RISK_MEDIUM
	}
	d.PolicyRevision = e.revision
	d.DecisionId = newDecisionID()
	d.DecidedAt = timestamppb.New(now)
	if dg, err := argumentsDigest(call.GetArguments()); err == nil {
		d.ArgumentsDigest = dg
	}
}

// argumentsDigest is canon.Digest(args), byte for byte, without the detour
// through AsMap and reflection-driven encoding/json that canon.JSON takes:
// it writes the same canonical JSON (keys sorted, encoding/json's number and
// string forms) straight from the Struct. A string it cannot vouch for
// (anything but printable ASCII without " \ < > &) is encoded by
// encoding/json itself; a NaN or infinity fails, as encoding/json does.
func argumentsDigest(args *structpb.Struct) (string, error) {
	buf := make([]byte, 0, 256)
	buf, err := appendCanonStruct(buf, args)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(buf)
	return hex.EncodeToString(sum[:]), nil
}

func appendCanonStruct(b []byte, s *structpb.Struct) ([]byte, error) {
	fields := s.GetFields()
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys) // encoding/json sorts map keys by their bytes, too
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendCanonString(b, k); err != nil {
			return nil, err
		}
		b = append(b, ':')
		if b, err = appendCanonValue(b, fields[k]); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

func appendCanonValue(b []byte, v *structpb.Value) ([]byte, error) {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NullValue, nil:
		return append(b, "null"...), nil
	case *structpb.Value_BoolValue:
		return strconv.AppendBool(b, k.BoolValue), nil
	case *structpb.Value_NumberValue:
		return appendCanonFloat(b, k.NumberValue)
	case *structpb.Value_StringValue:
		return appendCanonString(b, k.StringValue)
	case *structpb.Value_StructValue:
		return appendCanonStruct(b, k.StructValue)
	case *structpb.Value_ListValue:
		b = append(b, '[')
		for i, e := range k.ListValue.GetValues() {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendCanonValue(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	default:
		return nil, fmt.Errorf("canonical arguments: value of unsupported kind %T", k)
	}
}

// appendCanonFloat writes f as encoding/json writes a float64.
func appendCanonFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("canonical arguments: unsupported number %v", f)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// encoding/json writes e-07 as e-7.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

func appendCanonString(b []byte, s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, err := json.Marshal(s)
			if err != nil {
				return nil, fmt.Errorf("canonical arguments: %w", err)
			}
			return append(b, q...), nil
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), nil
}

func newDecisionID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "dec_" + hex.EncodeToString(b)
}

// Keys of the input document, built once: every decision reuses them (OPA
// never modifies input terms), which saves an allocation and a hash each.
var (
	keyCall          = ast.StringTerm("call")
	keyAgentID       = ast.StringTerm("agent_id")
	keyCallID        = ast.StringTerm("call_id")
	keyRevision      = ast.StringTerm("revision")
	keyThreadID      = ast.StringTerm("thread_id")
	keyOnBehalfOf    = ast.StringTerm("on_behalf_of")
	keyVerified      = ast.StringTerm("on_behalf_of_verified")
	keyServer        = ast.StringTerm("server")
	keyTool          = ast.StringTerm("tool")
	keyToolInitial   = ast.StringTerm("tool_initial")
	keyServerInitial = ast.StringTerm("server_initial")
	keyToolWords     = ast.StringTerm("tool_words")
	keyReason        = ast.StringTerm("reason")
	keyArguments     = ast.StringTerm("arguments")
)

// inputValue builds {"call": {...}} as an ast value directly: no JSON round trip.
func inputValue(call *airlockv1.ToolCall) (ast.Value, error) {
	args, err := structValue(call.GetArguments())
	if err != nil {
		return nil, err
	}
	// One block for the value terms instead of an allocation each.
	v := make([]ast.Term, 11)
	str := func(i int, s string) *ast.Term {
		v[i].Value = ast.String(s)
		return &v[i]
	}
	v[2].Value = ast.InternedTerm(int(call.GetRevision())).Value
	v[9].Value = wordsValue(call.GetTool())
	v[10].Value = args
	c := ast.NewObject(
		ast.Item(keyAgentID, str(0, call.GetAgentId())),
		ast.Item(keyCallID, str(1, call.GetCallId())),
		ast.Item(keyRevision, &v[2]),
		ast.Item(keyThreadID, str(3, call.GetThreadId())),
		ast.Item(keyOnBehalfOf, str(4, call.GetOnBehalfOf())),
		ast.Item(keyVerified, ast.InternedTerm(call.GetOnBehalfOfVerified())),
		ast.Item(keyServer, str(5, call.GetServer())),
		ast.Item(keyTool, str(6, call.GetTool())),
		// First characters, for the rule index (see compileRules).
		ast.Item(keyToolInitial, str(7, initial(call.GetTool()))),
		ast.Item(keyServerInitial, str(8, initial(call.GetServer()))),
		ast.Item(keyToolWords, &v[9]),
		ast.Item(keyReason, ast.StringTerm(call.GetReason())),
		ast.Item(keyArguments, &v[10]),
	)
	return ast.NewObject(ast.Item(keyCall, ast.NewTerm(c))), nil
}

// ToolWords splits a tool name as airlock.rego's tool_words does: at runs
// of _ . - and before an ASCII capital that follows a lower-case letter or
// digit, lower-cased, empty words dropped. (Hand-written: this runs on every
// decision, and a regexp costs more than the rest of the input.)
func ToolWords(tool string) []string {
	var out []string
	start := 0
	flush := func(end int) {
		if end > start {
			out = append(out, strings.ToLower(tool[start:end]))
		}
	}
	for i := 0; i < len(tool); i++ {
		c := tool[i]
		switch {
		case c == '_' || c == '.' || c == '-':
			flush(i)
			start = i + 1
		case c >= 'A' && c <= 'Z' && i > 0 && (tool[i-1] >= 'a' && tool[i-1] <= 'z' || tool[i-1] >= '0' && tool[i-1] <= '9'):
			flush(i)
			start = i
		}
	}
	flush(len(tool))
	return out
}

func wordsValue(tool string) ast.Value {
	words := ToolWords(tool)
	block := make([]ast.Term, len(words))
	terms := make([]*ast.Term, len(words))
	for i, w := range words {
		block[i].Value = ast.String(w)
		terms[i] = &block[i]
	}
	return ast.NewArray(terms...)
}

func initial(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError {
		return string(r) // as ranging over s yields it: "" stays ""
	}
	return s[:n]
}

func structValue(s *structpb.Struct) (ast.Value, error) {
	fields := s.GetFields()
	// Key and value terms in one block, the object built in one go.
	terms := make([]ast.Term, 2*len(fields))
	items := make([][2]*ast.Term, 0, len(fields))
	for k, v := range fields {
		av, err := protoValue(v)
		if err != nil {
			return nil, err
		}
		kt, vt := &terms[2*len(items)], &terms[2*len(items)+1]
		kt.Value, vt.Value = ast.String(k), av
		items = append(items, [2]*ast.Term{kt, vt})
	}
	return ast.NewObject(items...), nil
}

func protoValue(v *structpb.Value) (ast.Value, error) {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NullValue, nil:
		return ast.Null{}, nil
	case *structpb.Value_BoolValue:
		return ast.Boolean(k.BoolValue), nil
	case *structpb.Value_NumberValue:
		return ast.Number(strconv.FormatFloat(k.NumberValue, 'g', -1, 64)), nil // as fmt.Sprint writes it
	case *structpb.Value_StringValue:
		return ast.String(k.StringValue), nil
	case *structpb.Value_StructValue:
		return structValue(k.StructValue)
	case *structpb.Value_ListValue:
		terms := make([]*ast.Term, 0, len(k.ListValue.GetValues()))
		for _, e := range k.ListValue.GetValues() {
			av, err := protoValue(e)
			if err != nil {
				return nil, err
			}
			terms = append(terms, ast.NewTerm(av))
		}
		return ast.NewArray(terms...), nil
	default:
		return nil, fmt.Errorf("argument of unsupported kind %T", k)
	}
}

var actions = map[string]airlockv1.Action{"allow": airlockv1.Action_ACTION_ALLOW, "deny": airlockv1.Action_ACTION_DENY, "ask": airlockv1.Action_ACTION_ASK}

var risks = map[string]airlockv1.Risk{"low": airlockv1.Risk_RISK_LOW, "medium": airlockv1.Risk_RISK_MEDIUM, "high": airlockv1.Risk_RISK_HIGH, "critical": airlockv1.Risk_RISK_CRITICAL}

// decisionKeys are the keys a decision document may have, for the message
// that names an unknown one.
const decisionKeys = "action, reason, rule_id, risk, approvers, quorum, timeout, notify, redact, escalate_to, escalate_after, remind_after, queue_per_thread"

// decisionFromValue reads the policy's document strictly, from its AST form
// (no conversion to Go maps): an unknown key, a wrong type or an unknown
// action is malformed, and malformed denies. Keys are checked in sorted
// order, so the first problem reported does not depend on map order.
func decisionFromValue(v ast.Value) (*airlockv1.Decision, error) {
	obj, ok := v.(ast.Object)
	if !ok {
		return nil, fmt.Errorf("malformed decision: %s must be an object, got %T", Query, jsonOf(v))
	}
	d := &airlockv1.Decision{}
	err := obj.Iter(func(kt, vt *ast.Term) error {
		key, ok := kt.Value.(ast.String)
		if !ok {
			return fmt.Errorf("malformed decision: unknown key %v (allowed: %s)", kt, decisionKeys)
		}
		bad := func(want string) error {
			return fmt.Errorf("malformed decision: %q must be %s, got %v", string(key), want, jsonOf(vt.Value))
		}
		val := vt.Value
		switch key {
		case "action":
			s, _ := val.(ast.String)
			a, ok := actions[string(s)]
			if !ok {
				return bad(`"allow", "deny" or "ask"`)
			}
			d.Action = a
		case "reason", "rule_id":
			s, ok := val.(ast.String)
			if !ok {
				return bad("a string")
			}
			if key == "reason" {
				d.Reason = string(s)
			} else {
				d.RuleId = string(s)
			}
		case "risk":
			s, _ := val.(ast.String)
			r, ok := risks[string(s)]
			if !ok {
				return bad(`"low", "medium", "high" or "critical"`)
			}
			d.Risk = r
		case "approvers", "notify", "redact", "escalate_to":
			list, ok := stringList(val)
			if !ok {
				return bad("a list of strings")
			}
			switch key {
			case "approvers":
				d.Approvers = list
			case "notify":
				d.Notify = list
			case "redact":
				d.Redact = list
			default:
				d.EscalateTo = list
			}
		case "queue_per_thread":
			b, ok := val.(ast.Boolean)
			if !ok {
				return bad("true or false")
			}
			d.QueuePerThread = bool(b)
		case "quorum":
			n, ok := val.(ast.Number)
			q, err := json.Number(n).Int64()
			if !ok || err != nil || q < 0 || q > 100 {
				return bad("a whole number from 0 to 100")
			}
			d.Quorum = uint32(q)
		case "timeout", "escalate_after", "remind_after":
			dur, ok := duration(val)
			if !ok {
				return bad(`a duration such as "10m" or a number of seconds`)
			}
			switch key {
			case "timeout":
				d.Timeout = durationpb.New(dur)
			case "escalate_after":
				d.EscalateAfter = durationpb.New(dur)
			default:
				d.RemindAfter = durationpb.New(dur)
			}
		default:
			return fmt.Errorf("malformed decision: unknown key %q (allowed: %s)", string(key), decisionKeys)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if d.Action == airlockv1.Action_ACTION_UNSPECIFIED {
		return nil, fmt.Errorf("malformed decision: it has no action")
	}
	if d.Reason == "" {
		d.Reason = "policy says " + strings.TrimPrefix(strings.ToLower(d.Action.String()), "action_")
	}
	return d, nil
}

// jsonOf is v as Go values, for messages (what rego's own results hold).
func jsonOf(v ast.Value) any {
	j, err := ast.JSON(v)
	if err != nil {
		return v.String()
	}
	return j
}

// stringList reads an array or a set (in sorted order, as rego's JSON
// conversion gives it) of strings.
func stringList(v ast.Value) ([]string, bool) {
	var n int
	switch c := v.(type) {
	case *ast.Array:
		n = c.Len()
	case ast.Set:
		n = c.Len()
	default:
		return nil, false
	}
	out := make([]string, 0, n)
	ok := true
	add := func(t *ast.Term) {
		s, isStr := t.Value.(ast.String)
		ok = ok && isStr
		out = append(out, string(s))
	}
	switch c := v.(type) {
	case *ast.Array:
		c.Foreach(add)
	case ast.Set:
		c.Foreach(add)
	}
	if !ok {
		return nil, false
	}
	return out, true
}

func duration(v ast.Value) (time.Duration, bool) {
	switch x := v.(type) {
	case ast.String:
		d, err := time.ParseDuration(string(x))
		return d, err == nil && d >= 0
	case ast.Number:
		f, err := json.Number(x).Float64()
		return time.Duration(f * float64(time.Second)), err == nil && f >= 0
	}
	return 0, false
}

// RuleDoc is the data form of a rule in data.airlock.rules.
func RuleDoc(r *airlockv1.PolicyRule) (map[string]any, error) {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(stripMeta(r))
	if err != nil {
		return nil, fmt.Errorf("encode rule %s: %w", r.GetId(), err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("encode rule %s: %w", r.GetId(), err)
	}
	if _, ok := m["priority"]; !ok {
		m["priority"] = 0
	}
	return m, nil
}

// stripMeta drops bookkeeping fields the policy does not read, so that who
// edited a rule does not change the policy revision by itself.
func stripMeta(r *airlockv1.PolicyRule) *airlockv1.PolicyRule {
	c := &airlockv1.PolicyRule{}
	*c = airlockv1.PolicyRule{
		Id: r.Id, Priority: r.Priority, Server: r.Server, Tool: r.Tool, ToolPattern: r.ToolPattern, Pattern: r.Pattern,
		Agent: r.Agent, Args: r.Args, Effect: r.Effect, Risk: r.Risk, Reason: r.Reason, Approvers: r.Approvers,
		Quorum: r.Quorum, Timeout: r.Timeout, Notify: r.Notify, Redact: r.Redact, ToolWords: r.ToolWords,
		Commands: r.Commands, Principals: r.Principals, QueuePerThread: r.QueuePerThread,
	}
	return c
}

// mergeData returns base with run-time rules and bindings merged into
// data.airlock, rules sorted by priority then id.
func mergeData(base map[string]any, rules []*airlockv1.PolicyRule, bindings map[string]string) (map[string]any, error) {
	// Deep copy through JSON so the shared Code is never modified.
	raw, err := json.Marshal(base)
	if err != nil {
		return nil, fmt.Errorf("policy data: %w", err)
	}
	var data map[string]any
	if err := json.Unmarshal(raw, &data); err != nil {
		return nil, fmt.Errorf("policy data: %w", err)
	}
	if data == nil {
		data = map[string]any{}
	}
	al, _ := data["airlock"].(map[string]any)
	if al == nil {
		al = map[string]any{}
		data["airlock"] = al
	}
	byID := map[string]map[string]any{}
	var order []string
	if list, ok := al["rules"].([]any); ok {
		for i, e := range list {
			m, ok := e.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("policy data: airlock.rules[%d] is not an object", i)
			}
			if err := checkDataRule(m); err != nil {
				return nil, fmt.Errorf("policy data: airlock.rules[%d]: %w", i, err)
			}
			id, _ := m["id"].(string)
			if id == "" {
				id = fmt.Sprintf("#%d", i)
				m["id"] = id
			}
			if _, ok := m["priority"]; !ok {
				m["priority"] = 0
			}
			byID[id] = m
			order = append(order, id)
		}
	}
	for _, r := range rules {
		if r.GetDeleted() {
			delete(byID, r.Id)
			continue
		}
		m, err := RuleDoc(r)
		if err != nil {
			return nil, err
		}
		if _, ok := byID[r.Id]; !ok {
			order = append(order, r.Id)
		}
		byID[r.Id] = m
	}
	list := make([]any, 0, len(byID))
	for _, id := range order {
		if m, ok := byID[id]; ok {
			list = append(list, m)
			delete(byID, id) // an id listed twice in data.json keeps its first place
		}
	}
	sort.SliceStable(list, func(i, j int) bool {
		pi, pj := priorityOf(list[i]), priorityOf(list[j])
		if pi != pj {
			return pi < pj
		}
		return fmt.Sprint(list[i].(map[string]any)["id"]) < fmt.Sprint(list[j].(map[string]any)["id"])
	})
	al["rules"] = list
	b := map[string]any{}
	if existing, ok := al["bindings"].(map[string]any); ok {
		maps.Copy(b, existing)
	}
	for k, v := range bindings {
		b[k] = v
	}
	al["bindings"] = b
	return data, nil
}

func priorityOf(v any) float64 {
	m, _ := v.(map[string]any)
	switch p := m["priority"].(type) {
	case float64:
		return p
	case json.Number:
		f, _ := p.Float64()
		return f
	case int:
		return float64(p)
	}
	return 0
}

// ValidateRule checks a run-time rule before it is stored, with sentences
// that say what to fix.
func ValidateRule(r *airlockv1.PolicyRule) error {
	if r == nil {
		return fmt.Errorf("rule is required")
	}
	if !idPattern(r.Id) {
		return fmt.Errorf("rule id %q must be 1-64 characters from A-Z a-z 0-9 _ -", r.Id)
	}
	if _, ok := actions[r.Effect]; !ok {
		return fmt.Errorf("rule %s: effect %q must be allow, ask or deny", r.Id, r.Effect)
	}
	if _, ok := risks[r.Risk]; r.Risk != "" && !ok {
		return fmt.Errorf("rule %s: risk %q must be low, medium, high or critical", r.Id, r.Risk)
	}
	if r.Timeout != "" {
		if d, err := time.ParseDuration(r.Timeout); err != nil || d <= 0 {
			return fmt.Errorf("rule %s: timeout %q must be a positive duration such as 10m", r.Id, r.Timeout)
		}
	}
	for _, g := range []string{r.ToolPattern, r.Pattern} {
		if _, err := compileGlob(g, nil); g != "" && err != nil {
			return fmt.Errorf("rule %s: pattern %q is not a valid glob: %v", r.Id, g, err)
		}
	}
	for ptr, g := range r.Args {
		if !strings.HasPrefix(ptr, "/") {
			return fmt.Errorf("rule %s: argument %q must be a JSON pointer such as /path", r.Id, ptr)
		}
		if _, err := compileGlob(g, []rune{'/'}); err != nil {
			return fmt.Errorf("rule %s: argument glob %q is not valid: %v", r.Id, g, err)
		}
	}
	for ptr, g := range r.Commands {
		if !strings.HasPrefix(ptr, "/") {
			return fmt.Errorf("rule %s: command argument %q must be a JSON pointer such as /command", r.Id, ptr)
		}
		if _, err := compileGlob(g, nil); err != nil {
			return fmt.Errorf("rule %s: command glob %q is not valid: %v", r.Id, g, err)
		}
	}
	for _, p := range r.Principals {
		if strings.TrimSpace(p) == "" || strings.HasPrefix(p, "group:") {
			return fmt.Errorf("rule %s: principals must name people (got %q): list each person who may trigger the rule's tools", r.Id, p)
		}
	}
	for _, p := range r.Redact {
		if !strings.HasPrefix(p, "/") {
			return fmt.Errorf("rule %s: redact path %q must be a JSON pointer such as /password", r.Id, p)
		}
	}
	return nil
}

func idPattern(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

const generatedHelpers = `
name := concat("__", [input.call.server, input.call.tool])

arg_matches(ptr, pattern) if {
	value := object.get(input.call.arguments, [replace(replace(s, "~1", "/"), "~0", "~") | some s in split(trim_prefix(ptr, "/"), "/")], null)
	is_string(value)
	every s in split(value, "/") {
		not s in {".", ".."}
	}
	glob.match(pattern, ["/"], value)
}

principal_allowed(principals) if {
	input.call.on_behalf_of_verified == true
	input.call.on_behalf_of in principals
}

command_matches(ptr, pattern, "allow") if {
	value := object.get(input.call.arguments, [replace(replace(s, "~1", "/"), "~0", "~") | some s in split(trim_prefix(ptr, "/"), "/")], null)
	is_string(value)
	not regex.match(` + "`[<>\\x60]|\\$\\(`" + `, value)
	parts := command_parts(value)
	count(parts) > 0
	every p in parts {
		glob.match(pattern, null, p)
	}
}

command_matches(ptr, pattern, effect) if {
	effect != "allow"
	value := object.get(input.call.arguments, [replace(replace(s, "~1", "/"), "~0", "~") | some s in split(trim_prefix(ptr, "/"), "/")], null)
	is_string(value)
	some p in command_parts(value)
	glob.match(pattern, null, p)
}

command_parts(cmd) := [p |
	some s in regex.split(` + "`&&|\\|\\||\\$\\(|[;&|\\n()\\x60]`" + `, cmd)
	p := regex.replace(trim_space(s), ` + "`\\s+`" + `, " ")
	p != ""
]
`

// CompiledDataKey is the top-level data document holding the tables of the
// compiled rules: verdict and redact, indexed like data.airlock.rules, and a
// copy of the bindings (see airlock.rego).
const CompiledDataKey = "airlock_compiled"

// GeneratedModule names the module compiled from the rules data.
const GeneratedModule = "airlock_compiled_rules.rego"

// compileRules turns data.airlock.rules into Rego (package
// airlock_compiled_rules, outside data.airlock, whose mix of rules and base
// data makes every lookup there dearer): one `hits` body per rule (per word
// for tool_words) holding only the conditions the rule sets, so OPA's rule
// index discards the rules whose server, tool and words cannot match before
// evaluating anything, and the tables for CompiledDataKey. airlock.rego uses
// it when present and otherwise evaluates the same conditions over the plain
// data (opa test, opa eval); both decide alike.
func compileRules(data map[string]any) (string, map[string]any) {
	al, _ := data["airlock"].(map[string]any)
	list, _ := al["rules"].([]any)
	star := func(v any) string {
		if s, _ := v.(string); s != "" {
			return s
		}
		return "*"
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	var b strings.Builder
	b.WriteString("# Generated by the airlock policy service from data.airlock.rules; do not edit.\npackage airlock_compiled_rules\n\nok := true\n\n")
	passthrough := []string{"approvers", "quorum", "timeout", "notify", "escalate_to", "escalate_after", "remind_after", "queue_per_thread"}
	var verdicts, redacts []any
	// Refusals of rules that name principals are indexed after every rule,
	// as airlock.rego's hit() indexes them: count(rules) + i.
	refusals, refusalRedacts := make([]any, len(list)), make([]any, len(list))
	for i, x := range list {
		raw := x.(map[string]any)
		m := maps.Clone(raw)
		m["server"], m["tool"], m["agent"] = star(m["server"]), star(m["tool"]), star(m["agent"])
		m["tool_glob"], m["name_glob"] = star(m["tool_pattern"]), star(m["pattern"])
		args, _ := m["args"].(map[string]any)

		// The entry airlock.rego's entry() builds, [class, priority, index,
		// risk rank], the rule's verdict and redact tables, and its decision
		// when it is the only match (solo).
		class := 1
		if m["effect"] == "deny" {
			class = 0
		}
		verdict := map[string]any{}
		for _, k := range passthrough {
			if v, ok := raw[k]; ok {
				verdict[k] = v
			}
		}
		verdict["action"], verdict["rule_id"] = m["effect"], m["id"]
		if r, _ := raw["reason"].(string); r != "" {
			verdict["reason"] = r
		} else {
			verdict["reason"] = fmt.Sprintf("rule %v (priority %v) says %v", m["id"], m["priority"], m["effect"])
		}
		redact := raw["redact"]
		if redact == nil {
			redact = []any{}
		}
		principals := stringsOf(raw["principals"])
		refusal := map[string]any{"action": "deny", "rule_id": m["id"], "reason": fmt.Sprintf(
			"only %s may trigger this tool (rule %v): this call does not act for one of them as airlock verified", strings.Join(principals, ", "), m["id"])}
		refusals[i], refusalRedacts[i] = refusal, redact
		rank := map[string]int{"low": 1, "medium": 2, "high": 3, "critical": 4}[fmt.Sprint(m["risk"])]
		solo := maps.Clone(verdict)
		solo["risk"] = []string{"medium", "low", "medium", "high", "critical"}[rank]
		red := []string{}
		if list, ok := redact.([]any); ok {
			for _, p := range list {
				red = append(red, fmt.Sprint(p))
			}
		}
		slices.Sort(red)
		solo["redact"] = slices.Compact(red)
		verdicts = append(verdicts, verdict)
		redacts = append(redacts, redact)
		// The whole decision rides in the entry as a fifth element: the entry
		// that decides alone is the decision, with no table to read.
		entry, _ := json.Marshal([]any{class, m["priority"], i, rank, solo})
		refusalSolo := maps.Clone(refusal)
		refusalSolo["risk"], refusalSolo["redact"] = solo["risk"], solo["redact"]
		refusalEntry, _ := json.Marshal([]any{0, m["priority"], len(list) + i, rank, refusalSolo})

		var conds []string
		if m["server"] != "*" {
			conds = append(conds, "input.call.server == "+q(m["server"].(string)))
		}
		if m["tool"] != "*" {
			conds = append(conds, "input.call.tool == "+q(m["tool"].(string)))
		}
		if m["agent"] != "*" {
			conds = append(conds, "input.call.agent_id == "+q(m["agent"].(string)))
		}
		// A glob's literal first character is an equality OPA's rule index
		// can use, so most glob rules are discarded without running the glob.
		if c, ok := literalFirst(m["tool_glob"].(string)); ok {
			conds = append(conds, "input.call.tool_initial == "+q(c))
		}
		// A pattern that lists exact names ("{claude__Read,gemini__read_file}",
		// as the coding-agent profile's do) becomes one body per name with
		// server and tool equalities, which OPA's rule index looks up: such
		// rules cost nothing for any other tool.
		names := []string{""}
		if alts, ok := literalNames(m["name_glob"].(string)); ok {
			names = names[:0]
			for _, n := range alts {
				srv, tool, _ := strings.Cut(n, "__")
				names = append(names, "input.call.server == "+q(srv)+"\n\tinput.call.tool == "+q(tool))
			}
		} else {
			if c, ok := literalFirst(m["name_glob"].(string)); ok {
				conds = append(conds, "input.call.server_initial == "+q(c))
			}
			if m["name_glob"] != "*" {
				conds = append(conds, "glob.match("+q(m["name_glob"].(string))+", null, name)")
			}
		}
		if m["tool_glob"] != "*" {
			conds = append(conds, "glob.match("+q(m["tool_glob"].(string))+", null, input.call.tool)")
		}
		for _, ptr := range slices.Sorted(maps.Keys(args)) {
			pat, _ := args[ptr].(string)
			conds = append(conds, "arg_matches("+q(ptr)+", "+q(pat)+")")
		}
		cmds, _ := m["commands"].(map[string]any)
		for _, ptr := range slices.Sorted(maps.Keys(cmds)) {
			pat, _ := cmds[ptr].(string)
			conds = append(conds, "command_matches("+q(ptr)+", "+q(pat)+", "+q(fmt.Sprint(m["effect"]))+")")
		}
		// A rule naming principals has two bodies: its own entry for the
		// people it names, its refusal for everyone else.
		bodies := []struct {
			entry []byte
			cond  string
		}{{entry, ""}}
		if len(principals) > 0 {
			list, _ := json.Marshal(principals)
			bodies = []struct {
				entry []byte
				cond  string
			}{{entry, "principal_allowed(" + string(list) + ")"}, {refusalEntry, "not principal_allowed(" + string(list) + ")"}}
		}
		// A rule with tool_words matches a tool any of whose words is listed
		// ("*" matches every tool; an empty list none), as airlock.rego's
		// word_matches says. One body per word, `"w" in input.call.tool_words`,
		// is a membership OPA's rule index looks up by the tool's own words,
		// so only the bodies of words the tool has are evaluated.
		words := []string{""}
		if ws, ok := m["tool_words"].([]any); ok {
			words = words[:0]
			for _, w := range ws {
				if w == "*" {
					words = []string{""}
					break
				}
				words = append(words, fmt.Sprint(w))
			}
			slices.Sort(words)
			words = slices.Compact(words)
		}
		for _, body := range bodies {
			for _, n := range names {
				for _, w := range words {
					fmt.Fprintf(&b, "hits contains %s if {\n", body.entry)
					if len(conds) == 0 && w == "" && body.cond == "" && n == "" {
						b.WriteString("\ttrue\n")
					}
					if n != "" {
						b.WriteString("\t" + n + "\n")
					}
					if w != "" {
						b.WriteString("\t" + q(w) + " in input.call.tool_words\n")
					}
					for _, c := range conds {
						b.WriteString("\t" + c + "\n")
					}
					if body.cond != "" {
						b.WriteString("\t" + body.cond + "\n")
					}
					b.WriteString("}\n\n")
				}
			}
		}
	}
	// Helpers of its own, so the module compiles beside any policy.
	b.WriteString(generatedHelpers)
	// The bindings ride along so the decision's fast path reads them outside
	// data.airlock, where each read costs several times more (OPA merges the
	// package's rules with its base data there).
	return b.String(), map[string]any{"verdict": append(verdicts, refusals...), "redact": append(redacts, refusalRedacts...), "bindings": al["bindings"]}
}

// stringsOf reads a JSON list of strings (nil for anything else).
func stringsOf(v any) []string {
	list, _ := v.([]any)
	var out []string
	for _, e := range list {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func jsonNumber(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// literalNames returns the exact qualified names a pattern lists — "a__b"
// or "{a__b,c__d}", no wildcards — or false for any other pattern.
func literalNames(g string) ([]string, bool) {
	names := []string{g}
	if strings.HasPrefix(g, "{") && strings.HasSuffix(g, "}") {
		names = strings.Split(g[1:len(g)-1], ",")
	}
	if strings.ContainsAny(strings.Join(names, ""), `*?[]{}\`) {
		return nil, false
	}
	for _, n := range names {
		if srv, tool, ok := strings.Cut(n, "__"); !ok || srv == "" || tool == "" {
			return nil, false
		}
	}
	return names, true
}

// literalFirst returns a glob's first character when it is a literal, so
// the glob can only match names that start with it.
func literalFirst(g string) (string, bool) {
	for _, r := range g {
		if strings.ContainsRune(`*?[{\`, r) {
			return "", false
		}
		return string(r), true
	}
	return "", false
}

// checkDataRule holds a data.json rule to the same shape and checks as a
// run-time rule, so a typo refuses the policy instead of matching everything.
func checkDataRule(m map[string]any) error {
	raw, err := json.Marshal(m)
	if err != nil {
		return err
	}
	r := &airlockv1.PolicyRule{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, r); err != nil {
		return err
	}
	if r.Id == "" {
		r.Id = "unnamed"
	}
	return ValidateRule(r)
}
