// Package approvalapi is the client every front-end (console, Slack, CLI,
// REST, gateway) uses to reach the approval service's endpoints. The service
// alone authorizes; callers pass the principal they authenticated and seal
// the request with the front-end key, without which the service acts on
// nothing.
package approvalapi

import (
	"context"

	"github.com/nats-io/nats.go"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/rpc"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// Service is the micro service name; endpoints are airlock.api.approval.<name>.
const Service = "approval"

// ConsoleFrontend is the name the console seals its requests as: the
// front-end that holds people's roles (a cancel honours Actor.operator
// only from it).
const ConsoleFrontend = "console"

// Endpoint names.
const (
	List          = "list"
	Get           = "get"
	Decide        = "decide"
	Cancel        = "cancel"
	ApproveThread = "approve_thread"
	GrantsCreate  = "grants.create"
	GrantsList    = "grants.list"
	GrantsRevoke  = "grants.revoke"
	// The "did it happen?" tasks of calls that ended in doubt.
	InDoubtList    = "in_doubt.list"
	InDoubtGet     = "in_doubt.get"
	InDoubtResolve = "in_doubt.resolve"
)

// Subject of an endpoint.
func Subject(endpoint string) string { return subject.API(Service, endpoint) }

// Client calls the approval service over NATS.
type Client struct{ c rpc.Caller }

// New returns a client whose requests are sealed as frontend with key.
func New(nc *nats.Conn, key seal.Key, frontend string) *Client {
	return &Client{c: rpc.Caller{NC: nc, Key: key, Frontend: frontend}}
}

func (c *Client) List(ctx context.Context, req *airlockv1.ListRequest) (*airlockv1.ListResponse, error) {
	resp := &airlockv1.ListResponse{}
	return resp, c.c.Call(ctx, Subject(List), req, resp)
}

// Get returns the record of a call revision (revision 0: the newest).
func (c *Client) Get(ctx context.Context, agent, callID string, revision uint32) (*airlockv1.ApprovalRecord, error) {
	resp := &airlockv1.GetResponse{}
	err := c.c.Call(ctx, Subject(Get), &airlockv1.GetRequest{AgentId: agent, CallId: callID, Revision: revision}, resp)
	return resp.GetRecord(), err
}

func (c *Client) Decide(ctx context.Context, req *airlockv1.DecideRequest) (*airlockv1.DecideResponse, error) {
	resp := &airlockv1.DecideResponse{}
	return resp, c.c.Call(ctx, Subject(Decide), req, resp)
}

func (c *Client) Cancel(ctx context.Context, req *airlockv1.CancelRequest) (*airlockv1.CancelResponse, error) {
	resp := &airlockv1.CancelResponse{}
	return resp, c.c.Call(ctx, Subject(Cancel), req, resp)
}

func (c *Client) ApproveThread(ctx context.Context, req *airlockv1.ApproveThreadRequest) (*airlockv1.ApproveThreadResponse, error) {
	resp := &airlockv1.ApproveThreadResponse{}
	return resp, c.c.Call(ctx, Subject(ApproveThread), req, resp)
}

func (c *Client) CreateGrant(ctx context.Context, req *airlockv1.CreateGrantRequest) (*airlockv1.StandingGrant, error) {
	resp := &airlockv1.CreateGrantResponse{}
	err := c.c.Call(ctx, Subject(GrantsCreate), req, resp)
	return resp.GetGrant(), err
}

func (c *Client) ListGrants(ctx context.Context, includeInactive bool) ([]*airlockv1.StandingGrant, error) {
	resp := &airlockv1.ListGrantsResponse{}
	err := c.c.Call(ctx, Subject(GrantsList), &airlockv1.ListGrantsRequest{IncludeInactive: includeInactive}, resp)
	return resp.GetGrants(), err
}

func (c *Client) RevokeGrant(ctx context.Context, req *airlockv1.RevokeGrantRequest) (*airlockv1.StandingGrant, error) {
	resp := &airlockv1.RevokeGrantResponse{}
	err := c.c.Call(ctx, Subject(GrantsRevoke), req, resp)
	return resp.GetGrant(), err
}

// ListInDoubt lists the "did it happen?" tasks of calls that ended in doubt.
func (c *Client) ListInDoubt(ctx context.Context, req *airlockv1.ListInDoubtRequest) (*airlockv1.ListInDoubtResponse, error) {
	resp := &airlockv1.ListInDoubtResponse{}
	return resp, c.c.Call(ctx, Subject(InDoubtList), req, resp)
}

// GetInDoubt returns the task of a call revision (revision 0: the newest).
func (c *Client) GetInDoubt(ctx context.Context, agent, callID string, revision uint32) (*airlockv1.InDoubtTask, error) {
	resp := &airlockv1.GetInDoubtResponse{}
	err := c.c.Call(ctx, Subject(InDoubtGet), &airlockv1.GetInDoubtRequest{AgentId: agent, CallId: callID, Revision: revision}, resp)
	return resp.GetTask(), err
}

// ResolveInDoubt records a person's answer to "did it happen?".
func (c *Client) ResolveInDoubt(ctx context.Context, req *airlockv1.ResolveInDoubtRequest) (*airlockv1.ResolveInDoubtResponse, error) {
	resp := &airlockv1.ResolveInDoubtResponse{}
	return resp, c.c.Call(ctx, Subject(InDoubtResolve), req, resp)
}
