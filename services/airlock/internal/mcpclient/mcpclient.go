// Package mcpclient starts go-sdk MCP client sessions with a gateway
// endpoint (or an upstream served directly), for airlock's own load tools:
// the gateway bench and the chaos run.
package mcpclient

import (
	"context"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options say how a session starts.
type Options struct {
	// Name is the client's implementation name, as the server sees it.
	Name string
	// Token is the endpoint's bearer token, sent with every request ("":
	// none, for an upstream served directly).
	Token string
	// Protocol is the MCP protocol version the client asks for.
	Protocol string
	// Within bounds the connect (the initialize exchange).
	Within time.Duration
	// NoResume: a stream that breaks is not resumed (for a gateway, which
	// keeps no event store, behind replicas that may be gone); otherwise
	// the SDK's default retries.
	NoResume bool
}

// Connect starts a session with the MCP server at url.
func Connect(ctx context.Context, url string, o Options) (*mcp.ClientSession, error) {
	hc := &http.Client{}
	if o.Token != "" {
		hc.Transport = bearer{token: o.Token}
	}
	t := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}
	if o.NoResume {
		t.MaxRetries = -1
	}
	c := mcp.NewClient(&mcp.Implementation{Name: o.Name, Version: "1"}, nil)
	cctx, cancel := context.WithTimeout(ctx, o.Within)
	defer cancel()
	return c.Connect(cctx, t, &mcp.ClientSessionOptions{ProtocolVersion: o.Protocol})
}

// bearer sends the endpoint's token with every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}
