package executor_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/executor"
	"github.com/airlock-gate/airlock/services/shared/config"
)

func TestRegistryFileIsCheckedStrictly(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"unknown_key", "servers:\n  fs:\n    mcp: {command: x}\n    timout: 3s\n", "timout"},
		{"neither_mcp_nor_webhook", "servers:\n  fs:\n    timeout: 3s\n", "exactly one of mcp or webhook"},
		{"mcp_with_command_and_url", "servers:\n  fs:\n    mcp: {command: x, url: http://h}\n", "exactly one of command"},
		{"webhook_without_tools", "servers:\n  pay:\n    webhook: {url: http://h, secret: s}\n", "must list its tools"},
		{"webhook_without_secret", "servers:\n  pay:\n    webhook: {url: http://h}\n    tools: {refund: {}}\n", "secret_env"},
		{"server_name_with_separator", "servers:\n  a__b:\n    mcp: {command: x}\n", "without \"__\""},
		{"demo_name_taken", "servers:\n  demo:\n    mcp: {command: x}\n", "built-in demo"},
		{"preview_tool_on_a_webhook", "servers:\n  pay:\n    webhook: {url: http://h, secret: s}\n    tools: {refund: {preview_tool: dry}}\n", "a webhook sets preview_url"},
		{"preview_url_on_an_mcp_server", "servers:\n  fs:\n    mcp: {command: x}\n    tools: {write: {preview_url: http://h/p}}\n", "an MCP server sets preview_tool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := executor.ParseRegistryFile([]byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

func TestRegistryResolvesTimeoutsAndIdempotency(t *testing.T) {
	f, err := executor.ParseRegistryFile([]byte(`
servers:
  pay:
    webhook: {url: "http://127.0.0.1:1/hooks", secret_env: PAY_SECRET}
    timeout: 5s
    idempotent: true
    tools:
      refund: {}
      charge: {idempotent: false, timeout: 1m}
`))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := executor.NewRegistry(f, executor.RegistryOptions{Sandbox: t.TempDir(), Config: config.Default().Executor,
		Getenv: func(k string) string { return map[string]string{"PAY_SECRET": "s"}[k] }})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	tests := []struct {
		server, tool string
		timeout      time.Duration
		idempotent   bool
		exists       bool
	}{
		{"pay", "refund", 5 * time.Second, true, true},
		{"pay", "charge", time.Minute, false, true},
		{"pay", "steal", 5 * time.Second, true, false},
		{"demo", "echo", 30 * time.Second, false, true},
	}
	for _, tt := range tests {
		tool, ok := reg.Lookup(tt.server, tt.tool)
		if !ok || tool.Timeout != tt.timeout || tool.Idempotent != tt.idempotent {
			t.Errorf("%s__%s: %+v (found %v), want timeout %s idempotent %v", tt.server, tt.tool, tool, ok, tt.timeout, tt.idempotent)
		}
		if has, err := reg.Has(context.Background(), tt.server, tt.tool); err != nil || has != tt.exists {
			t.Errorf("%s__%s exists = %v (%v), want %v", tt.server, tt.tool, has, err, tt.exists)
		}
	}
	if _, err := executor.NewRegistry(f, executor.RegistryOptions{Sandbox: t.TempDir(), Config: config.Default().Executor, Getenv: func(string) string { return "" }}); err == nil ||
		!strings.Contains(err.Error(), "PAY_SECRET") {
		t.Fatalf("an empty secret_env was accepted: %v", err)
	}
}

func TestDemoToolsStayInTheSandbox(t *testing.T) {
	sandbox := t.TempDir()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("top secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(sandbox, "escape")); err != nil {
		t.Fatal(err)
	}
	demo, err := executor.NewDemo(sandbox)
	if err != nil {
		t.Fatal(err)
	}
	defer demo.Close()
	ctx := context.Background()
	res, err := demo.Call(ctx, executor.Request{Tool: "write_file", Arguments: map[string]any{"path": "a/b.txt", "content": "hi"}})
	if err != nil || !strings.Contains(string(res), `"bytes":2`) {
		t.Fatalf("write_file: %s %v", res, err)
	}
	res, err = demo.Call(ctx, executor.Request{Tool: "read_file", Arguments: map[string]any{"path": "a/b.txt"}})
	var got struct{ Content string }
	if err != nil || json.Unmarshal(res, &got) != nil || got.Content != "hi" {
		t.Fatalf("read_file: %s %v", res, err)
	}
	for _, p := range []string{"../outside.txt", "/etc/passwd", "escape/secret", "a/../../x"} {
		for _, tool := range []string{"read_file", "write_file"} {
			_, err := demo.Call(ctx, executor.Request{Tool: tool, Arguments: map[string]any{"path": p, "content": "x"}})
			if err == nil {
				t.Errorf("%s %q succeeded outside the sandbox", tool, p)
			}
		}
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "top secret" {
		t.Fatalf("a file outside the sandbox was changed: %q", b)
	}
}

func TestLimitResult(t *testing.T) {
	small := json.RawMessage(`{"a":1}`)
	if got, tr := executor.LimitResult(small, 100); got != `{"a":1}` || tr {
		t.Fatalf("a small result was changed: %s %v", got, tr)
	}
	big := json.RawMessage(`"` + strings.Repeat(`\"x`, 500) + `"`)
	got, tr := executor.LimitResult(big, 200)
	var m executor.TruncatedResult
	if !tr || len(got) > 200 || json.Unmarshal([]byte(got), &m) != nil || !m.Truncated || m.OriginalBytes != len(big) || m.Prefix == "" {
		t.Fatalf("truncated to %d bytes: %s", len(got), got)
	}
	if got, tr := executor.LimitResult(nil, 10); got != "null" || tr {
		t.Fatalf("an empty result became %q", got)
	}
}

func TestTheExampleRegistryParses(t *testing.T) {
	raw, err := os.ReadFile("tools.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, err := executor.ParseRegistryFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Servers) != 3 {
		t.Fatalf("servers %v", f.Servers)
	}
}
