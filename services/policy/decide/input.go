package decide

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/calls"
)

// Keys of the input document, built once: every decision reuses them (OPA
// never modifies input terms), which saves an allocation and a hash each.
var (
	keyCall       = ast.StringTerm("call")
	keyAgentID    = ast.StringTerm("agent_id")
	keyCallID     = ast.StringTerm("call_id")
	keyRevision   = ast.StringTerm("revision")
	keyThreadID   = ast.StringTerm("thread_id")
	keyOnBehalfOf = ast.StringTerm("on_behalf_of")
	keyVerified   = ast.StringTerm("on_behalf_of_verified")
	keyServer     = ast.StringTerm("server")
	keyTool       = ast.StringTerm("tool")
	keyReason     = ast.StringTerm("reason")
	keyArguments  = ast.StringTerm("arguments")
	keyAnnots     = ast.StringTerm("annotations")
	keyAnnTrusted = ast.StringTerm("annotations_trusted")
	keyTime       = ast.StringTerm("time")
)

// inputTime is how the input document carries the time of a decision
// (input.time): RFC 3339 in UTC with as many fractional digits as it needs,
// the instant time.now_ns() answers in the same evaluation.
func inputTime(now time.Time) string { return now.UTC().Format(time.RFC3339Nano) }

// lazyTime is input.time as an evaluation's lazy input holds it: the time
// itself, formatted only when the policy reads it (OPA converts a value of a
// type it does not know through its JSON form, which is inputTime's). Most
// policies never read it, and a formatted string in the document would cost
// every decision two allocations.
type lazyTime time.Time

// MarshalJSON is the JSON string of inputTime.
func (t lazyTime) MarshalJSON() ([]byte, error) {
	return strconv.AppendQuote(nil, inputTime(time.Time(t))), nil
}

// inputValue builds {"call": {...}, "time": ...} as an ast value directly:
// no JSON round trip. It is the input document in full, what Input gives;
// an evaluation gets the same document built lazily (callInput).
func inputValue(call *airlockv1.ToolCall, now time.Time) (ast.Value, error) {
	args, err := structValue(call.GetArguments())
	if err != nil {
		return nil, err
	}
	// One block for the value terms instead of an allocation each.
	var v [10]ast.Term
	str := func(i int, s string) *ast.Term {
		v[i].Value = ast.String(s)
		return &v[i]
	}
	v[2].Value = ast.InternedTerm(int(call.GetRevision())).Value
	v[8].Value = args
	items := make([][2]*ast.Term, 0, 12)
	items = append(items,
		ast.Item(keyAgentID, str(0, call.GetAgentId())),
		ast.Item(keyCallID, str(1, call.GetCallId())),
		ast.Item(keyRevision, &v[2]),
		ast.Item(keyThreadID, str(3, call.GetThreadId())),
		ast.Item(keyOnBehalfOf, str(4, call.GetOnBehalfOf())),
		// airlock vouches for on_behalf_of (a binding or a front-end's seal):
		// what a rule's principals read.
		ast.Item(keyVerified, ast.InternedTerm(call.GetOnBehalfOfVerified())),
		ast.Item(keyServer, str(5, call.GetServer())),
		ast.Item(keyTool, str(6, call.GetTool())),
		ast.Item(keyReason, str(7, call.GetReason())),
		ast.Item(keyArguments, &v[8]),
	)
	if ann := call.GetAnnotations(); ann != nil {
		// The upstream's tool annotations (from the MCP gateway), and
		// whether airlock believes them: annotations_trusted is true only
		// for a trusted upstream on a request a front-end sealed (the
		// policy service's vouch). Policies read them; the compiled rules
		// (the Go matcher) do not match on them.
		av, err := structValue(ann)
		if err != nil {
			return nil, err
		}
		items = append(items, ast.Item(keyAnnots, ast.NewTerm(av)), ast.Item(keyAnnTrusted, ast.InternedTerm(call.GetAnnotationsTrusted())))
	}
	v[9].Value = ast.NewObject(items...)
	return ast.NewObject(ast.Item(keyCall, &v[9]), ast.Item(keyTime, ast.StringTerm(inputTime(now)))), nil
}

// callInput is the input document of one evaluation, {"call": {...},
// "time": ...} as inputValue builds it, but lazy: OPA's lazy objects over Go values, each
// converted to AST only when the policy reads it. The common decision (the
// compiled rules' own, passed through by the policy) reads nothing of it
// but through the built-in functions, which match view, read straight from
// the protobuf call; building the document in full costs about a third of
// such a decision.
type callInput struct {
	// doc is the document, call its input.call: the built-in functions
	// match view when their operand is this very object.
	doc, call ast.Value
	view      callView
	// The Go maps under doc, call and call.arguments, kept from one
	// evaluation to the next (see inputPool).
	root, fields, args map[string]any
	// at is input.time; root holds a pointer to it (no allocation).
	at lazyTime

	// What evalQuery reuses from one evaluation to the next: the input
	// term, the first result and the function that takes it, and a
	// cancellation none of them fired (with its Cancel as a func value).
	term     ast.Term
	result   *ast.Term
	collect  func(topdown.QueryResult) error
	cancel   topdown.Cancel
	cancelFn func()
}

// callInputKey carries an evaluation's callInput in its context, to the
// built-in functions.
type callInputKey struct{}

// fill makes in call's input at time now: its view, then its document.
func (in *callInput) fill(call *airlockv1.ToolCall, now time.Time) error {
	if err := in.fillView(call); err != nil {
		return err
	}
	in.fillDoc(call, now)
	return nil
}

// fillView makes in.view, what the compiled rules match: all a decision
// the compiled rules make alone reads of the call (Evaluator.compiledDecides).
func (in *callInput) fillView(call *airlockv1.ToolCall) error {
	if in.args == nil {
		in.args = make(map[string]any, len(call.GetArguments().GetFields()))
	}
	args, err := nativeFields(in.args, call.GetArguments())
	if err != nil {
		return err
	}
	in.view = callView{
		agent: call.GetAgentId(), server: call.GetServer(), tool: call.GetTool(),
		onBehalfOf: call.GetOnBehalfOf(), verified: call.GetOnBehalfOfVerified(), args: args,
	}
	if ann := call.GetAnnotations(); ann != nil {
		av, err := nativeStruct(ann)
		if err != nil {
			return err
		}
		in.view.annotations, in.view.annotationsTrusted = av, call.GetAnnotationsTrusted()
	}
	return nil
}

// fillDoc makes in.doc, call's input at time now, over the Go values of
// in.view (made first). Each Go value converts to what inputValue builds
// (InterfaceToValue: strings, booleans, float64 formatted as protoValue
// formats it, maps, slices).
func (in *callInput) fillDoc(call *airlockv1.ToolCall, now time.Time) {
	if in.fields == nil {
		in.root, in.fields = make(map[string]any, 2), make(map[string]any, 12)
	}
	f := in.fields
	f["agent_id"], f["call_id"], f["revision"] = call.GetAgentId(), call.GetCallId(), int(call.GetRevision())
	f["thread_id"], f["on_behalf_of"], f["on_behalf_of_verified"] = call.GetThreadId(), call.GetOnBehalfOf(), call.GetOnBehalfOfVerified()
	f["server"], f["tool"], f["reason"], f["arguments"] = call.GetServer(), call.GetTool(), call.GetReason(), in.view.args
	if call.GetAnnotations() != nil {
		f["annotations"], f["annotations_trusted"] = in.view.annotations, call.GetAnnotationsTrusted()
	} else {
		delete(f, "annotations")
		delete(f, "annotations_trusted")
	}
	in.call = ast.LazyObject(f)
	in.root["call"] = in.call
	in.at = lazyTime(now)
	in.root["time"] = &in.at
	in.doc = ast.LazyObject(in.root)
}

// maxReusedArguments bounds the arguments map an input in the pool keeps.
const maxReusedArguments = 32

// inputPool hands out callInputs, one per evaluation, and takes them back
// (each Evaluator has its own: no process-wide state). Filling the maps of
// one that was used allocates nothing for them. An input is given back only
// when nothing can read it again: topdown keeps no input past the
// evaluation, the virtual cache is emptied, the inter-query value cache
// holds what built-in functions compile from their operands (strings), and
// the decision has been read into protobuf.
type inputPool struct{ pool sync.Pool }

// get is a callInput from the pool, to fill (or, for a policy whose input
// is built in full, to hold that document: Evaluator.fullInput).
func (p *inputPool) get() *callInput {
	if in, _ := p.pool.Get().(*callInput); in != nil {
		return in
	}
	return &callInput{}
}

func (p *inputPool) put(in *callInput) {
	// The next fill sets every key again; what may be large goes now, so
	// that an input in the pool keeps no call's arguments alive.
	if in.fields != nil {
		in.fields["arguments"] = nil
		delete(in.fields, "annotations")
	}
	// An emptied map keeps its size: one that held many arguments is
	// dropped rather than cleared on every use.
	if len(in.args) > maxReusedArguments {
		in.args = nil
	}
	clear(in.args)
	in.doc, in.call, in.view, in.term.Value, in.result = nil, nil, callView{}, nil, nil
	p.pool.Put(in)
}

// nativeStruct is s as Go values: what protoValue builds, before
// conversion to AST (numbers stay float64: OPA formats them as protoValue
// does, non-finite ones included).
func nativeStruct(s *structpb.Struct) (map[string]any, error) {
	return nativeFields(make(map[string]any, len(s.GetFields())), s)
}

// nativeFields is nativeStruct into m, which must be empty.
func nativeFields(m map[string]any, s *structpb.Struct) (map[string]any, error) {
	for k, v := range s.GetFields() {
		nv, err := nativeValue(v)
		if err != nil {
			return nil, err
		}
		m[k] = nv
	}
	return m, nil
}

func nativeValue(v *structpb.Value) (any, error) {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NullValue, nil:
		return nil, nil
	case *structpb.Value_BoolValue:
		return k.BoolValue, nil
	case *structpb.Value_NumberValue:
		return k.NumberValue, nil
	case *structpb.Value_StringValue:
		return k.StringValue, nil
	case *structpb.Value_StructValue:
		return nativeStruct(k.StructValue)
	case *structpb.Value_ListValue:
		list := make([]any, 0, len(k.ListValue.GetValues()))
		for _, e := range k.ListValue.GetValues() {
			nv, err := nativeValue(e)
			if err != nil {
				return nil, err
			}
			list = append(list, nv)
		}
		return list, nil
	default:
		return nil, fmt.Errorf("argument of unsupported kind %T", k)
	}
}

// nativeOf is an AST value as the Go values the matcher reads: objects
// with string keys as maps, arrays as slices, strings and booleans as
// themselves, numbers and null as they are (no condition matches them).
// What a call cannot hold (a set, a key that is not a string) is an error,
// which names no value: it reaches the decision's reason, and the value may
// be the agent's, of any size.
// The built-in functions need it only for an operand other than the
// evaluation's own input.call (a policy evaluating `with input ...`).
func nativeOf(v ast.Value) (any, error) {
	switch x := v.(type) {
	case ast.String:
		return string(x), nil
	case ast.Boolean:
		return bool(x), nil
	case ast.Object:
		m := make(map[string]any, x.Len())
		err := x.Iter(func(k, e *ast.Term) error {
			ks, ok := k.Value.(ast.String)
			if !ok {
				return fmt.Errorf("a key of type %s is not a string", ast.ValueName(k.Value))
			}
			n, err := nativeOf(e.Value)
			m[string(ks)] = n
			return err
		})
		return m, err
	case *ast.Array:
		list := make([]any, 0, x.Len())
		var err error
		x.Foreach(func(e *ast.Term) {
			n, nerr := nativeOf(e.Value)
			list, err = append(list, n), cmp.Or(err, nerr)
		})
		return list, err
	case ast.Set:
		return nil, errors.New("a set is no value a call holds")
	}
	return v, nil
}

// ToolWords splits a tool name as airlock.rego's tool_words does
// (calls.NameWords).
func ToolWords(tool string) []string { return slices.Collect(calls.NameWords(tool)) }

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
