package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCP runs the tools of one MCP server, over stdio (a child process) or
// streamable HTTP. The session is opened on first use and reopened after
// it breaks, so a server that is down when the executor starts, or that
// crashes, does not need an executor restart. One session serves
// concurrent calls.
type MCP struct {
	name string
	cfg  MCPConfig

	mu      sync.Mutex
	session *mcp.ClientSession
	tools   []string
	changed func(server string) // see OnToolsChanged
}

// NewMCP returns an adapter for the MCP server configured by cfg; name is
// its registry name (the "fs" of fs__read_file).
func NewMCP(name string, cfg MCPConfig) *MCP { return &MCP{name: name, cfg: cfg} }

// Tools implements Adapter: the server's tools/list, cached per session.
func (m *MCP) Tools(ctx context.Context) ([]string, error) {
	cs, err := m.connect(ctx)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	cached := m.tools
	m.mu.Unlock()
	if cached != nil {
		return cached, nil
	}
	var names []string
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			m.drop(cs)
			return nil, fmt.Errorf("MCP server %s: list tools: %w", m.name, err)
		}
		names = append(names, t.Name)
	}
	sort.Strings(names)
	m.mu.Lock()
	if m.session == cs {
		m.tools = names
	}
	m.mu.Unlock()
	return names, nil
}

// Call implements Adapter. A result with isError becomes a *ToolError with
// the text the server gave; otherwise the result is the MCP CallToolResult
// as JSON ({"content": [...], "structuredContent": ...}).
func (m *MCP) Call(ctx context.Context, req Request) (json.RawMessage, error) {
	tools, err := m.Tools(ctx)
	if err != nil {
		return nil, err
	}
	if !contains(tools, req.Tool) {
		return nil, fmt.Errorf("MCP server %s has no tool %q: %w", m.name, req.Tool, ErrUnknownTool)
	}
	cs, err := m.connect(ctx)
	if err != nil {
		return nil, err
	}
	args := req.Arguments
	if args == nil {
		args = map[string]any{}
	}
	params := &mcp.CallToolParams{Name: req.Tool, Arguments: args}
	if req.IdempotencyKey != "" {
		params.Meta = mcp.Meta{"airlock/idempotency_key": req.IdempotencyKey, "airlock/call_id": req.CallID}
	}
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("MCP %s__%s: %w", m.name, req.Tool, ctx.Err())
		}
		var rpcErr *jsonrpc.Error
		if errors.As(err, &rpcErr) {
			// A JSON-RPC error answer: the server refused the call.
			return nil, &ToolError{Message: fmt.Sprintf("MCP %s__%s: %v", m.name, req.Tool, err)}
		}
		m.drop(cs)
		return nil, &ToolError{Message: fmt.Sprintf("MCP %s__%s: connection lost: %v", m.name, req.Tool, err), Indeterminate: true}
	}
	if res.IsError {
		raw, _ := json.Marshal(res) // a result the SDK decoded encodes again
		return nil, &ToolError{Message: textOf(res), Result: raw}
	}
	return json.Marshal(res)
}

// textOf joins the text content of a result, for error messages.
func textOf(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	if len(parts) == 0 {
		return "the tool reported an error without a message"
	}
	return strings.Join(parts, "\n")
}

// connect returns the open session, opening one if needed. Opening does
// not hold the call's context beyond the wait: the session outlives calls.
func (m *MCP) connect(ctx context.Context) (*mcp.ClientSession, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.session != nil {
		return m.session, nil
	}
	type result struct {
		cs  *mcp.ClientSession
		err error
	}
	done := make(chan result, 1)
	go func() {
		client := mcp.NewClient(&mcp.Implementation{Name: "airlock-executor", Version: "1"}, m.clientOptions())
		cs, err := client.Connect(context.WithoutCancel(ctx), m.transport(), nil)
		done <- result{cs, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, &ToolError{Message: fmt.Sprintf("cannot reach MCP server %s (%s): %v", m.name, m.where(), r.err)}
		}
		m.session, m.tools = r.cs, nil
		m.announce()                     // a (re)started server may list other tools
		go func(cs *mcp.ClientSession) { // forget a session whose server went away
			_ = cs.Wait()
			m.drop(cs)
		}(r.cs)
		return r.cs, nil
	case <-ctx.Done():
		go func() { // the server may still answer: close what it opens
			if r := <-done; r.cs != nil {
				_ = r.cs.Close()
			}
		}()
		return nil, fmt.Errorf("connect to MCP server %s (%s): %w", m.name, m.where(), ctx.Err())
	}
}

func (m *MCP) transport() mcp.Transport {
	if m.cfg.URL != "" {
		client := &http.Client{}
		if len(m.cfg.Headers) > 0 {
			client.Transport = headerTransport{headers: m.cfg.Headers, next: http.DefaultTransport}
		}
		return &mcp.StreamableClientTransport{Endpoint: m.cfg.URL, HTTPClient: client, DisableStandaloneSSE: true}
	}
	cmd := exec.Command(m.cfg.Command, m.cfg.Args...)
	cmd.Dir = m.cfg.Dir
	cmd.Env = os.Environ()
	for k, v := range m.cfg.Env {
		cmd.Env = append(cmd.Env, k+"="+os.ExpandEnv(v))
	}
	return &mcp.CommandTransport{Command: cmd}
}

func (m *MCP) where() string {
	if m.cfg.URL != "" {
		return m.cfg.URL
	}
	return strings.Join(append([]string{m.cfg.Command}, m.cfg.Args...), " ")
}

// drop forgets cs if it is the current session and closes it.
func (m *MCP) drop(cs *mcp.ClientSession) {
	m.mu.Lock()
	if m.session == cs {
		m.session, m.tools = nil, nil
	}
	m.mu.Unlock()
	_ = cs.Close()
}

// Close implements Adapter: it ends the session (and the child process).
func (m *MCP) Close() error {
	m.mu.Lock()
	cs := m.session
	m.session = nil
	m.mu.Unlock()
	if cs == nil {
		return nil
	}
	return cs.Close()
}

type headerTransport struct {
	headers map[string]string
	next    http.RoundTripper
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, os.ExpandEnv(v))
	}
	return h.next.RoundTrip(r)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
