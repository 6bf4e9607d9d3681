// Package executorapi is the client for the executor's endpoints:
// airlock.api.executor.tools, the registry's tools as their servers
// describe them, and airlock.api.executor.preview, what a call would do
// (asked by the approval service alone: only it may publish there, only the
// executor answer). Any executor replica answers; neither needs a seal
// (they change nothing). Front-ends that show the tools (the MCP gateway) read them here
// rather than opening connections of their own to the upstream servers, and
// list them again when subject.ToolsChanged says a server's tools changed
// (OnChanged); the console (following the same notice) and the CLI read them
// to say of a waiting call that its tool is missing (Lacks).
package executorapi

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/rpc"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// Service is the micro service name.
const Service = "executor"

// Durable is the events-stream consumer every executor replica shares;
// once it has nothing pending, every call the executor was given has
// started (or was refused), which is what a test waits for before it
// asserts that a call never ran.
const Durable = "executor"

// EndpointTools is the tools endpoint, relative to the service's group.
const EndpointTools = "tools"

// Tools is the subject of the tools endpoint.
var Tools = subject.API(Service, EndpointTools)

// EndpointPreview is the preview endpoint, relative to the service's group.
const EndpointPreview = "preview"

// Preview is the subject of the preview endpoint.
var Preview = subject.API(Service, EndpointPreview)

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

// OnChanged calls changed whenever the executor announces that a server's
// tools changed (subject.ToolsChanged), until the subscription returned is
// ended: how a front-end that shows the tools (the MCP gateway) or checks
// calls against them (the console) knows to list them again. A core NATS
// notice can be missed (a reconnect): those who follow it also list the
// tools again now and then. changed runs on the subscription's goroutine
// and must not block.
func OnChanged(nc *nats.Conn, changed func()) (*nats.Subscription, error) {
	sub, err := nc.Subscribe(subject.ToolsChanged, func(*nats.Msg) { changed() })
	if err != nil {
		return nil, fmt.Errorf("follow %s: %w", subject.ToolsChanged, err)
	}
	return sub, nil
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

// Preview asks an executor what call would do, waiting at most timeout.
// The executor answers a preview it could not make with Preview.unavailable
// set, not an error; an error means no executor answered in time.
func (c *Client) Preview(ctx context.Context, call *airlockv1.ToolCall, timeout time.Duration) (*airlockv1.Preview, error) {
	resp := &airlockv1.PreviewResponse{}
	if err := (rpc.Caller{NC: c.nc, Timeout: timeout}).Call(ctx, Preview, &airlockv1.PreviewRequest{Call: call}, resp); err != nil {
		return nil, err
	}
	return resp.GetPreview(), nil
}
