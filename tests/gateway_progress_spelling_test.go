package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// TestGatewaySessionlessProgressWhateverItsSpelling: a 2026-07-28 request
// is answered in one JSON body only when it names no progress token; a
// client that asked for progress, however its JSON spells the name, gets
// an event stream with the progress of its call waiting for a reviewer,
// then the call's outcome.
func TestGatewaySessionlessProgressWhateverItsSpelling(t *testing.T) {
	g := startGatewayEnv(t)
	for i, c := range []struct {
		name, meta string
		progress   bool
	}{
		{"the_name_as_is", `"progressToken":"tok"`, true},
		{"the_name_with_escaped_letters", `"progress\u0054oken":"tok"`, true},
		{"the_name_all_escaped", `"\u0070\u0072\u006f\u0067\u0072\u0065\u0073\u0073\u0054\u006f\u006b\u0065\u006e":"tok"`, true},
		{"no_token", `"other":"x"`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(g.files, fmt.Sprintf("spelled-%d.txt", i))
			args, _ := json.Marshal(map[string]any{"path": path, "content": "x"})
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fs__write_file","arguments":%s,"_meta":{%s,`+
				`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`, args, c.meta)
			req, err := http.NewRequest(http.MethodPost, g.url("plain"), strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
				"Authorization": "Bearer " + g.tokens["plain"], "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "fs__write_file"} {
				req.Header.Set(k, v)
			}
			answered := make(chan *http.Response, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					close(answered)
					return
				}
				answered <- resp
			}()
			rec := g.pendingFor(t, "plainbot", "write_file", path)
			if !c.progress {
				g.decide(t, rec, "alice", airlockv1.DecisionKind_DECISION_KIND_REJECT, "spelled")
			}
			resp := <-answered
			if resp == nil {
				t.FailNow()
			}
			stream := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
			if stream != c.progress {
				t.Fatalf("answered as %q, want an event stream: %v", resp.Header.Get("Content-Type"), c.progress)
			}
			msgs := messages(resp)
			if c.progress {
				p := next(t, msgs, "the call's progress", func(m rpcMsg) bool { return m.Method == "notifications/progress" })
				var params struct {
					Token   any    `json:"progressToken"`
					Message string `json:"message"`
				}
				if json.Unmarshal(p.Params, &params) != nil || params.Token != "tok" || !strings.Contains(params.Message, "waiting for approval") {
					t.Fatalf("progress %s, want token tok and that the call waits for approval", p.Params)
				}
				g.decide(t, rec, "alice", airlockv1.DecisionKind_DECISION_KIND_REJECT, "spelled")
			}
			res := toolResult(t, next(t, msgs, "the call's outcome", func(m rpcMsg) bool { return string(m.ID) == "7" }))
			if !res.IsError || !strings.Contains(text(res), "alice rejected") {
				t.Fatalf("the outcome: isError=%v %q, want the rejection", res.IsError, text(res))
			}
		})
	}
}
