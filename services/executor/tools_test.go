package executor_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/airlock-gate/airlock/services/executor"
	"github.com/airlock-gate/airlock/services/shared/executorapi"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestTheToolsEndpointDescribesTheRegistry: airlock.api.executor.tools
// answers every tool as its server defines it (an MCP server's own
// definition, the demo tools' built-in ones), with the registry's trust,
// and announces a (re)started server on subject.ToolsChanged; a tool's own
// error result is recorded in its `failed` event exactly as it came.
func TestTheToolsEndpointDescribesTheRegistry(t *testing.T) {
	e := newTestEnv(t, nil)
	nc, _ := testenv.Connect(t, e.cfg.NATS.URL)
	changed := make(chan *nats.Msg, 16)
	if _, err := nc.ChanSubscribe(subject.ToolsChanged, changed); err != nil {
		t.Fatal(err)
	}
	e.startExecutor(executor.RegistryFile{Servers: map[string]executor.ServerEntry{
		"fs": {MCP: &executor.MCPConfig{Command: nodeBin(t, "mcp-server-filesystem"), Args: []string{t.TempDir()}}, Trusted: true},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var list = map[string]*mcp.Tool{}
	var kinds, trusted = map[string]string{}, map[string]bool{}
	testenv.Eventually(t, 60*time.Second, "the tools endpoint to answer", func() bool {
		r, err := executorapi.New(nc).List(ctx)
		if err != nil {
			return false
		}
		for _, u := range r.GetTools() {
			def := &mcp.Tool{}
			if err := json.Unmarshal([]byte(u.GetDefinitionJson()), def); err != nil {
				t.Fatalf("%s: %v", u.GetName(), err)
			}
			list[u.GetName()], kinds[u.GetName()], trusted[u.GetName()] = def, u.GetKind(), u.GetTrusted()
		}
		return true
	})
	w := list["fs__write_file"]
	if w == nil || w.Name != "write_file" || w.InputSchema == nil || w.Annotations == nil || kinds["fs__write_file"] != executorapi.KindMCP || !trusted["fs__write_file"] {
		t.Fatalf("fs__write_file is %+v (kind %s, trusted %v)", w, kinds["fs__write_file"], trusted["fs__write_file"])
	}
	if d := list["demo__write_file"]; d == nil || kinds["demo__write_file"] != executorapi.KindBuiltin || d.Annotations == nil || d.Annotations.ReadOnlyHint {
		t.Fatalf("demo__write_file is %+v", d)
	}
	select {
	case m := <-changed:
		if !strings.Contains(string(m.Data), `"server":"fs"`) {
			t.Fatalf("notice %s", m.Data)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notice when the fs server started")
	}

	outside := toolCall(t, "fso", "fs__read_text_file", map[string]any{"path": "/etc/hostname"})
	e.allow(outside, digestOf(t, outside))
	f := e.end("fso").GetFailed()
	res := &mcp.CallToolResult{}
	if f == nil || json.Unmarshal([]byte(f.GetResultJson()), res) != nil || !res.IsError || len(res.Content) == 0 {
		t.Fatalf("the tool's error result is not in the failed event: %v", e.end("fso"))
	}
}
