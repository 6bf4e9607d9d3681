package policy

import (
	"context"
	"fmt"

	"github.com/open-policy-agent/opa/v1/rego"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// DocumentForTest is the decision document the evaluator's policy gives
// call, as Go values, for tests that compare it with the plain policy's.
func (e *Evaluator) DocumentForTest(ctx context.Context, call *airlockv1.ToolCall) (any, error) {
	in, err := inputValue(call)
	if err != nil {
		return nil, err
	}
	rs, err := e.pq.Eval(ctx, rego.EvalParsedInput(in))
	if err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("%s is undefined", Query)
	}
	return rs[0].Expressions[0].Value, nil
}
