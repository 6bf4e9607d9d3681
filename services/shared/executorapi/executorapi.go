// Package executorapi is the client for the executor's endpoint
// (airlock.api.executor.tools): the registry's tools as their servers
// describe them. Any executor replica answers; it needs no seal (it changes
// nothing). Front-ends that show the tools (the MCP gateway) read them here
// rather than opening connections of their own to the upstream servers, and
// list them again when subject.ToolsChanged says a server's tools changed.
package executorapi

import (
	"context"

	"github.com/nats-io/nats.go"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/rpc"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// Service is the micro service name.
const Service = "executor"

// EndpointTools is the tools endpoint, relative to the service's group.
const EndpointTools = "tools"

// Tools is the subject of the tools endpoint.
var Tools = subject.API(Service, EndpointTools)

// Kinds of tools (UpstreamTool.kind).
const (
	KindMCP     = "mcp"
	KindWebhook = "webhook"
	KindBuiltin = "builtin"
)

// Changed is the body of a subject.ToolsChanged notice.
type Changed struct {
	Server string `json:"server"`
}

// Client calls the executor over NATS.
type Client struct{ nc *nats.Conn }

// New returns a client.
func New(nc *nats.Conn) *Client { return &Client{nc: nc} }

// List returns every tool of the registry, and the servers that could not
// be listed just now.
func (c *Client) List(ctx context.Context) (*airlockv1.ToolsListResponse, error) {
	resp := &airlockv1.ToolsListResponse{}
	return resp, rpc.Call(ctx, c.nc, Tools, &airlockv1.ToolsListRequest{}, resp)
}
