package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/executor"
)

// contractFixture is an adapter plus requests that exercise its contract.
type contractFixture struct {
	adapter executor.Adapter
	// ok succeeds; check looks at its result.
	ok    executor.Request
	check func(t *testing.T, result json.RawMessage)
	// failing reaches the tool, which reports an error.
	failing executor.Request
	// slow blocks until its context ends; zero when the adapter has no such
	// tool, and the cancellation clause is checked with a canceled context.
	slow executor.Request
}

// adapterContract is the suite every Adapter passes (see the Adapter doc).
func adapterContract(t *testing.T, fx contractFixture) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t.Cleanup(func() {
		if err := fx.adapter.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})

	t.Run("lists_the_tools_it_runs", func(t *testing.T) {
		tools, err := fx.adapter.Tools(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{fx.ok.Tool, fx.failing.Tool} {
			if !contains(tools, want) {
				t.Fatalf("Tools() = %v, missing %q", tools, want)
			}
		}
	})
	t.Run("returns_the_result_as_json", func(t *testing.T) {
		res, err := fx.adapter.Call(ctx, fx.ok)
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(res) {
			t.Fatalf("result is not JSON: %s", res)
		}
		fx.check(t, res)
	})
	t.Run("reports_a_tool_failure_as_ToolError", func(t *testing.T) {
		_, err := fx.adapter.Call(ctx, fx.failing)
		var te *executor.ToolError
		if !errors.As(err, &te) || te.Message == "" {
			t.Fatalf("error = %v (%T), want a *ToolError with a message", err, err)
		}
	})
	t.Run("refuses_an_unknown_tool", func(t *testing.T) {
		req := fx.ok
		req.Tool = "no_such_tool_xyz"
		_, err := fx.adapter.Call(ctx, req)
		if !errors.Is(err, executor.ErrUnknownTool) {
			t.Fatalf("error = %v, want ErrUnknownTool", err)
		}
	})
	t.Run("stops_when_the_context_ends", func(t *testing.T) {
		req := fx.slow
		cctx, ccancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer ccancel()
		if req.Tool == "" {
			req = fx.ok
			ccancel()
		}
		start := time.Now()
		_, err := fx.adapter.Call(cctx, req)
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			t.Fatalf("error = %v, want one wrapping the context's error", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("Call returned %s after its context ended", d)
		}
	})
	t.Run("serves_concurrent_calls", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := fx.adapter.Call(ctx, fx.ok)
				if err == nil && !json.Valid(res) {
					err = fmt.Errorf("invalid JSON %s", res)
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	})
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func TestDemoAdapterContract(t *testing.T) {
	demo, err := executor.NewDemo(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	adapterContract(t, contractFixture{
		adapter: demo,
		ok:      executor.Request{Server: "demo", Tool: "echo", Arguments: map[string]any{"text": "hi"}},
		check: func(t *testing.T, res json.RawMessage) {
			if string(res) != `{"text":"hi"}` {
				t.Fatalf("echo returned %s", res)
			}
		},
		failing: executor.Request{Server: "demo", Tool: "read_file", Arguments: map[string]any{"path": "missing.txt"}},
	})
}

func TestWebhookAdapterContract(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"received":%s}`, body)
	})
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "amount too large", http.StatusUnprocessableEntity)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // the server notices a client hanging up only once the body is read
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	wh := executor.NewWebhook(executor.WebhookOptions{Secret: []byte("s3cret"), URLs: map[string]string{
		"ok": srv.URL + "/ok", "fail": srv.URL + "/fail", "slow": srv.URL + "/slow",
	}})
	adapterContract(t, contractFixture{
		adapter: wh,
		ok:      executor.Request{Server: "hook", Tool: "ok", Arguments: map[string]any{"n": 1.0}, IdempotencyKey: "k"},
		check: func(t *testing.T, res json.RawMessage) {
			if string(res) != `{"received":{"n":1}}` {
				t.Fatalf("webhook result %s", res)
			}
		},
		failing: executor.Request{Server: "hook", Tool: "fail", Arguments: map[string]any{}},
		slow:    executor.Request{Server: "hook", Tool: "slow", Arguments: map[string]any{}},
	})
}

// nodeBin returns an npm-installed test binary or fails saying how to install it.
func nodeBin(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "tests", "node", "node_modules", ".bin", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is not installed (%v): run `go tool task test:deps` (npm install --prefix tests/node)", name, err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not on PATH: install Node.js, then run `go tool task test:deps`")
	}
	return p
}

func TestMCPStdioAdapterContractWithServerFilesystem(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello from disk"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := executor.NewMCP("fs", executor.MCPConfig{Command: nodeBin(t, "mcp-server-filesystem"), Args: []string{dir}}, executor.MCPOptions{})
	adapterContract(t, contractFixture{
		adapter: m,
		ok:      executor.Request{Server: "fs", Tool: "read_text_file", Arguments: map[string]any{"path": filepath.Join(dir, "hello.txt")}},
		check: func(t *testing.T, res json.RawMessage) {
			if !strings.Contains(string(res), "hello from disk") {
				t.Fatalf("read_text_file returned %s", res)
			}
		},
		failing: executor.Request{Server: "fs", Tool: "read_text_file", Arguments: map[string]any{"path": "/etc/hostname"}},
	})
}

func TestMCPStreamableHTTPAdapterContractWithServerEverything(t *testing.T) {
	url := startEverythingHTTP(t)
	m := executor.NewMCP("every", executor.MCPConfig{URL: url}, executor.MCPOptions{})
	adapterContract(t, contractFixture{
		adapter: m,
		ok:      executor.Request{Server: "every", Tool: "echo", Arguments: map[string]any{"message": "over http"}},
		check: func(t *testing.T, res json.RawMessage) {
			if !strings.Contains(string(res), "Echo: over http") {
				t.Fatalf("echo returned %s", res)
			}
		},
		failing: executor.Request{Server: "every", Tool: "echo", Arguments: map[string]any{"message": 42}},
		slow:    executor.Request{Server: "every", Tool: "trigger-long-running-operation", Arguments: map[string]any{"duration": 30, "steps": 3}},
	})
}

// startEverythingHTTP runs @modelcontextprotocol/server-everything over
// streamable HTTP on a free port and returns its /mcp URL.
func startEverythingHTTP(t *testing.T) string {
	t.Helper()
	bin := nodeBin(t, "mcp-server-everything")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond); err == nil {
			c.Close()
			return fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
		}
		time.Sleep(50 * time.Millisecond) // polling a port with a deadline, not waiting for an event
	}
	t.Fatalf("server-everything did not listen on %d within 30s", port)
	return ""
}
