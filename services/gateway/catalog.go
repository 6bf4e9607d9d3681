package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/executorapi"
)

// tool is one registry tool as an endpoint shows and calls it.
type tool struct {
	up *airlockv1.UpstreamTool
	// def is the upstream's definition under the qualified name.
	def *mcp.Tool
	// annotations as a plain object for the policy's input (nil: none).
	annotations map[string]any
}

// same reports whether t and o would be shown and called alike.
func (t *tool) same(o *tool) bool {
	return o != nil && t.up.GetDefinitionJson() == o.up.GetDefinitionJson() &&
		t.up.GetTrusted() == o.up.GetTrusted() && t.up.GetKind() == o.up.GetKind()
}

// catalog is the registry's tools as the executor last described them.
type catalog struct {
	exec *executorapi.Client
	log  *slog.Logger

	mu       sync.Mutex
	tools    []*tool
	problems map[string]string // server → why it was left out, as last reported
}

func newCatalog(exec *executorapi.Client, log *slog.Logger) *catalog {
	return &catalog{exec: exec, log: log, problems: map[string]string{}}
}

// listTimeout bounds one request to the executor's tools endpoint (which
// itself bounds each server).
const listTimeout = 40 * time.Second

// refresh asks the executor for the registry's tools. complete is false
// when some server could not be listed (its tools are then kept from the
// previous listing, so a slow upstream does not make its tools flicker).
func (c *catalog) refresh(ctx context.Context) (tools []*tool, complete bool, err error) {
	lctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	resp, err := c.exec.List(lctx)
	if err != nil {
		return nil, false, fmt.Errorf("ask the executor for the tools: %w", err)
	}
	problems := map[string]string{}
	for _, p := range resp.GetProblems() {
		problems[p.GetServer()] = p.GetMessage()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for server, msg := range problems {
		if c.problems[server] != msg {
			c.log.Warn("an upstream's tools could not be listed", "server", server, "problem", msg)
		}
	}
	c.problems = problems
	var next []*tool
	listed := map[string]bool{}
	for _, up := range resp.GetTools() {
		t, err := toolOf(up)
		if err != nil {
			c.log.Warn("a tool is left out", "tool", up.GetName(), "err", err)
			continue
		}
		listed[up.GetServer()] = true
		next = append(next, t)
	}
	// A server with a problem keeps its previously listed tools.
	for _, old := range c.tools {
		if _, failing := problems[old.up.GetServer()]; failing && !listed[old.up.GetServer()] {
			next = append(next, old)
		}
	}
	c.tools = next
	return next, len(problems) == 0, nil
}

// toolOf decodes an upstream tool's definition and renames it "server__tool".
func toolOf(up *airlockv1.UpstreamTool) (*tool, error) {
	def := &mcp.Tool{}
	if err := json.Unmarshal([]byte(up.GetDefinitionJson()), def); err != nil {
		return nil, fmt.Errorf("its definition is not an MCP tool: %w", err)
	}
	def.Name = up.GetName()
	if def.InputSchema == nil {
		def.InputSchema = map[string]any{"type": "object"}
	}
	t := &tool{up: up, def: def}
	if def.Annotations != nil {
		raw, err := json.Marshal(def.Annotations)
		if err != nil {
			return nil, fmt.Errorf("its annotations do not encode: %w", err)
		}
		if err := json.Unmarshal(raw, &t.annotations); err != nil {
			return nil, fmt.Errorf("its annotations are not an object: %w", err)
		}
	}
	return t, nil
}

// deniedOutright reports whether a dry-run decision says the agent's
// profile denies the tool whatever its arguments (the profile's deny list,
// or an allow list the tool is not on).
func deniedOutright(d *airlockv1.Decision) bool {
	return d.GetAction() == airlockv1.Action_ACTION_DENY && strings.HasPrefix(d.GetRuleId(), "profile:")
}
