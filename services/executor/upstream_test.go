package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/executor"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/config"
)

// The test binary doubles as the stdio MCP servers these tests need: run
// with AIRLOCK_FAKE_MCP set, it is that server instead of the tests.
//
//	silent  reads its input and never answers anything, not even initialize
//	tools   a minimal MCP server answering one message at a time, whose
//	        tools misbehave on demand: echo answers; crash exits mid-call;
//	        freeze never returns, so the server answers nothing after it,
//	        pings included (a hung server)
//
// Each start appends the process id to the file AIRLOCK_FAKE_MCP_STARTS.
func TestMain(m *testing.M) {
	if mode := os.Getenv("AIRLOCK_FAKE_MCP"); mode != "" {
		runFakeMCP(mode)
		return
	}
	os.Exit(m.Run())
}

func runFakeMCP(mode string) {
	if f := os.Getenv("AIRLOCK_FAKE_MCP_STARTS"); f != "" {
		out, err := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			fmt.Fprintln(out, os.Getpid())
			out.Close()
		}
	}
	switch mode {
	case "silent":
		go func() { _, _ = io.Copy(io.Discard, os.Stdin) }()
		select {} // hangs, even after its input closes
	case "tools":
		serveFakeTools(os.Stdin, os.Stdout)
	}
	os.Exit(0)
}

// serveFakeTools answers newline-delimited JSON-RPC, one message at a time.
func serveFakeTools(r io.Reader, w io.Writer) {
	dec := json.NewDecoder(r)
	enc := json.NewEncoder(w)
	for {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name            string         `json:"name"`
				Arguments       map[string]any `json:"arguments"`
				ProtocolVersion string         `json:"protocolVersion"`
			} `json:"params"`
		}
		if err := dec.Decode(&msg); err != nil {
			return
		}
		if msg.ID == nil {
			continue // a notification
		}
		reply := map[string]any{"jsonrpc": "2.0", "id": msg.ID}
		switch msg.Method {
		case "initialize":
			reply["result"] = map[string]any{"protocolVersion": msg.Params.ProtocolVersion, "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "fake", "version": "1"}}
		case "ping":
			reply["result"] = map[string]any{}
		case "tools/list":
			var tools []any
			for _, n := range []string{"echo", "crash", "freeze"} {
				tools = append(tools, map[string]any{"name": n, "inputSchema": map[string]any{"type": "object"}})
			}
			reply["result"] = map[string]any{"tools": tools}
		case "tools/call":
			switch msg.Params.Name {
			case "crash":
				fmt.Fprintln(os.Stderr, "fake server: crashing as asked")
				os.Exit(3)
			case "freeze":
				select {}
			}
			reply["result"] = map[string]any{"content": []any{map[string]any{"type": "text", "text": fmt.Sprintf("echo: %v", msg.Params.Arguments["text"])}}}
		default: // server/discover among them: the client falls back to initialize
			reply["error"] = map[string]any{"code": -32601, "message": "method not found: " + msg.Method}
		}
		if err := enc.Encode(reply); err != nil {
			return
		}
	}
}

// fakeServer configures the test binary as a stdio MCP server in mode; its
// starts are counted in the returned file.
func fakeServer(t *testing.T, mode string) (executor.MCPConfig, string) {
	t.Helper()
	starts := filepath.Join(t.TempDir(), "starts")
	return executor.MCPConfig{Command: os.Args[0], Env: map[string]string{"AIRLOCK_FAKE_MCP": mode, "AIRLOCK_FAKE_MCP_STARTS": starts}}, starts
}

// pids lists the processes a fake server started, in order.
func pids(t *testing.T, starts string) []int {
	t.Helper()
	raw, err := os.ReadFile(starts)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []int
	for _, f := range strings.Fields(string(raw)) {
		p, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// gone reports whether pid has exited (no such process, or a zombie).
func gone(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] == 'Z'
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline, not waiting for an event
	}
}

// registryWith builds a registry of the filesystem server (an ordinary,
// healthy upstream) plus extra servers, every upstream bounded by timeout.
func registryWith(t *testing.T, timeout time.Duration, extra map[string]executor.MCPConfig, opts ...func(*executor.RegistryOptions)) (*executor.Registry, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello from disk"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := executor.RegistryFile{Servers: map[string]executor.ServerEntry{
		"fs": {MCP: &executor.MCPConfig{Command: nodeBin(t, "mcp-server-filesystem"), Args: []string{dir}}},
	}}
	for name, cfg := range extra {
		f.Servers[name] = executor.ServerEntry{MCP: &cfg}
	}
	o := executor.RegistryOptions{Sandbox: t.TempDir(), Config: withUpstreamTimeout(timeout)}
	for _, opt := range opts {
		opt(&o)
	}
	reg, err := executor.NewRegistry(f, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	return reg, filepath.Join(dir, "hello.txt")
}

// readFile is an ordinary call to the healthy upstream.
func readFile(ctx context.Context, reg *executor.Registry, path string) error {
	tool, ok := reg.Lookup("fs", "read_text_file")
	if !ok {
		return errors.New("fs is not registered")
	}
	res, err := tool.Adapter.Call(ctx, executor.Request{Server: "fs", Tool: "read_text_file", Arguments: map[string]any{"path": path}})
	if err != nil {
		return err
	}
	if !strings.Contains(string(res), "hello from disk") {
		return fmt.Errorf("read_text_file returned %s", res)
	}
	return nil
}

func callTool(ctx context.Context, reg *executor.Registry, server, tool string) (string, error) {
	t, ok := reg.Lookup(server, tool)
	if !ok {
		return "", fmt.Errorf("%s is not registered", server)
	}
	res, err := t.Adapter.Call(ctx, executor.Request{Server: server, Tool: tool, Arguments: map[string]any{"text": "hi"}})
	return string(res), err
}

func TestAHangingUpstreamFailsItsOwnCallsWhileOthersFlow(t *testing.T) {
	const timeout = 4 * time.Second
	// The failed start is not tried again for a minute, not 250 ms: the
	// call made within the back-off, at the end, comes after the checks
	// between, which a loaded machine can make take longer than 250 ms.
	silent, starts := fakeServer(t, "silent")
	reg, hello := registryWith(t, timeout, map[string]executor.MCPConfig{"hang": silent}, func(o *executor.RegistryOptions) { o.OpenBackoff = time.Minute })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := readFile(ctx, reg, hello); err != nil { // the healthy server is up before the hanging one is asked
		t.Fatal(err)
	}

	// Calls to the hanging server, and a Has about it, all wait on its one
	// start; none may hold up anything else.
	hangErrs := make(chan error, 5)
	for range 4 {
		go func() {
			_, err := callTool(ctx, reg, "hang", "anything")
			hangErrs <- err
		}()
	}
	go func() {
		_, err := reg.Has(ctx, "hang", "anything")
		hangErrs <- err
	}()
	eventually(t, 30*time.Second, "the hanging server was never started", func() bool { return len(pids(t, starts)) == 1 })

	var wg sync.WaitGroup
	fsErrs := make(chan error, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fsErrs <- readFile(ctx, reg, hello)
		}()
	}
	if has, err := reg.Has(ctx, "fs", "read_text_file"); !has || err != nil {
		t.Errorf("Has(fs, read_text_file) = %v, %v while another server hangs", has, err)
	}
	wg.Wait()
	close(fsErrs)
	for err := range fsErrs {
		if err != nil {
			t.Errorf("an ordinary call failed beside the hanging server: %v", err)
		}
	}
	if n := len(hangErrs); n != 0 {
		t.Fatalf("%d calls to the hanging server returned before the ordinary calls finished: the test cannot tell whether they were held up", n)
	}

	for range 5 {
		err := <-hangErrs
		var up *executor.UpstreamError
		if !errors.As(err, &up) || up.Server != "hang" || up.Started || up.Outcome() != calls.FailureError {
			t.Fatalf("error %v (%T): want a not-started *UpstreamError for server hang", err, err)
		}
		if !strings.Contains(err.Error(), "did not answer within") || !strings.Contains(err.Error(), "the tool was not run") {
			t.Errorf("the reason does not say what happened and what to do: %v", err)
		}
		var te *executor.ToolError
		if !errors.As(err, &te) || te.Indeterminate {
			t.Errorf("an UpstreamError must also read as a determinate ToolError: %v", err)
		}
	}
	p := pids(t, starts)
	if len(p) != 1 {
		t.Fatalf("the hanging server was started %d times for calls that shared one attempt", len(p))
	}
	eventually(t, 10*time.Second, "the hanging server's process is still running after its start timed out", func() bool { return gone(p[0]) })

	// Within the back-off, a call fails at once instead of waiting again.
	quick, qcancel := context.WithTimeout(ctx, timeout/2)
	defer qcancel()
	_, err := callTool(quick, reg, "hang", "anything")
	var up *executor.UpstreamError
	if !errors.As(err, &up) || !strings.Contains(err.Error(), "not retried before") {
		t.Fatalf("a call within the back-off: %v, want an UpstreamError saying when it is retried", err)
	}
}

// fakeToolsUp starts the misbehaving "tools" server beside the healthy
// one and checks it answers.
func fakeToolsUp(t *testing.T, timeout time.Duration) (context.Context, *executor.Registry, string, string) {
	t.Helper()
	tools, starts := fakeServer(t, "tools")
	reg, hello := registryWith(t, timeout, map[string]executor.MCPConfig{"fake": tools})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	if out, err := callTool(ctx, reg, "fake", "echo"); err != nil || !strings.Contains(out, "echo: hi") {
		t.Fatalf("echo: %s %v", out, err)
	}
	return ctx, reg, hello, starts
}

func TestAnUpstreamThatExitsMidCallIsRestarted(t *testing.T) {
	ctx, reg, hello, starts := fakeToolsUp(t, 10*time.Second)

	_, err := callTool(ctx, reg, "fake", "crash")
	var up *executor.UpstreamError
	if !errors.As(err, &up) || !up.Started || up.Outcome() != calls.FailureIndeterminate {
		t.Fatalf("crash: %v (%T), want an *UpstreamError saying the call may have run", err, err)
	}
	if !strings.Contains(err.Error(), "started again on the next call") {
		t.Errorf("the reason does not say the server is restarted: %v", err)
	}
	if err := readFile(ctx, reg, hello); err != nil {
		t.Errorf("an ordinary call failed after another server crashed: %v", err)
	}
	if out, err := callTool(ctx, reg, "fake", "echo"); err != nil || !strings.Contains(out, "echo: hi") {
		t.Fatalf("echo after the crash: %s %v", out, err)
	}
	if p := pids(t, starts); len(p) != 2 || !gone(p[0]) {
		t.Fatalf("starts %v: want the crashed server gone and one restart", p)
	}
}

func TestAnUpstreamThatHangsMidCallIsRestartedWhileOthersFlow(t *testing.T) {
	ctx, reg, hello, starts := fakeToolsUp(t, 2*time.Second)
	// The healthy server is started first: its start (node, under a loaded
	// machine) may itself take longer than the short upstream timeout, and
	// what is tested is that it keeps serving while the other hangs.
	eventually(t, 30*time.Second, "the filesystem server did not start", func() bool {
		return readFile(ctx, reg, hello) == nil
	})

	// The call's own deadline (the tool timeout) ends it; the server, which
	// then does not answer a ping either, is retired and started again.
	callCtx, ccancel := context.WithTimeout(ctx, time.Second)
	fo, err := callTool(callCtx, reg, "fake", "freeze")
	ccancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("freeze: %s %v, want the call's deadline", fo, err)
	}
	if err := readFile(ctx, reg, hello); err != nil {
		t.Errorf("an ordinary call failed while another server hung: %v", err)
	}
	var out string
	eventually(t, 30*time.Second, "the hung server was not restarted", func() bool {
		c, cc := context.WithTimeout(ctx, time.Second)
		defer cc()
		out, err = callTool(c, reg, "fake", "echo")
		return err == nil
	})
	if !strings.Contains(out, "echo: hi") {
		t.Fatalf("echo after the restart: %s", out)
	}
	p := pids(t, starts)
	if len(p) != 2 {
		t.Fatalf("starts %v: want one restart", p)
	}
	eventually(t, 10*time.Second, "the hung server's process is still there after it was retired", func() bool { return gone(p[0]) })
}

// withUpstreamTimeout is the default executor configuration with upstream_timeout d.
func withUpstreamTimeout(d time.Duration) config.Executor {
	c := config.Default().Executor
	c.UpstreamTimeout = d
	return c
}
