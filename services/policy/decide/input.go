package decide

import (
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
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
)

// inputValue builds {"call": {...}} as an ast value directly: no JSON round trip.
func inputValue(call *airlockv1.ToolCall) (ast.Value, error) {
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
	return ast.NewObject(ast.Item(keyCall, &v[9])), nil
}

// ToolWords splits a tool name as airlock.rego's tool_words does: at runs
// of _ . - and before an ASCII capital that follows a lower-case letter or
// digit, lower-cased, empty words dropped.
func ToolWords(tool string) []string { return slices.Collect(toolWords(tool)) }

// toolWords yields ToolWords(tool) one by one. (Hand-written: this runs on
// every decision, and a regexp costs more than the rest of the input; an
// iterator, so that matching allocates no list of words.)
func toolWords(tool string) iter.Seq[string] {
	return func(yield func(string) bool) {
		start := 0
		for i := 0; i <= len(tool); i++ {
			end := -1 // where a word ends before i, if one does
			next := start
			switch {
			case i == len(tool):
				end = i
			case tool[i] == '_' || tool[i] == '.' || tool[i] == '-':
				end, next = i, i+1
			case tool[i] >= 'A' && tool[i] <= 'Z' && i > 0 && (tool[i-1] >= 'a' && tool[i-1] <= 'z' || tool[i-1] >= '0' && tool[i-1] <= '9'):
				end, next = i, i
			}
			if end < 0 {
				continue
			}
			if end > start && !yield(strings.ToLower(tool[start:end])) {
				return
			}
			start = next
		}
	}
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
