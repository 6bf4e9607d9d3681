package executor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-gate/airlock/services/executor"
)

// goUpstream is an MCP server of the go-sdk over streamable HTTP (sessions,
// each answer an SSE stream) with one tool, echo. hold, when set, is called
// after each tools/call was answered and before its stream ends.
type goUpstream struct {
	url     string
	addr    string
	conns   atomic.Int64 // TCP connections accepted
	closed  atomic.Int64 // TCP connections closed (by either side)
	runs    *sync.Map    // text → *atomic.Int64: how often echo ran with it
	hold    atomic.Pointer[func()]
	handler atomic.Pointer[http.Handler]
	server  *mcp.Server
	srv     *http.Server
}

// forget makes the server drop every session it has, as one does that
// times its sessions out; its connections stay open.
func (u *goUpstream) forget() {
	h := http.Handler(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.server }, nil))
	u.handler.Store(&h)
}

func startGoUpstream(t testing.TB, addr string) *goUpstream {
	t.Helper()
	u := &goUpstream{runs: new(sync.Map)}
	s := mcp.NewServer(&mcp.Implementation{Name: "go-upstream", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				Text string `json:"text"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &args)
			n, _ := u.runs.LoadOrStore(args.Text, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + args.Text}}}, nil
		})
	u.server = s
	u.forget()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	u.addr = ln.Addr().String()
	u.url = "http://" + u.addr + "/mcp"
	u.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			(*u.handler.Load()).ServeHTTP(w, r) // the answer is flushed; the stream ends when this handler returns
			if hold := u.hold.Load(); hold != nil && bytes.Contains(body, []byte(`"tools/call"`)) {
				(*hold)()
			}
		}),
		ConnState: func(_ net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				u.conns.Add(1)
			case http.StateClosed:
				u.closed.Add(1)
			}
		}}
	go func() { _ = u.srv.Serve(ln) }()
	t.Cleanup(func() { _ = u.srv.Close() })
	return u
}

// echoOnce calls echo as the executor does: under a context of its own,
// ended as soon as the call returns.
func echoOnce(ctx context.Context, m *executor.MCP, text string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := m.Call(cctx, executor.Request{Server: "up", Tool: "echo", Arguments: map[string]any{"text": text},
		IdempotencyKey: "key-" + text, CallID: "call-" + text})
	return string(res), err
}

func TestCallsOverHTTPKeepTheirConnection(t *testing.T) {
	// Each answer's stream ends only once the test says so: the call has
	// its result, and its context has ended, before the server ends the
	// stream. A connection broken in mid-read is not reused.
	release, returned := make(chan struct{}), make(chan struct{})
	up := startGoUpstream(t, "127.0.0.1:0")
	m := executor.NewMCP("up", executor.MCPConfig{URL: up.url}, executor.MCPOptions{Timeout: 10 * time.Second})
	t.Cleanup(func() { _ = m.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := m.Tools(ctx); err != nil { // the session, opened before the calls are held
		t.Fatal(err)
	}
	hold := func() {
		<-release
		returned <- struct{}{}
	}
	up.hold.Store(&hold)
	const calls = 20
	for i := range calls {
		out, err := echoOnce(ctx, m, "hi")
		if err != nil || !strings.Contains(out, "echo: hi") {
			t.Fatalf("call %d: %s %v", i, out, err)
		}
		release <- struct{}{}
		<-returned
	}
	// A stream's end may still be in flight when the next call starts,
	// which then dials again (how many depends on the machine's load), but
	// the connections are kept, where a call's context ending in mid-read
	// breaks the connection of every call. The SDK itself now and then
	// closes an answer's stream as the server ends it (a race of its own:
	// 0-1 in 64 calls here), so a few closes are allowed.
	if n := up.closed.Load(); n > calls/4 {
		t.Fatalf("%d sequential calls closed %d connections (opened %d): a call's context ending after its answer broke the connection it could have kept", calls, n, up.conns.Load())
	}
}

func TestConcurrentCallsOverHTTPKeepTheirConnections(t *testing.T) {
	// Every round holds all its calls' streams open until each has
	// arrived, so a round needs as many connections as it has calls; the
	// rounds after the first find them kept. The adapter may keep as many
	// idle as the test could ever open (the ends of a round's streams may
	// still be in flight when the next round dials), so it closes none
	// itself; the process's shared pool keeps two per host.
	const callers, rounds = 16, 4
	arrived, release, returned := make(chan struct{}), make(chan struct{}), make(chan struct{})
	up := startGoUpstream(t, "127.0.0.1:0")
	m := executor.NewMCP("up", executor.MCPConfig{URL: up.url}, executor.MCPOptions{Timeout: 10 * time.Second, Conns: rounds * callers})
	t.Cleanup(func() { _ = m.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := m.Tools(ctx); err != nil {
		t.Fatal(err)
	}
	hold := func() {
		arrived <- struct{}{}
		<-release
		returned <- struct{}{}
	}
	up.hold.Store(&hold)
	for r := range rounds {
		errs := make(chan error, callers)
		for range callers {
			go func() {
				_, err := echoOnce(ctx, m, "hi")
				errs <- err
			}()
		}
		for range callers {
			<-arrived
		}
		for range callers {
			release <- struct{}{}
			<-returned
		}
		for range callers {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", r, err)
			}
		}
	}
	// A few closes are the SDK's own race (see the sequential test); the
	// process's shared pool closes all but two of each round's.
	if n := up.closed.Load(); n > rounds*callers/4 {
		t.Fatalf("%d rounds of %d concurrent calls closed %d connections (opened %d): the connections of a round were not kept for the next", rounds, callers, n, up.conns.Load())
	}
}

func TestAnHTTPUpstreamThatForgetsItsSessionGetsANewOne(t *testing.T) {
	for _, tc := range []struct {
		name   string
		forget func(t *testing.T, up *goUpstream)
	}{
		{"restarts", func(t *testing.T, up *goUpstream) {
			// Its sessions and connections go away; it comes back on the
			// same address knowing none of them.
			if err := up.srv.Close(); err != nil {
				t.Fatal(err)
			}
			startGoUpstream(t, up.addr).runs = up.runs
		}},
		{"drops_its_sessions", func(_ *testing.T, up *goUpstream) { up.forget() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := startGoUpstream(t, "127.0.0.1:0")
			m := executor.NewMCP("up", executor.MCPConfig{URL: up.url}, executor.MCPOptions{Timeout: 5 * time.Second})
			t.Cleanup(func() { _ = m.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if out, err := echoOnce(ctx, m, "before"); err != nil || !strings.Contains(out, "echo: before") {
				t.Fatalf("before: %s %v", out, err)
			}
			tc.forget(t, up)
			// The calls on the old session fail — determinately when the
			// transport refused to send one, as a call that may have run
			// when the server no longer knows the session (the SDK cannot
			// tell this call's refusal from another request's) — and none
			// is made again; a later call runs on a new session.
			for i := 0; ; i++ {
				text := fmt.Sprintf("after-%d", i)
				out, err := echoOnce(ctx, m, text)
				if err == nil && strings.Contains(out, "echo: "+text) {
					break
				}
				var ue *executor.UpstreamError
				if err == nil || errors.Is(err, mcp.ErrSessionMissing) && !(errors.As(err, &ue) && ue.Started) {
					t.Fatalf("call %d after the server forgot the session: %s %v", i, out, err)
				}
				if i >= 3 {
					t.Fatalf("no new session after %d calls: %v", i+1, err)
				}
			}
			up.runs.Range(func(text, n any) bool {
				if n.(*atomic.Int64).Load() > 1 {
					t.Errorf("echo ran %d times with %q: a call was made again", n.(*atomic.Int64).Load(), text)
				}
				return true
			})
		})
	}
}

// BenchmarkMCPCall compares a tools/call through the adapter, as the
// executor makes it, with the same call made directly by a go-sdk client
// on a session of its own: what the adapter adds.
func BenchmarkMCPCall(b *testing.B) {
	ctx := context.Background()
	args := func() map[string]any { return map[string]any{"text": "hello from the bench"} }
	b.Run("direct", func(b *testing.B) {
		up := startGoUpstream(b, "127.0.0.1:0")
		c := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "1"}, nil)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: up.url, HTTPClient: &http.Client{}}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		b.ReportAllocs()
		before := up.conns.Load()
		for b.Loop() {
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: args()}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(up.conns.Load()-before)/float64(b.N), "conns/op")
	})
	b.Run("adapter", func(b *testing.B) {
		up := startGoUpstream(b, "127.0.0.1:0")
		m := executor.NewMCP("up", executor.MCPConfig{URL: up.url}, executor.MCPOptions{})
		defer m.Close()
		b.ReportAllocs()
		before := up.conns.Load()
		for b.Loop() {
			if _, err := echoOnce(ctx, m, "hello from the bench"); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(up.conns.Load()-before)/float64(b.N), "conns/op")
	})
}
