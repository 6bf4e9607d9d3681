package tests

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"

	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestGatewayRunCode: real MCP clients (the TypeScript SDK and the
// inspector CLI) send run_code a script that reads, then writes, then
// returns both results. The read runs at once; the write waits for a
// reviewer, who sees the script's static preview with it and approves it
// with `airlock approvals approve`; the script then returns both results,
// and every call it made names it. Then runCodeRefusesAndReports.
func TestGatewayRunCode(t *testing.T) {
	g := startGatewayEnv(t)
	hello := filepath.Join(g.files, "hello.txt")
	for _, client := range []struct {
		name string
		run  func(t *testing.T, code string) <-chan string
	}{
		{"typescript_sdk", func(t *testing.T, code string) <-chan string {
			script, err := filepath.Abs(filepath.Join("node", "run-code-client.mjs"))
			if err != nil {
				t.Fatal(err)
			}
			nodeBin(t, "mcp-inspector-cli") // the npm packages are installed
			return runNode(t, exec.Command("node", script, g.url("coder"), g.tokens["coder"], code))
		}},
		{"inspector_cli", func(t *testing.T, code string) <-chan string {
			real, err := filepath.EvalSymlinks(nodeBin(t, "mcp-inspector-cli"))
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("node", real, "--cli", g.url("coder"), "--transport", "http", "--header", "Authorization: Bearer "+g.tokens["coder"],
				"--method", "tools/call", "--tool-name", "run_code", "--tool-arg", "code="+code)
			cmd.Dir = filepath.Dir(real)
			return runNode(t, cmd)
		}},
	} {
		t.Run(client.name+"_reads_then_writes_once_approved_from_the_cli_and_returns_both", func(t *testing.T) {
			out := filepath.Join(g.files, "by-script-"+client.name+".txt")
			code := fmt.Sprintf(`const before = await tools.fs__read_text_file({path: %q});
const wrote = await tools["fs__write_file"]({path: %q, content: "written by a script"});
return {before, wrote};`, hello, out)
			done := client.run(t, code)
			rec := g.pendingFor(t, "coder", "write_file", out)
			call := rec.GetCall()
			sum := sha256.Sum256([]byte(code))
			digest := "sha256:" + hex.EncodeToString(sum[:])
			if s := call.GetScript(); s.GetDigest() != digest || s.GetIndex() != 2 || s.GetText() != "" || len(s.GetPreview()) != 2 ||
				!strings.Contains(s.GetPreview()[0], "fs__read_text_file") || !strings.Contains(s.GetPreview()[1], out) {
				t.Fatalf("the write names its script as %+v, want digest %s, index 2, no text (the first call has it), a preview of both calls", s, digest)
			}
			cli := exec.Command(airlockBinary(t), "approvals", "show", "coder/"+call.GetCallId(), "--api", g.baseURL, "--token-file", filepath.Join(g.dev.DataDir, "admin.token"))
			shown, err := cli.CombinedOutput()
			if err != nil || !strings.Contains(string(shown), "Static preview") || !strings.Contains(string(shown), "may be incomplete") || !strings.Contains(string(shown), "fs__read_text_file") {
				t.Fatalf("approvals show does not show the script's preview: %v\n%s", err, shown)
			}
			approve := exec.Command(airlockBinary(t), "approvals", "approve", "coder/"+call.GetCallId(), "--api", g.baseURL, "--token-file", filepath.Join(g.dev.DataDir, "admin.token"))
			if res, err := approve.CombinedOutput(); err != nil || !strings.Contains(string(res), "approved") {
				t.Fatalf("approvals approve: %v\n%s", err, res)
			}
			var got string
			select {
			case got = <-done:
			case <-time.After(90 * time.Second):
				t.Fatal("the script did not return within 90s of the approval")
			}
			if !strings.Contains(got, "hello from the filesystem server") || !strings.Contains(got, "Successfully wrote") || strings.Contains(got, `"isError":true`) {
				t.Fatalf("the script's answer lacks the read or the write: %s", got)
			}
			if content := readFileString(t, out); content != "written by a script" {
				t.Fatalf("the file holds %q", content)
			}
			// The first call (the read) carries the script's text once.
			first := g.firstScriptCall(t, digest)
			if !strings.Contains(first, "written by a script") || !strings.Contains(first, digest) {
				t.Fatalf("the script's first call does not record its text and digest: %.600s", first)
			}
		})
	}
	runCodeRefusesAndReports(t, g)
}

// runCodeRefusesAndReports: through a real MCP client, a script
// that misbehaves ends with a clear error and submits nothing (not even the
// write it issued first); a call a reviewer rejects rejects its promise with
// the reason; and a call the endpoint's person confirms shows them the
// script's preview in the elicitation.
func runCodeRefusesAndReports(t *testing.T, g *gatewayEnv) {
	t.Run("a_misbehaving_script_ends_with_a_clear_error_and_submits_nothing", func(t *testing.T) {
		cs := g.connect(t, "coder", clientOpts{version: "2025-11-25"})
		var paths []string
		for i, c := range []struct{ name, then, status, says string }{
			{"syntax_error", "return (;", "script_syntax", "does not parse"},
			{"throw", `throw new Error("boom")`, "script_thrown", "boom"},
			{"endless_loop", "for (;;) {}", "script_timeout", "without waiting"},
			{"unbounded_allocation", `const s = "y".repeat(3000000); const a = []; for (let i = 0; ; i++) a.push(s + i);`, "script_memory", "MiB"},
			{"require", `return require("child_process");`, "script_thrown", "require is not defined"},
			{"dynamic_import", `return await import("fs");`, "script_syntax", "does not parse"},
			{"process", `return process.env;`, "script_thrown", "process is not defined"},
			{"globalThis", `return globalThis.process.mainModule;`, "script_thrown", "TypeError"},
			{"Function_constructor", `return tools.fs__read_text_file.constructor("return process")();`, "script_thrown", "process is not defined"},
			{"prototype_pollution_then_throw", `Object.prototype.path = "/etc/passwd"; throw new Error("polluted")`, "script_thrown", "polluted"},
			// One built-in step that allocates terabytes: only the sandbox
			// process's own limits stop it (the gateway goes on serving).
			{"one_join_of_terabytes", `return new Array(1000000).fill("x".repeat(4000000)).join("").length;`, "script_memory|script_timeout", "it was stopped"},
			{"promise_flood", `for (let i = 0; i < 100000; i++) tools.fs__write_file({path: "/tmp/flood", content: String(i)});`, "script_limit", "more than 50 tool calls"},
		} {
			path := filepath.Join(g.files, fmt.Sprintf("never-%d.txt", i))
			paths = append(paths, path)
			code := fmt.Sprintf("tools.fs__write_file({path: %q, content: \"should never be written\"});\n%s", path, c.then)
			if c.name == "syntax_error" || c.name == "dynamic_import" {
				code = fmt.Sprintf("tools.fs__write_file({path: %q, content: \"x\"}); %s", path, c.then)
			}
			res := callTool(t, cs, "run_code", map[string]any{"code": code})
			status, _ := res.Meta["airlock/status"].(string)
			if !res.IsError || !slices.Contains(strings.Split(c.status, "|"), status) || !strings.Contains(text(res), c.says) {
				t.Errorf("%s: answered isError=%v %v %q, want %s saying %q", c.name, res.IsError, res.Meta["airlock/status"], text(res), c.status, c.says)
			}
		}
		// A script that behaves, as a control for what the stream shows.
		hello := filepath.Join(g.files, "hello.txt")
		if res := callTool(t, cs, "run_code", map[string]any{"code": fmt.Sprintf("return await tools.fs__read_text_file({path: %q});", hello)}); res.IsError {
			t.Fatalf("a plain read failed: %s", text(res))
		}
		calls := g.requested(t, "coder")
		seen := map[string]bool{}
		for _, c := range calls {
			if p, ok := c.GetArguments().AsMap()["path"].(string); ok {
				seen[p] = true
			}
		}
		if !seen[hello] {
			t.Fatalf("the control read is not among coder's requested calls (%d): the check below would prove nothing", len(calls))
		}
		for _, p := range append(paths, "/tmp/flood") {
			if seen[p] {
				t.Errorf("a misbehaving script submitted a call on %s", p)
			}
			if _, err := os.Stat(p); err == nil && p != "/tmp/flood" {
				t.Errorf("%s was written", p)
			}
		}
	})

	t.Run("a_call_a_reviewer_rejects_rejects_its_promise_with_the_reason", func(t *testing.T) {
		cs := g.connect(t, "coder", clientOpts{})
		path := filepath.Join(g.files, "rejected-by-script.txt")
		done := callAsync(cs, "run_code", map[string]any{"code": fmt.Sprintf(
			`try { await tools.fs__write_file({path: %q, content: "no"}); return "wrote"; } catch (e) { return "refused: " + e.message; }`, path)})
		g.decide(t, g.pendingFor(t, "coder", "write_file", path), "alice", airlockv1.DecisionKind_DECISION_KIND_REJECT, "not in this directory")
		res := <-done
		if res.IsError || !strings.Contains(text(res), "refused: ") || !strings.Contains(text(res), "not in this directory") {
			t.Fatalf("answered isError=%v %q", res.IsError, text(res))
		}
		if _, err := os.Stat(path); err == nil {
			t.Fatal("the rejected write ran")
		}
	})

	t.Run("a_script_waiting_for_a_reviewer_uses_no_cpu_and_completes_once_approved", func(t *testing.T) {
		// A wait for a person may last minutes; the script's process, whose
		// CPU-time limit is the script's busy time (1 s here) and a second,
		// must stay idle meanwhile, or it is killed for having waited.
		cs := g.connect(t, "coder", clientOpts{version: "2025-11-25"})
		path := filepath.Join(g.files, "waited-for.txt")
		done := callAsync(cs, "run_code", map[string]any{"code": fmt.Sprintf(`return await tools.fs__write_file({path: %q, content: "waited"});`, path)})
		rec := g.pendingFor(t, "coder", "write_file", path)
		child := scriptProcess(t, g.dev.Pid())
		// The lesser of two windows: what is left of the child's start
		// lands in the first; a watchdog ticking through the wait, in both.
		const window = 500 * time.Millisecond
		used := time.Duration(-1)
		for range 2 {
			before := testenv.CPUTime(t, child)
			time.Sleep(window) // the window measured, not a wait for an event
			if u := testenv.CPUTime(t, child) - before; used < 0 || u < used {
				used = u
			}
		}
		t.Logf("the script's process used %v of CPU while its call waited %v for a reviewer", used, window)
		if used > window/100 {
			t.Errorf("the script's process used %v of CPU in %v while it only waited for a reviewer (at most %v)", used, window, window/100)
		}
		g.decide(t, rec, "alice", airlockv1.DecisionKind_DECISION_KIND_APPROVE, "fine")
		if res := <-done; res.IsError {
			t.Fatalf("the approved script answered isError: %q", text(res))
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != "waited" {
			t.Fatalf("the approved write did not run: %q, %v", b, err)
		}
	})

	t.Run("calls_waiting_together_keep_the_requests_progress_increasing", func(t *testing.T) {
		var mu sync.Mutex
		var seen []float64
		cs := g.connect(t, "coder", clientOpts{version: "2025-11-25", progress: func(r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			seen = append(seen, r.Params.Progress)
			mu.Unlock()
		}})
		a, b := filepath.Join(g.files, "together-a.txt"), filepath.Join(g.files, "together-b.txt")
		done := make(chan *mcp.CallToolResult, 1)
		go func() {
			params := &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": fmt.Sprintf(
				`return await Promise.all([tools.fs__write_file({path: %q, content: "a"}), tools.fs__write_file({path: %q, content: "b"})]);`, a, b)}}
			params.SetProgressToken("together")
			res, err := cs.CallTool(context.Background(), params)
			if err != nil {
				res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
			}
			done <- res
		}()
		ra, rb := g.pendingFor(t, "coder", "write_file", a), g.pendingFor(t, "coder", "write_file", b)
		testenv.Eventually(t, 20*time.Second, "progress from both waiting calls", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(seen) >= 4
		})
		g.decide(t, ra, "alice", airlockv1.DecisionKind_DECISION_KIND_APPROVE, "fine")
		g.decide(t, rb, "alice", airlockv1.DecisionKind_DECISION_KIND_APPROVE, "fine")
		if res := <-done; res.IsError {
			t.Fatalf("answered %q", text(res))
		}
		mu.Lock()
		defer mu.Unlock()
		for i := 1; i < len(seen); i++ {
			if seen[i] <= seen[i-1] {
				t.Fatalf("progress went %v: it must only increase", seen)
			}
		}
	})

	t.Run("the_person_confirming_a_call_sees_the_scripts_preview", func(t *testing.T) {
		shown := &prompts{action: "accept"}
		cs := g.connect(t, "selfcoder", clientOpts{version: "2025-11-25", elicit: shown.elicit})
		path := filepath.Join(g.files, "confirmed-by-dana.txt")
		res := callTool(t, cs, "run_code", map[string]any{"code": fmt.Sprintf(
			"const w = await tools.fs__write_file({path: %q, content: \"confirmed\"});\nconst f = tools.fs__read_text_file; return [w, await f({path: %q})];", path, path)})
		if res.IsError || !strings.Contains(text(res), "confirmed") {
			t.Fatalf("answered isError=%v %q", res.IsError, text(res))
		}
		asked := shown.all()
		if len(asked) != 1 || !strings.Contains(asked[0], "Static preview") || !strings.Contains(asked[0], "may be incomplete") ||
			!strings.Contains(asked[0], "fs__write_file") || strings.Contains(asked[0], "tools.fs__read_text_file(") {
			t.Fatalf("the confirmation (%d asked) does not show the preview of the literal calls only: %q", len(asked), asked)
		}
	})
}

// requested is every call agent requested so far, from the events stream.
func (g *gatewayEnv) requested(t *testing.T, agent string) []*airlockv1.ToolCall {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, js := g.dev.Admin(t)
	cons, err := js.OrderedConsumer(ctx, config.Default().Stream.Name, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject.EventsPrefix + "." + agent + ".*." + subject.Requested}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*airlockv1.ToolCall
	for range info.NumPending {
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ev, err := envelope.Decode(msg.Data(), msg.Headers())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev.GetRequested().GetCall())
	}
	return out
}

// firstScriptCall is the script text the run's first call (which ran
// without approval) recorded, read from the events stream: the requested
// events of agent coder naming the script as call 1.
func (g *gatewayEnv) firstScriptCall(t *testing.T, digest string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, js := g.dev.Admin(t)
	cons, err := js.OrderedConsumer(ctx, config.Default().Stream.Name, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject.OfType(subject.Requested)}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		msg, err := cons.Next(jetstream.FetchContext(ctx))
		if err != nil {
			t.Fatalf("no requested event names script %s as its first call: %v", digest, err)
		}
		ev, err := envelope.Decode(msg.Data(), msg.Headers())
		if err != nil {
			continue
		}
		if s := ev.GetRequested().GetCall().GetScript(); s.GetDigest() == digest && s.GetIndex() == 1 {
			return s.GetDigest() + "\n" + s.GetText()
		}
	}
}

// runNode runs a node client and sends its whole output once it exits.
func runNode(t *testing.T, cmd *exec.Cmd) <-chan string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	full := exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	full.Dir = cmd.Dir
	var out bytes.Buffer
	full.Stdout, full.Stderr = &out, &out
	if err := full.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 1)
	go func() {
		err := full.Wait()
		if err != nil {
			done <- fmt.Sprintf("%v\n%s", err, out.String())
			return
		}
		done <- out.String()
	}()
	return done
}

// scriptProcess is the one run_code script process (a child of the
// gateway, marked AIRLOCK_CODEMODE_CHILD) under the process pid.
func scriptProcess(t *testing.T, pid int) int {
	t.Helper()
	var found []int
	var walk func(int)
	walk = func(p int) {
		for _, c := range testenv.Children(t, p) {
			if env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", c)); strings.Contains("\x00"+string(env), "\x00AIRLOCK_CODEMODE_CHILD=1\x00") {
				found = append(found, c)
			}
			walk(c)
		}
	}
	walk(pid)
	if len(found) != 1 {
		t.Fatalf("want one run_code script process under %d, found %v", pid, found)
	}
	return found[0]
}
