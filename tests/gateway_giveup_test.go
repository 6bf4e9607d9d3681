package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestGatewayClientThatGivesUp: an MCP client that gives up on a request
// waiting for a reviewer (its context canceled: notifications/cancelled
// in a session, the HTTP request closed in the sessionless 2026-07-28
// protocol) withdraws the call, and a run_code script it gave up on gives
// back its place, so the endpoint (coder2: max_running 1) runs the next
// script at once instead of refusing it until a person decides.
func TestGatewayClientThatGivesUp(t *testing.T) {
	g := startGatewayEnv(t)
	for _, v := range versions {
		t.Run(v.name+"_a_script_given_up_on_gives_back_its_place_and_withdraws_its_call", func(t *testing.T) {
			cs := g.connect(t, "coder2", clientOpts{version: v.version})
			path := filepath.Join(g.files, "given-up-script-"+v.name+".txt")
			g.giveUpOn(t, cs, "coder2", path, "run_code", map[string]any{
				"code": fmt.Sprintf("return await tools.fs__write_file({path: %q, content: \"x\"});", path)})
			// The script was the endpoint's only place: the next one runs
			// once the given-up script's process has ended (that follows
			// the withdrawal by a moment), not when a person decides, which
			// nobody does here.
			testenv.Eventually(t, 10*time.Second, "the endpoint's next script to run", func() bool {
				res := callTool(t, cs, "run_code", map[string]any{"code": "return 1"})
				return !res.IsError && strings.TrimSpace(text(res)) == "1"
			})
		})
		if v.version != "" {
			t.Run(v.name+"_a_script_whose_client_drops_the_connection_gives_back_its_place_and_withdraws_its_call", func(t *testing.T) {
				// No notifications/cancelled: the response that was to carry
				// the answer is closed, and nothing can resume it.
				s := g.raw(t, "coder2", `{}`)
				path := filepath.Join(g.files, "dropped-script.txt")
				code, _ := json.Marshal(fmt.Sprintf("return await tools.fs__write_file({path: %q, content: \"x\"});", path))
				resp := s.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":"d","method":"tools/call","params":{"name":"run_code","arguments":{"code":%s}}}`, code))
				rec := g.pendingFor(t, "coder2", "write_file", path)
				resp.Body.Close()
				g.withdrawn(t, "coder2", rec)
				cs := g.connect(t, "coder2", clientOpts{version: v.version})
				testenv.Eventually(t, 10*time.Second, "the endpoint's next script to run", func() bool {
					res := callTool(t, cs, "run_code", map[string]any{"code": "return 1"})
					return !res.IsError && strings.TrimSpace(text(res)) == "1"
				})
			})
		}
		t.Run(v.name+"_a_call_given_up_on_is_withdrawn", func(t *testing.T) {
			cs := g.connect(t, "plain", clientOpts{version: v.version})
			path := filepath.Join(g.files, "given-up-call-"+v.name+".txt")
			g.giveUpOn(t, cs, "plainbot", path, "fs__write_file", map[string]any{"path": path, "content": "x"})
		})
	}
}

// giveUpOn calls tool, cancels the call once agent's write of path waits
// for a reviewer, and waits until that write is withdrawn.
func (g *gatewayEnv) giveUpOn(t *testing.T, cs *mcp.ClientSession, agent, path, tool string, args map[string]any) {
	t.Helper()
	ctx, giveUp := context.WithCancel(context.Background())
	defer giveUp()
	answered := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		answered <- err
	}()
	rec := g.pendingFor(t, agent, "write_file", path)
	giveUp()
	<-answered
	g.withdrawn(t, agent, rec)
}

// withdrawn waits until the call of rec is canceled.
func (g *gatewayEnv) withdrawn(t *testing.T, agent string, rec *airlockv1.ApprovalRecord) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, "the call nobody waits for any more to be withdrawn", func() bool {
		r, err := g.api.Get(context.Background(), agent, rec.GetCall().GetCallId(), 0)
		return err == nil && r.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_CANCELED
	})
}
