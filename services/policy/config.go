package policy

import (
	"context"

	"github.com/airlock-gate/airlock/services/shared/svc"
)

// NewFromConfig builds the policy service as configured: the Rego engine
// (cfg.Policy.Dir or the built-in default policy, run-time rules from the
// policy bucket, profile bindings from cfg.Policy.Profiles, standing grants)
// and, because the engine can be edited, the rules endpoints.
func NewFromConfig(ctx context.Context, deps svc.Deps) (*Service, error) {
	e, err := NewEngine(ctx, deps)
	if err != nil {
		return nil, err
	}
	return New(deps, e, e.Serve)
}
