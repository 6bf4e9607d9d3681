package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/micro"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/executorapi"
	"github.com/airlock-gate/airlock/services/shared/policyapi"
	"github.com/airlock-gate/airlock/services/shared/rpc"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// registry stands in for the executor's tools endpoint and the policy's
// dry run (a profile that denies every write tool outright).
type registry struct {
	mu    sync.Mutex
	tools []*airlockv1.UpstreamTool
}

func (r *registry) set(names ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tools = nil
	for _, n := range names {
		server, tool, _ := strings.Cut(n, "__")
		def, _ := json.Marshal(map[string]any{"name": tool, "description": "the upstream's " + tool,
			"inputSchema": map[string]any{"type": "object"}, "annotations": map[string]any{"readOnlyHint": !strings.Contains(tool, "write")}})
		r.tools = append(r.tools, &airlockv1.UpstreamTool{Name: n, Server: server, Tool: tool, DefinitionJson: string(def), Kind: executorapi.KindMCP})
	}
}

func startRegistry(t *testing.T, cfg config.Config) *registry {
	t.Helper()
	r := &registry{}
	nc, _ := testenv.Connect(t, cfg.NATS.URL)
	log := testenv.Logger(t)
	exec, err := micro.AddService(nc, micro.Config{Name: executorapi.Service, Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exec.Stop() })
	if err := exec.AddEndpoint("tools", rpc.Handle(log, func() *airlockv1.ToolsListRequest { return &airlockv1.ToolsListRequest{} },
		func(context.Context, *airlockv1.ToolsListRequest) (*airlockv1.ToolsListResponse, error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			return &airlockv1.ToolsListResponse{Tools: r.tools}, nil
		}), micro.WithEndpointSubject(executorapi.Tools)); err != nil {
		t.Fatal(err)
	}
	pol, err := micro.AddService(nc, micro.Config{Name: policyapi.Service, Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pol.Stop() })
	if err := pol.AddEndpoint("eval", rpc.Handle(log, func() *airlockv1.PolicyEvalRequest { return &airlockv1.PolicyEvalRequest{} },
		func(_ context.Context, req *airlockv1.PolicyEvalRequest) (*airlockv1.PolicyEvalResponse, error) {
			d := &airlockv1.Decision{Action: airlockv1.Action_ACTION_ALLOW, RuleId: "profile:safe"}
			if strings.Contains(req.GetCall().GetTool(), "write") && req.GetCall().GetAgentId() == "safebot" {
				d.Action = airlockv1.Action_ACTION_DENY
			}
			return &airlockv1.PolicyEvalResponse{Decision: d}, nil
		}), micro.WithEndpointSubject(policyapi.Eval)); err != nil {
		t.Fatal(err)
	}
	testenv.Subscribed(t, nc)
	return r
}

// TestToolListsFollowTheRegistryAndTheProfile: an endpoint shows the
// registry's tools as their servers define them, minus what its profile
// denies outright, and its clients hear when that changes.
func TestToolListsFollowTheRegistryAndTheProfile(t *testing.T) {
	n := testenv.StartNATS(t)
	cfg := testenv.Config(n.URL())
	cfg.Gateway.Endpoints = []config.GatewayEndpoint{{Name: "safe", Agent: "safebot", Profile: "safe"}, {Name: "open", Agent: "openbot"}}
	reg := startRegistry(t, cfg)
	reg.set("fs__read_file", "fs__write_file")
	deps := testenv.Deps(t, cfg)
	gw, err := New(deps)
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunService(t, gw)

	connect := func(endpoint string, changed chan<- struct{}) *mcp.ClientSession {
		st, ct := mcp.NewInMemoryTransports()
		go func() { _ = gw.ServeStdio(context.Background(), endpoint, st) }()
		c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
		})
		cs, err := c.Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	list := func(cs *mcp.ClientSession) map[string]*mcp.Tool {
		out := map[string]*mcp.Tool{}
		for tool, err := range cs.Tools(context.Background(), nil) {
			if err != nil {
				t.Fatal(err)
			}
			out[tool.Name] = tool
		}
		return out
	}
	safeChanged, openChanged := make(chan struct{}, 16), make(chan struct{}, 16)
	safe, open := connect("safe", safeChanged), connect("open", openChanged)

	t.Run("the_profile_hides_what_it_denies_outright", func(t *testing.T) {
		s, o := list(safe), list(open)
		if s["fs__read_file"] == nil || s["fs__write_file"] != nil {
			t.Fatalf("safe lists %v", keysOf(s))
		}
		if o["fs__write_file"] == nil {
			t.Fatalf("open lists %v", keysOf(o))
		}
	})
	t.Run("the_upstreams_definition_and_annotations_are_passed_through", func(t *testing.T) {
		w := list(open)["fs__write_file"]
		if w.Description != "the upstream's write_file" || w.Annotations == nil || w.Annotations.ReadOnlyHint {
			t.Fatalf("fs__write_file is %+v (annotations %+v)", w, w.Annotations)
		}
	})
	t.Run("an_upstreams_change_reaches_every_client", func(t *testing.T) {
		drainAll(safeChanged, openChanged) // notices of the first listing
		reg.set("fs__read_file", "fs__write_file", "fs__read_more")
		nc, _ := testenv.Connect(t, cfg.NATS.URL)
		if err := nc.Publish(subject.ToolsChanged, []byte(`{"server":"fs"}`)); err != nil {
			t.Fatal(err)
		}
		// Each client hears a notice after which the new tool is listed (a
		// late notice of the first listing may come first).
		for name, c := range map[string]struct {
			cs *mcp.ClientSession
			ch chan struct{}
		}{"safe": {safe, safeChanged}, "open": {open, openChanged}} {
			deadline := time.After(10 * time.Second)
			for listed := false; !listed; {
				select {
				case <-c.ch:
					listed = list(c.cs)["fs__read_more"] != nil
				case <-deadline:
					t.Fatalf("%s's client heard of no change that lists the new tool", name)
				}
			}
		}
	})
	t.Run("a_tool_that_leaves_the_registry_leaves_the_list", func(t *testing.T) {
		reg.set("fs__read_file")
		nc, _ := testenv.Connect(t, cfg.NATS.URL)
		if err := nc.Publish(subject.Out(subject.PolicyChanges), nil); err != nil { // any trigger lists again
			t.Fatal(err)
		}
		testenv.Eventually(t, 10*time.Second, "fs__write_file to leave open's list", func() bool { return list(open)["fs__write_file"] == nil })
	})
}

func drainAll(chs ...chan struct{}) {
	for _, ch := range chs {
		for len(ch) > 0 {
			<-ch
		}
	}
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
