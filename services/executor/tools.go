package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/executorapi"
	"github.com/airlock-gate/airlock/services/shared/ingress"
	"github.com/airlock-gate/airlock/services/shared/quota"
	"github.com/airlock-gate/airlock/services/shared/rpc"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// describer is an adapter that describes its tools in full (MCP servers,
// the demo tools); others are described by name only.
type describer interface {
	describe(ctx context.Context) ([]*mcp.Tool, error)
}

// Describe lists every tool of the registry with its server's own
// definition, each server at the same time and within its upstream timeout
// (executor.upstream_timeout, which bounds starting and listing an MCP
// server): a server that cannot be listed is reported in problems, never
// holds up the others. Tools whose names cannot be called through airlock are left out
// and reported.
func (r *Registry) Describe(ctx context.Context) *airlockv1.ToolsListResponse {
	type listed struct {
		server string
		tools  []*airlockv1.UpstreamTool
		probs  []*airlockv1.ServerProblem
	}
	out := make(chan listed, len(r.servers))
	for name, reg := range r.servers {
		go func() {
			sctx, cancel := context.WithTimeout(ctx, r.upstreamTimeout+time.Second)
			defer cancel()
			l := listed{server: name}
			defs, kind, err := describeAdapter(sctx, reg.adapter)
			if err != nil {
				l.probs = append(l.probs, &airlockv1.ServerProblem{Server: name, Message: err.Error()})
				out <- l
				return
			}
			for _, d := range defs {
				if !ingress.ValidName(d.Name) {
					l.probs = append(l.probs, &airlockv1.ServerProblem{Server: name, Message: fmt.Sprintf(
						"tool %q is left out: airlock calls only tools named with A-Z a-z 0-9 _ . : - (at most %d characters)", d.Name, ingress.MaxNameLen)})
					continue
				}
				raw, err := json.Marshal(d)
				if err != nil {
					l.probs = append(l.probs, &airlockv1.ServerProblem{Server: name, Message: fmt.Sprintf("tool %q: its definition does not encode as JSON: %v", d.Name, err)})
					continue
				}
				l.tools = append(l.tools, &airlockv1.UpstreamTool{
					Name: calls.ToolName(name, d.Name), Server: name, Tool: d.Name, DefinitionJson: string(raw),
					Trusted: reg.entry.Trusted || kind == executorapi.KindBuiltin, Kind: kind,
				})
			}
			out <- l
		}()
	}
	resp := &airlockv1.ToolsListResponse{}
	for range r.servers {
		l := <-out
		resp.Tools = append(resp.Tools, l.tools...)
		resp.Problems = append(resp.Problems, l.probs...)
	}
	sort.Slice(resp.Tools, func(i, j int) bool { return resp.Tools[i].Name < resp.Tools[j].Name })
	sort.Slice(resp.Problems, func(i, j int) bool { return resp.Problems[i].Server < resp.Problems[j].Server })
	return resp
}

func describeAdapter(ctx context.Context, a Adapter) ([]*mcp.Tool, string, error) {
	kind := executorapi.KindWebhook
	switch a.(type) {
	case *MCP:
		kind = executorapi.KindMCP
	case *Demo:
		kind = executorapi.KindBuiltin
	}
	if d, ok := a.(describer); ok {
		defs, err := d.describe(ctx)
		return defs, kind, err
	}
	names, err := a.Tools(ctx)
	if err != nil {
		return nil, kind, err
	}
	defs := make([]*mcp.Tool, 0, len(names))
	for _, n := range names {
		defs = append(defs, &mcp.Tool{Name: n, InputSchema: map[string]any{"type": "object"}})
	}
	return defs, kind, nil
}

// OnToolsChanged calls fn with a server's name whenever an MCP server of
// the registry announces that its tools changed (notifications/tools/
// list_changed) or is (re)connected. fn must not block.
func (r *Registry) OnToolsChanged(fn func(server string)) {
	for _, reg := range r.servers {
		if m, ok := reg.adapter.(*MCP); ok {
			m.mu.Lock()
			m.changed = fn
			m.mu.Unlock()
		}
	}
}

// describe implements describer for the demo tools.
func (d *Demo) describe(context.Context) ([]*mcp.Tool, error) {
	pathProp := map[string]any{"type": "string", "description": "file path relative to the sandbox"}
	yes, no := true, false
	return []*mcp.Tool{
		{Name: "echo", Description: "Returns its arguments unchanged.",
			InputSchema: map[string]any{"type": "object", "additionalProperties": true},
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &no, IdempotentHint: true, OpenWorldHint: &no}},
		{Name: "read_file", Description: "Reads a file of the sandbox: {path} → {path, content}.",
			InputSchema: map[string]any{"type": "object", "properties": map[string]any{"path": pathProp}, "required": []string{"path"}},
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &no, IdempotentHint: true, OpenWorldHint: &no}},
		{Name: "write_file", Description: "Writes a file of the sandbox, creating parent directories: {path, content} → {path, bytes}.",
			InputSchema: map[string]any{"type": "object", "properties": map[string]any{
				"path": pathProp, "content": map[string]any{"type": "string"}}, "required": []string{"path", "content"}},
			Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes, IdempotentHint: true, OpenWorldHint: &no}},
	}, nil
}

// maxPreviews bounds the previews one executor computes at once.
const maxPreviews = 16

// toolsAPI serves airlock.api.executor.tools and announces tool changes on
// subject.ToolsChanged.
type toolsAPI struct {
	reg *Registry
	cfg config.Executor
	nc  *nats.Conn
	log *slog.Logger
	// previewing bounds each agent's share of the maxPreviews.
	previewing *quota.PerAgent
}

// serveTools starts the tools and preview endpoints and the change
// notices; stop ends them.
func serveTools(nc *nats.Conn, reg *Registry, cfg config.Executor, log *slog.Logger) (stop func(), err error) {
	t := &toolsAPI{reg: reg, cfg: cfg, nc: nc, log: log, previewing: quota.New(maxPreviewsPerAgent)}
	srv, err := micro.AddService(nc, micro.Config{
		Name: executorapi.Service, Version: "1.0.0",
		Description: "airlock executor: the tool registry as its servers describe it",
	})
	if err != nil {
		return nil, fmt.Errorf("start executor endpoints: %w", err)
	}
	h := rpc.Handle(log, func() *airlockv1.ToolsListRequest { return &airlockv1.ToolsListRequest{} }, t.list)
	// Previews run concurrently, at most maxPreviews at once: each waits
	// on a tool for up to executor.preview_timeout, and a slow one must not
	// hold up the next call's.
	serial := rpc.Handle(log, func() *airlockv1.PreviewRequest { return &airlockv1.PreviewRequest{} }, t.preview)
	sem := make(chan struct{}, maxPreviews)
	ph := micro.HandlerFunc(func(r micro.Request) {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			serial(r)
		}()
	})
	if err := errors.Join(srv.AddEndpoint(executorapi.EndpointTools, h, micro.WithEndpointSubject(executorapi.Tools)),
		srv.AddEndpoint(executorapi.EndpointPreview, ph, micro.WithEndpointSubject(executorapi.Preview))); err != nil {
		_ = srv.Stop()
		return nil, fmt.Errorf("add executor endpoints: %w", err)
	}
	reg.OnToolsChanged(t.changed)
	return func() {
		reg.OnToolsChanged(nil)
		if err := srv.Stop(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			log.Warn("stop executor endpoints", "err", err)
		}
	}, nil
}

func (t *toolsAPI) list(ctx context.Context, _ *airlockv1.ToolsListRequest) (*airlockv1.ToolsListResponse, error) {
	return t.reg.Describe(ctx), nil
}

// changed publishes a notice (core NATS: a lost one is made up for by the
// readers' periodic refresh).
func (t *toolsAPI) changed(server string) {
	body, _ := json.Marshal(executorapi.Changed{Server: server})
	if err := t.nc.Publish(subject.ToolsChanged, body); err != nil {
		t.log.Warn("could not announce a tool change", "server", server, "err", err)
	}
}
