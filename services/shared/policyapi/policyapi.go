// Package policyapi is the client for the policy service's endpoints
// (airlock.api.policy.*): run-time rules and dry-run evaluation. Any policy
// replica answers; the change reaches every replica through the policy
// bucket.
package policyapi

import (
	"context"

	"github.com/nats-io/nats.go"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/rpc"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// Service is the micro service name.
const Service = "policy"

// Group is the subject prefix of every endpoint.
const Group = subject.APIPrefix + "." + Service

// Endpoint names, relative to Group.
const (
	EndpointRulesList   = "rules.list"
	EndpointRulesPut    = "rules.put"
	EndpointRulesDelete = "rules.delete"
	EndpointEval        = "eval"
	// The candidate policy in shadow: start and stop act for a person, so
	// they are sealed; status is a read.
	EndpointShadowStart  = "shadow.start"
	EndpointShadowStop   = "shadow.stop"
	EndpointShadowStatus = "shadow.status"
)

// Endpoint subjects.
var (
	RulesList    = subject.API(Service, EndpointRulesList)
	RulesPut     = subject.API(Service, EndpointRulesPut)
	RulesDelete  = subject.API(Service, EndpointRulesDelete)
	Eval         = subject.API(Service, EndpointEval)
	ShadowStart  = subject.API(Service, EndpointShadowStart)
	ShadowStop   = subject.API(Service, EndpointShadowStop)
	ShadowStatus = subject.API(Service, EndpointShadowStatus)
)

// Client calls the policy service over NATS. Rule changes act for the
// principal the front-end authenticated, so they are sealed with the
// front-end key; reading rules and dry runs need no seal.
type Client struct{ c rpc.Caller }

// New returns a client whose requests are sealed as frontend with key (a
// zero key: unsealed, enough for reading and dry runs).
func New(nc *nats.Conn, key seal.Key, frontend string) *Client {
	return &Client{c: rpc.Caller{NC: nc, Key: key, Frontend: frontend}}
}

// ListRules returns the run-time rules and the revision in force.
func (c *Client) ListRules(ctx context.Context) (*airlockv1.RulesListResponse, error) {
	resp := &airlockv1.RulesListResponse{}
	return resp, c.c.Call(ctx, RulesList, &airlockv1.RulesListRequest{}, resp)
}

// PutRule creates or replaces a rule; by says who changes it. An invalid
// rule comes back as apierr.InvalidRequest with what to fix.
func (c *Client) PutRule(ctx context.Context, rule *airlockv1.PolicyRule, by *airlockv1.Actor) (*airlockv1.RulePutResponse, error) {
	resp := &airlockv1.RulePutResponse{}
	return resp, c.c.Call(ctx, RulesPut, &airlockv1.RulePutRequest{Rule: rule, By: by}, resp)
}

// DeleteRule deletes a rule (a run-time rule or one of the policy's data.json).
func (c *Client) DeleteRule(ctx context.Context, id string, by *airlockv1.Actor) error {
	return c.c.Call(ctx, RulesDelete, &airlockv1.RuleDeleteRequest{Id: id, By: by}, &airlockv1.RuleDeleteResponse{})
}

// Eval dry-runs call against the policy in force.
func (c *Client) Eval(ctx context.Context, call *airlockv1.ToolCall) (*airlockv1.Decision, error) {
	resp := &airlockv1.PolicyEvalResponse{}
	err := c.c.Call(ctx, Eval, &airlockv1.PolicyEvalRequest{Call: call}, resp)
	return resp.GetDecision(), err
}

// StartShadow runs the candidate (file name → Rego, data.json text) in
// shadow on every replica; by says who turns it on. A candidate that does
// not compile comes back as apierr.InvalidRequest.
func (c *Client) StartShadow(ctx context.Context, req *airlockv1.ShadowStartRequest) (*airlockv1.ShadowStatusResponse, error) {
	resp := &airlockv1.ShadowStatusResponse{}
	return resp, c.c.Call(ctx, ShadowStart, req, resp)
}

// StopShadow turns shadow evaluation off on every replica.
func (c *Client) StopShadow(ctx context.Context, by *airlockv1.Actor) (*airlockv1.ShadowStatusResponse, error) {
	resp := &airlockv1.ShadowStatusResponse{}
	return resp, c.c.Call(ctx, ShadowStop, &airlockv1.ShadowStopRequest{By: by}, resp)
}

// ShadowStatus is the shadow state and the counters of the replica that answers.
func (c *Client) ShadowStatus(ctx context.Context) (*airlockv1.ShadowStatusResponse, error) {
	resp := &airlockv1.ShadowStatusResponse{}
	return resp, c.c.Call(ctx, ShadowStatus, &airlockv1.ShadowStatusRequest{}, resp)
}
