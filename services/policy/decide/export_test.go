package decide

import (
	"context"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// DocumentForTest is the decision document the evaluator's policy gives
// call, as Go values, for tests that compare it with the plain policy's.
// It evaluates call's input twice, as an evaluation builds it (lazily, the
// built-in functions matching its view) and built in full (the built-in
// functions reading it), and fails unless both give the same document.
func (e *Evaluator) DocumentForTest(ctx context.Context, call *airlockv1.ToolCall) (any, error) {
	in, err := newCallInput(call)
	if err != nil {
		return nil, err
	}
	lazy, err := e.evalQuery(context.WithValue(ctx, callInputKey{}, in), in)
	if err != nil {
		return nil, err
	}
	full, err := inputValue(call)
	if err != nil {
		return nil, err
	}
	t, err := e.evalQuery(ctx, &callInput{doc: full})
	if err != nil {
		return nil, err
	}
	if t == nil || lazy == nil {
		return nil, fmt.Errorf("%s is undefined (lazy input: %v, full input: %v)", Query, lazy, t)
	}
	if lazy.Value.Compare(t.Value) != 0 {
		return nil, fmt.Errorf("the lazy input decides %v, the full input %v", lazy, t)
	}
	return ast.JSON(t.Value)
}

// LazyInputForTest is call's input document as an evaluation builds it
// (lazy: it converts what is read of it).
func LazyInputForTest(call *airlockv1.ToolCall) (ast.Value, error) {
	in, err := newCallInput(call)
	if err != nil {
		return nil, err
	}
	return in.doc, nil
}

// FullInputForTest is call's input document built in full (what Input gives).
func FullInputForTest(call *airlockv1.ToolCall) (ast.Value, error) { return inputValue(call) }

// newCallInput builds call's lazy input document and its view.
func newCallInput(call *airlockv1.ToolCall) (*callInput, error) {
	in := &callInput{}
	if err := in.fill(call); err != nil {
		return nil, err
	}
	return in, nil
}
