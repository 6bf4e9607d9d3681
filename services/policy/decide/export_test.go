package decide

import (
	"context"
	"fmt"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// DocumentForTest is the decision document the evaluator's policy gives
// call, as Go values, for tests that compare it with the plain policy's.
// It evaluates call's input twice, as an evaluation builds it (lazily, the
// built-in functions matching its view) and built in full (the built-in
// functions reading it), and fails unless both give the same document.
func (e *Evaluator) DocumentForTest(ctx context.Context, call *airlockv1.ToolCall) (any, error) {
	now := time.Now()
	in, err := newCallInput(call, now)
	if err != nil {
		return nil, err
	}
	lazy, err := e.evalQuery(context.WithValue(ctx, callInputKey{}, in), in, now)
	if err != nil {
		return nil, err
	}
	full, err := inputValue(call, now)
	if err != nil {
		return nil, err
	}
	t, err := e.evalQuery(ctx, &callInput{doc: full}, now)
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

// LazyInputForTest is call's input document at time now as an evaluation
// builds it (lazy: it converts what is read of it).
func LazyInputForTest(call *airlockv1.ToolCall, now time.Time) (ast.Value, error) {
	in, err := newCallInput(call, now)
	if err != nil {
		return nil, err
	}
	return in.doc, nil
}

// FullInputForTest is call's input document at time now built in full
// (what Input gives).
func FullInputForTest(call *airlockv1.ToolCall, now time.Time) (ast.Value, error) {
	return inputValue(call, now)
}

// newCallInput builds call's lazy input document at time now and its view.
func newCallInput(call *airlockv1.ToolCall, now time.Time) (*callInput, error) {
	in := &callInput{}
	if err := in.fill(call, now); err != nil {
		return nil, err
	}
	return in, nil
}

// CompiledDecidesForTest reports whether Evaluate takes the compiled
// rules' decision without running topdown (passesCompiledDecision).
func (e *Evaluator) CompiledDecidesForTest() bool { return e.compiledDecides }

// EvaluateInTopdownForTest is Evaluate running topdown whatever the
// policy (compiledDecides off for the call). Not for concurrent use.
func (e *Evaluator) EvaluateInTopdownForTest(ctx context.Context, call *airlockv1.ToolCall, now time.Time) (*airlockv1.Decision, error) {
	on := e.compiledDecides
	e.compiledDecides = false
	defer func() { e.compiledDecides = on }()
	return e.Evaluate(ctx, call, now)
}
