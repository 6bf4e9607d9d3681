package policy

import (
	"context"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// NewFromConfig builds the policy service as configured.
// TODO(policy issue): replace askEverything with the Rego engine.
func NewFromConfig(ctx context.Context, deps svc.Deps) (*Service, error) {
	e, err := NewEngine(ctx, deps)
	if err != nil {
		return nil, err
	}
	return New(deps, e), nil
}

// NewEngine builds the decision engine.
func NewEngine(context.Context, svc.Deps) (Decider, error) { return askEverything{}, nil }

type askEverything struct{}

func (askEverything) Decide(context.Context, *airlockv1.ToolCall) *airlockv1.Decision {
	return &airlockv1.Decision{Action: airlockv1.Action_ACTION_ASK, Reason: "no policy engine yet"}
}
