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
// run_code.max_running (each runs in a child process with its own memory).
// gatewayScriptsAtOnce is the test gateway's run_code_max_running: as many
// as one endpoint may run, so one endpoint at its limit fills the gateway.
const gatewayScriptsAtOnce = config.DefaultMaxRunning

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
		for _, c := range []struct{ name, code string }{
			// A benign head the audit would keep, and the calls past it.
			{"padded_past_what_the_audit_keeps", "// notes\n" + strings.Repeat("// nothing to see here\n", 1000) + read},
			// Short, but each character is recorded escaped (\u0001).
			{"short_but_long_once_escaped", "/*" + strings.Repeat("\x01", 4000) + "*/\n" + read},
			// Nested a million deep: parsing it for the preview would
			// overflow the gateway's stack (a fatal error, not a panic).
			{"nested_a_million_deep", "return " + strings.Repeat("(", 1_000_000) + "1" + strings.Repeat(")", 1_000_000) + ";"},
		} {
			res := callTool(t, cs, "run_code", map[string]any{"code": c.code})
			if !res.IsError || res.Meta["airlock/status"] != "script_limit" || !strings.Contains(text(res), "shorter script") {
				t.Fatalf("%s: answered isError=%v %v %.300q, want script_limit", c.name, res.IsError, res.Meta["airlock/status"], text(res))
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

	t.Run("an_agent_running_many_scripts_at_once_is_held_to_max_running", func(t *testing.T) {
		cs := g.connect(t, "coder", clientOpts{version: "2025-11-25"})
		var waiting []<-chan *mcp.CallToolResult
		var paths []string
		for i := range config.DefaultMaxRunning {
			path := filepath.Join(g.files, fmt.Sprintf("held-%d.txt", i))
			paths = append(paths, path)
			waiting = append(waiting, callAsync(cs, "run_code", map[string]any{"code": fmt.Sprintf(
				"return await tools.fs__write_file({path: %q, content: \"x\"});", path)}))
		}
		var recs []*airlockv1.ApprovalRecord
		for _, p := range paths {
			recs = append(recs, g.pendingFor(t, "coder", "write_file", p)) // its script is running
		}
		res := callTool(t, cs, "run_code", map[string]any{"code": "return 1"})
		if !res.IsError || res.Meta["airlock/status"] != "script_limit" || !strings.Contains(text(res), "max_running") {
			t.Fatalf("a script beyond max_running answered isError=%v %v %q, want script_limit naming max_running", res.IsError, res.Meta["airlock/status"], text(res))
		}
		// Another endpoint has places of its own, but the gateway as a whole
		// runs at most run_code_max_running scripts, all held by coder now.
		other := g.connect(t, "selfcoder", clientOpts{version: "2025-11-25"})
		res = callTool(t, other, "run_code", map[string]any{"code": "return 1"})
		if !res.IsError || res.Meta["airlock/status"] != "script_limit" || !strings.Contains(text(res), "gateway.run_code_max_running") {
			t.Fatalf("a script beyond the gateway's limit answered isError=%v %v %q, want script_limit naming gateway.run_code_max_running", res.IsError, res.Meta["airlock/status"], text(res))
		}
		for _, rec := range recs {
			g.decide(t, rec, "alice", airlockv1.DecisionKind_DECISION_KIND_REJECT, "held")
		}
		for _, w := range waiting {
			if r := <-w; !strings.Contains(text(r), "held") {
				t.Fatalf("a held script answered %q", text(r))
			}
		}
		// Scripts that ended free their places.
		testenv.Eventually(t, 20*time.Second, "a script to run once the others ended", func() bool {
			r := callTool(t, cs, "run_code", map[string]any{"code": "return 1"})
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
