package decide

import (
	"context"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// DocumentForTest is the decision document the evaluator's policy gives
// call, as Go values, for tests that compare it with the plain policy's.
func (e *Evaluator) DocumentForTest(ctx context.Context, call *airlockv1.ToolCall) (any, error) {
	in, err := inputValue(call)
	if err != nil {
		return nil, err
	}
	t, err := e.evalQuery(ctx, in)
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, fmt.Errorf("%s is undefined", Query)
	}
	return ast.JSON(t.Value)
}
