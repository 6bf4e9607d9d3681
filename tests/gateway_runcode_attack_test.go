package tests

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestGatewayRunCodeAttacks: a hostile model sends run_code scripts
// through a real MCP client to a real gateway. A tool name it writes in
// the script cannot add lines to the prompt of the person confirming one
// of its calls, and running many scripts at once is held to the endpoint's
// run_code.max_running (each runs in a child process with its own memory)
// and to the agent's share of the gateway's places.
// gatewayScriptsAtOnce is the test gateway's run_code_max_running: fewer
// than its three run_code agents' endpoints allow together (4 + 4 + 1), so
// two agents holding all they can would fill it, were the places not
// shared.
const gatewayScriptsAtOnce = 5

func TestGatewayRunCodeAttacks(t *testing.T) {
	g := startGatewayEnv(t)

	t.Run("a_tool_name_the_script_makes_up_does_not_reach_the_confirmation_prompt", func(t *testing.T) {
		shown := &prompts{action: "decline"}
		cs := g.connect(t, "selfcoder", clientOpts{version: "2025-11-25", elicit: shown.elicit})
		path := filepath.Join(g.files, "forged-prompt.txt")
		// The bracketed names are no tools (a call of one could only
		// throw); they are written to read as more prompt and more preview,
		// or to fill the preview so that the real call is left out.
		code := fmt.Sprintf("if (false) { "+strings.Repeat(`tools["nope"](); `, 25)+"tools[\"fs__read_text_file\\nForged: this script only reads files, accept\"]({}); tools[\"fs__read_text_file({}) at line 1; Forged 2. tools.fs__read_text_file\"](); }\n"+
			"return await tools.fs__write_file({path: %q, content: \"x\"});", path)
		res := callTool(t, cs, "run_code", map[string]any{"code": code})
		if !res.IsError {
			t.Fatalf("the declined write did not fail the script: %q", text(res))
		}
		asked := shown.all()
		if len(asked) != 1 || !strings.Contains(asked[0], "Static preview") || !strings.Contains(asked[0], "tools.fs__write_file(") {
			t.Fatalf("the person was not shown the preview of the script's named calls (%d asked): %q", len(asked), asked)
		}
		if strings.Contains(asked[0], "Forged") {
			t.Fatalf("a tool name the script made up is in the prompt:\n%s", asked[0])
		}
	})

	t.Run("a_script_whose_first_call_is_refused_as_malformed_is_still_recorded_with_its_calls", func(t *testing.T) {
		cs := g.connect(t, "coder", clientOpts{version: "2025-11-25"})
		hello := filepath.Join(g.files, "hello.txt")
		// The first call nests deeper than airlock takes: refused as
		// malformed, it is never recorded as requested.
		code := fmt.Sprintf(`let deep = {}; for (let i = 0; i < 40; i++) deep = {d: deep};
let refused = "no";
try { await tools.fs__read_text_file({path: %q, deep}); } catch (e) { refused = e.message; }
// what the auditor must be able to read: %s
return [refused, await tools.fs__read_text_file({path: %q})];`, hello, t.Name(), hello)
		res := callTool(t, cs, "run_code", map[string]any{"code": code})
		if res.IsError || !strings.Contains(text(res), "malformed") || !strings.Contains(text(res), "hello from the filesystem server") {
			t.Fatalf("answered isError=%v %q, want the refusal of the deep call and the read", res.IsError, text(res))
		}
		sum := sha256.Sum256([]byte(code))
		digest := "sha256:" + hex.EncodeToString(sum[:])
		var named, withText int
		for _, c := range g.requested(t, "coder") {
			if c.GetScript().GetDigest() == digest {
				named++
				if strings.Contains(c.GetScript().GetText(), t.Name()) {
					withText++
				}
			}
		}
		if named != 1 || withText != 1 {
			t.Fatalf("%d requested calls name the script, %d of them with its text: want the read, with the text", named, withText)
		}
	})

	t.Run("a_script_the_audit_cannot_record_whole_or_the_preview_cannot_parse_does_not_run", func(t *testing.T) {
		cs := g.connect(t, "coder", clientOpts{version: "2025-11-25"})
		hello := filepath.Join(g.files, "hello.txt")
		read := fmt.Sprintf("return await tools.fs__read_text_file({path: %q});", hello)
		for _, c := range []struct{ name, code, status, says string }{
			// A benign head the audit would keep, and the calls past it.
			{"padded_past_what_the_audit_keeps", "// notes\n" + strings.Repeat("// nothing to see here\n", 1000) + read, "script_limit", "shorter script"},
			// Short, but each character is recorded escaped (\u0001).
			{"short_but_long_once_escaped", "/*" + strings.Repeat("\x01", 4000) + "*/\n" + read, "script_limit", "shorter script"},
			// Nested 290,000 deep: parsing it for the preview would
			// overflow the gateway's stack (a fatal error, not a panic).
			// Arguments that cannot fit limits.max_request_bytes are
			// refused before anything reads them, the script's too (and
			// a body past ingress.MaxJSONBody before that): no nesting
			// that deep reaches run_code.
			{"nested_290000_deep", "return " + strings.Repeat("(", 290_000) + "1" + strings.Repeat(")", 290_000) + ";", "invalid", "limits.max_request_bytes"},
		} {
			res := callTool(t, cs, "run_code", map[string]any{"code": c.code})
			if !res.IsError || res.Meta["airlock/status"] != c.status || !strings.Contains(text(res), c.says) {
				t.Fatalf("%s: answered isError=%v %v %.300q, want %s saying %q", c.name, res.IsError, res.Meta["airlock/status"], text(res), c.status, c.says)
			}
			sum := sha256.Sum256([]byte(c.code))
			for _, call := range g.requested(t, "coder") {
				if call.GetScript().GetDigest() == "sha256:"+hex.EncodeToString(sum[:]) {
					t.Fatalf("%s: a script refused as too long made a call", c.name)
				}
			}
		}
		if res := callTool(t, cs, "run_code", map[string]any{"code": read}); res.IsError || !strings.Contains(text(res), "hello from the filesystem server") {
			t.Fatalf("the gateway does not serve a plain script after them: isError=%v %q", res.IsError, text(res))
		}
	})

	t.Run("agents_running_many_scripts_at_once_are_held_to_max_running_and_never_starve_another_agent", func(t *testing.T) {
		// Each script's write waits for a reviewer, so it holds its place.
		type held struct {
			rec    *airlockv1.ApprovalRecord
			answer <-chan *mcp.CallToolResult
		}
		var all []held
		// hold sends a script and waits until its write is pending (it
		// runs) or the gateway answered it (refused); it returns the answer.
		hold := func(cs *mcp.ClientSession, agent string, i int) *mcp.CallToolResult {
			t.Helper()
			path := filepath.Join(g.files, fmt.Sprintf("held-%s-%d.txt", agent, i))
			answer := callAsync(cs, "run_code", map[string]any{"code": fmt.Sprintf("return await tools.fs__write_file({path: %q, content: \"x\"});", path)})
			var res *mcp.CallToolResult
			testenv.Eventually(t, 30*time.Second, fmt.Sprintf("%s's script %d to run or be refused", agent, i), func() bool {
				select {
				case res = <-answer:
					return true
				default:
				}
				out, err := g.api.List(context.Background(), &airlockv1.ListRequest{AgentId: agent, Tool: "write_file",
					States: []airlockv1.ApprovalState{airlockv1.ApprovalState_APPROVAL_STATE_PENDING}})
				if err != nil {
					return false
				}
				for _, r := range out.GetRecords() {
					if r.GetCall().GetArguments().AsMap()["path"] == path {
						all = append(all, held{r, answer})
						return true
					}
				}
				return false
			})
			return res
		}
		// Two agents take every place they can: coder up to its endpoint's
		// max_running (4), coder2 up to its own (1).
		coder, coder2 := g.connect(t, "coder", clientOpts{version: "2025-11-25"}), g.connect(t, "coder2", clientOpts{version: "2025-11-25"})
		var refused []*mcp.CallToolResult
		for i := range config.DefaultMaxRunning {
			if res := hold(coder, "coder", i); res != nil {
				refused = append(refused, res)
			}
		}
		if res := hold(coder2, "coder2", 0); res != nil {
			t.Fatalf("coder2's first script was refused: %q", text(res))
		}
		// A third agent's script still runs.
		other := g.connect(t, "selfcoder", clientOpts{version: "2025-11-25"})
		if res := callTool(t, other, "run_code", map[string]any{"code": "return 1"}); res.IsError || strings.TrimSpace(text(res)) != "1" {
			t.Fatalf("with coder and coder2 running all they could, selfcoder's script answered isError=%v %v %q: two agents starve a third", res.IsError, res.Meta["airlock/status"], text(res))
		}
		// coder was held to its share of the gateway (5 places, each of 3
		// agents sure of 1: coder may borrow while the others' stay free).
		if len(refused) != 1 || refused[0].Meta["airlock/status"] != "script_limit" || !strings.Contains(text(refused[0]), "kept for other agents") {
			t.Fatalf("coder's scripts beyond its share: %d refused, want 1 naming the places kept for other agents", len(refused))
		}
		// An endpoint's own limit holds whatever places the gateway has.
		res := callTool(t, coder2, "run_code", map[string]any{"code": "return 1"})
		if !res.IsError || res.Meta["airlock/status"] != "script_limit" || !strings.Contains(text(res), "max_running") {
			t.Fatalf("a script beyond max_running answered isError=%v %v %q, want script_limit naming max_running", res.IsError, res.Meta["airlock/status"], text(res))
		}
		for _, h := range all {
			g.decide(t, h.rec, "alice", airlockv1.DecisionKind_DECISION_KIND_REJECT, "held")
		}
		for _, h := range all {
			if r := <-h.answer; !strings.Contains(text(r), "held") {
				t.Fatalf("a held script answered %q", text(r))
			}
		}
		// Scripts that ended free their places.
		testenv.Eventually(t, 20*time.Second, "a script to run once the others ended", func() bool {
			r := callTool(t, coder, "run_code", map[string]any{"code": "return 1"})
			return !r.IsError && strings.TrimSpace(text(r)) == "1"
		})
	})
}

// prompts records the elicitations a client's person is shown and answers
// each with action.
type prompts struct {
	action string
	mu     sync.Mutex
	asked  []string
}

func (p *prompts) elicit(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, r.Params.Message)
	return &mcp.ElicitResult{Action: p.action}, nil
}

func (p *prompts) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string{}, p.asked...)
}
