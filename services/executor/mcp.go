package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlock-gate/airlock/services/shared/config"
)

// MCPOptions tune an MCP adapter.
type MCPOptions struct {
	// Timeout bounds every operation on the upstream besides a tool call
	// (which the call's context bounds): starting it and its initialize
	// handshake plus tools/list, a liveness ping, closing it. Zero means
	// executor.upstream_timeout's default.
	Timeout time.Duration
	// Log receives upstream restarts and failures; nil discards them.
	Log *slog.Logger
	// Conns is how many calls may run on the server at once (the
	// executor's workers): over HTTP, as many idle connections are kept
	// for the next calls. Zero means executor.workers' default.
	Conns int
	// OpenBackoff is how long the server is not started again after a
	// failed start, doubled per failure up to 30 s (or OpenBackoff, when
	// longer); calls meanwhile fail at once. Zero means 250 ms.
	OpenBackoff time.Duration
}

// MCP runs the tools of one MCP server, over stdio (a child process) or
// streamable HTTP.
//
// Isolation: every operation on the upstream has a deadline, and no lock is
// held while waiting for it, so a server that hangs or dies fails only its
// own calls, with an *UpstreamError, and never holds up other calls or other
// servers' tools. The session is opened on first use, by one attempt that
// concurrent callers share; an attempt that fails is not repeated for a
// back-off (each call meanwhile fails at once, saying when it is retried).
// A session whose server exits, whose connection breaks, or that does not
// answer a ping after a call timed out is retired (its process group
// killed) and the next call starts the server again; so is one the server
// no longer knows (it restarted, or dropped it: HTTP 404). One session
// serves concurrent calls; over HTTP they keep their connections from call
// to call.
type MCP struct {
	name    string
	cfg     MCPConfig
	timeout time.Duration
	// backoff is the first wait after a failed start (MCPOptions.OpenBackoff).
	backoff time.Duration
	log     *slog.Logger
	// http is the connection pool of a server over HTTP (nil for stdio),
	// its own so that the executor's concurrent calls keep their
	// connections instead of sharing the process's two per host.
	http *http.Transport

	mu       sync.Mutex          // guards what follows; never held across upstream I/O
	cur      *upstream           // the open session, or nil
	opening  *attempt            // the open attempt in flight, or nil
	failures int                 // consecutive failed attempts
	retryAt  time.Time           // no new attempt before this
	lastErr  error               // why the last attempt failed
	closed   bool                // Close was called
	changed  func(server string) // told of tool changes; see Registry.OnToolsChanged
}

// upstream is one session with one server (for stdio, one process).
type upstream struct {
	cs    *mcp.ClientSession
	proc  *process // nil for HTTP
	since time.Time
	// Guarded by MCP.mu.
	tools   []string    // the names of defs, sorted
	defs    []*mcp.Tool // the server's tools/list, as it sent it
	stale   bool        // the server said its tools changed
	listing *attempt    // a tools/list refresh in flight
	probing bool        // a liveness ping in flight
	retired bool
}

// attempt is one open or refresh that callers wait on together.
type attempt struct {
	done chan struct{}
	up   *upstream
	err  error
}

// Back-off between failed attempts to open a session (MCPOptions.OpenBackoff's
// default): doubled per failure up to openBackoffMax.
const (
	openBackoffMin = 250 * time.Millisecond
	openBackoffMax = 30 * time.Second
)

// NewMCP returns an adapter for the MCP server configured by cfg; name is
// its registry name (the "fs" of fs__read_file).
func NewMCP(name string, cfg MCPConfig, o MCPOptions) *MCP {
	if o.Timeout <= 0 {
		o.Timeout = config.Default().Executor.UpstreamTimeout
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Conns <= 0 {
		o.Conns = config.Default().Executor.Workers
	}
	if o.OpenBackoff <= 0 {
		o.OpenBackoff = openBackoffMin
	}
	m := &MCP{name: name, cfg: cfg, timeout: o.Timeout, backoff: o.OpenBackoff, log: o.Log.With("mcp_server", name)}
	if cfg.URL != "" {
		m.http = http.DefaultTransport.(*http.Transport).Clone()
		m.http.MaxIdleConnsPerHost = o.Conns
		m.http.MaxIdleConns = max(m.http.MaxIdleConns, o.Conns)
	}
	return m
}

// Tools implements Adapter: the names of the server's tools/list, cached
// per session and listed again after the server announces a change.
func (m *MCP) Tools(ctx context.Context) ([]string, error) {
	names, _, err := m.listed(ctx)
	return names, err
}

// describe implements describer: the server's tools/list as it sent it,
// cached and listed again as for Tools, within the same deadlines.
func (m *MCP) describe(ctx context.Context) ([]*mcp.Tool, error) {
	_, defs, err := m.listed(ctx)
	return defs, err
}

// listed is the current session's tool list: names, sorted, and the
// definitions as the server sent them.
func (m *MCP) listed(ctx context.Context) ([]string, []*mcp.Tool, error) {
	up, err := m.session(ctx)
	if err != nil {
		return nil, nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return up.tools, up.defs, nil
}

// Call implements Adapter. A result with isError becomes a *ToolError with
// the text the server gave; otherwise the result is the MCP CallToolResult
// as JSON ({"content": [...], "structuredContent": ...}). When the server
// cannot be reached the error is an *UpstreamError that says the tool was
// not reached; when the connection breaks mid-call, one that says it may
// have run.
func (m *MCP) Call(ctx context.Context, req Request) (json.RawMessage, error) {
	res, err := m.result(ctx, req)
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

// result makes req's tools/call, with the errors Call documents, and
// gives the result as the SDK decoded it.
func (m *MCP) result(ctx context.Context, req Request) (*mcp.CallToolResult, error) {
	args := req.Arguments
	if args == nil {
		args = map[string]any{}
	}
	params := &mcp.CallToolParams{Name: req.Tool, Arguments: args}
	if req.IdempotencyKey != "" {
		params.Meta = mcp.Meta{"airlock/idempotency_key": req.IdempotencyKey, "airlock/call_id": req.CallID}
	}
	res, err := m.callOn(ctx, req.Tool, params)
	if err != nil {
		return nil, err
	}
	if res.IsError {
		raw, _ := json.Marshal(res) // a result the SDK decoded encodes again
		return nil, &ToolError{Message: textOf(res), Result: raw}
	}
	return res, nil
}

// callOn makes the call on the current session (opening one if needed)
// and turns its failures into the errors Call documents.
func (m *MCP) callOn(ctx context.Context, tool string, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	up, err := m.session(ctx)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	known := slices.Contains(up.tools, tool)
	m.mu.Unlock()
	if !known {
		return nil, fmt.Errorf("MCP server %s has no tool %q: %w", m.name, tool, ErrUnknownTool)
	}
	res, err := m.invoke(ctx, up, params)
	if err == nil {
		return res, nil
	}
	if ctx.Err() != nil {
		// Slow, or hung? A server that no longer answers a ping is
		// restarted, so later calls do not wait for their own timeouts.
		go m.probe(up)
		return nil, fmt.Errorf("MCP %s__%s: %w", m.name, tool, ctx.Err())
	}
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		// A JSON-RPC error answer: the server refused the call.
		return nil, &ToolError{Message: fmt.Sprintf("MCP %s__%s: %v", m.name, tool, err)}
	}
	if errors.Is(err, mcp.ErrSessionMissing) {
		// The server no longer knows the session (it restarted, or dropped
		// it). This call may still have run: the SDK ends every call in
		// flight on a session with this error when any request of the
		// session is refused, including calls the server had accepted.
		why := m.retire(up, "it no longer knows the session (it restarted, or dropped it)")
		return nil, &UpstreamError{Server: m.name, Op: "call " + tool, Started: true, Err: fmt.Errorf("%w%s", err, why)}
	}
	why := m.retire(up, fmt.Sprintf("the connection broke during a call of %s", tool))
	return nil, &UpstreamError{Server: m.name, Op: "call " + tool, Started: true,
		Err: fmt.Errorf("%v%s", err, why)}
}

// invoke makes the tools/call on up; when ctx ends first, it returns ctx's
// error. Over HTTP it runs on this goroutine, since the SDK's call ends
// with its context there (net/http honours it while connecting, writing
// and reading). Over stdio it runs on a goroutine of its own: whatever it
// blocks on (a full pipe to a stuck process), invoke returns when ctx ends.
func (m *MCP) invoke(ctx context.Context, up *upstream, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	if up.proc == nil {
		cctx, release := m.callContext(ctx)
		defer release()
		return up.cs.CallTool(cctx, params)
	}
	type result struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := up.cs.CallTool(ctx, params)
		done <- result{res, err}
	}()
	select {
	case r := <-done:
		return r.res, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// callContext is the context of one tools/call: ctx's values and, while
// the call runs, ctx's end. Once the call has its answer (release), ctx no
// longer reaches the exchange: the SDK reads the rest of a streamed answer
// (the end of its SSE stream) after handing the answer over, and a caller
// that ends ctx as soon as it has the result would break the HTTP
// connection in mid-read, so that the next call opens another. That rest
// is bounded by the upstream timeout instead: a timer per call, alive that
// long (calls per second × the timeout of them at once, a few hundred bytes
// each).
func (m *MCP) callContext(ctx context.Context) (context.Context, func()) {
	cctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	return cctx, func() {
		if stop() {
			time.AfterFunc(m.timeout, func() { cancel(nil) })
		}
	}
}

// textOf joins the text content of a result, for error messages.
func textOf(res *mcp.CallToolResult) string {
	parts := textParts(res)
	if len(parts) == 0 {
		return "the tool reported an error without a message"
	}
	return strings.Join(parts, "\n")
}

// textParts is the text content of a result, in order.
func textParts(res *mcp.CallToolResult) []string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return parts
}

// session returns an open session with a current tool list, opening one
// (or listing again) if needed. It waits at most for ctx and the
// attempt's own deadline; it never holds m.mu while waiting.
func (m *MCP) session(ctx context.Context) (*upstream, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, &UpstreamError{Server: m.name, Op: "open", Err: errors.New("the adapter is closed (the executor is shutting down)")}
	}
	var a *attempt
	switch up := m.cur; {
	case up != nil && !up.stale:
		m.mu.Unlock()
		return up, nil
	case up != nil && up.listing != nil:
		a = up.listing
	case up != nil:
		a = &attempt{done: make(chan struct{})}
		up.listing = a
		go m.relist(up, a)
	case m.opening != nil:
		a = m.opening
	case time.Now().Before(m.retryAt):
		err := &UpstreamError{Server: m.name, Op: "open", Err: fmt.Errorf("%w; not retried before %s",
			m.lastErr, m.retryAt.Format(time.TimeOnly))}
		m.mu.Unlock()
		return nil, err
	default:
		a = &attempt{done: make(chan struct{})}
		m.opening = a
		go m.open(a)
	}
	m.mu.Unlock()
	select {
	case <-a.done:
		return a.up, a.err
	case <-ctx.Done():
		return nil, &UpstreamError{Server: m.name, Op: "open", Err: fmt.Errorf("still starting or listing its tools when the call's time ran out: %w", ctx.Err())}
	}
}

// open runs one attempt: start the server, initialize, list its tools,
// all within m.timeout.
func (m *MCP) open(a *attempt) {
	ctx, cancel := context.WithTimeout(context.Background(), m.timeout)
	defer cancel()
	up, err := m.dial(ctx)
	if err == nil {
		up.defs, up.tools, err = listTools(ctx, up.cs)
		if err != nil {
			err = fmt.Errorf("list its tools: %w", err)
			m.kill(up)
		}
	}
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("it did not answer within %s (executor.upstream_timeout): %w", m.timeout, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.opening = nil
	switch {
	case err != nil:
		m.failures++
		backoff := min(m.backoff<<min(m.failures-1, 16), max(openBackoffMax, m.backoff))
		m.retryAt, m.lastErr = time.Now().Add(backoff), err
		a.err = &UpstreamError{Server: m.name, Op: "open", Err: fmt.Errorf("cannot start MCP server %s (%s): %w", m.name, m.where(), err)}
		m.log.Warn("MCP server unavailable: its calls fail until it starts", "where", m.where(), "err", err, "retry_in", backoff)
	case m.closed:
		a.err = &UpstreamError{Server: m.name, Op: "open", Err: errors.New("the adapter was closed while the server started")}
		go m.kill(up)
	default:
		m.failures, m.cur, a.up = 0, up, up
		go m.watch(up)
		m.announce() // a (re)started server may list other tools
	}
	close(a.done)
}

// relist lists the tools of up again after the server announced a change.
func (m *MCP) relist(up *upstream, a *attempt) {
	ctx, cancel := context.WithTimeout(context.Background(), m.timeout)
	defer cancel()
	defs, tools, err := listTools(ctx, up.cs)
	if err != nil {
		why := m.retire(up, "it did not list its tools again after announcing a change")
		a.err = &UpstreamError{Server: m.name, Op: "list tools", Err: fmt.Errorf("%w%s", err, why)}
	}
	m.mu.Lock()
	up.listing = nil
	if err == nil {
		up.defs, up.tools, up.stale, a.up = defs, tools, false, up
	}
	m.mu.Unlock()
	close(a.done)
}

// listTools lists the server's tools: their definitions as it sent them,
// and their names, sorted.
func listTools(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Tool, []string, error) {
	type result struct {
		defs  []*mcp.Tool
		names []string
		err   error
	}
	done := make(chan result, 1)
	go func() {
		r := result{names: []string{}}
		for t, err := range cs.Tools(ctx, nil) {
			if err != nil {
				r.err = err
				break
			}
			r.defs = append(r.defs, t)
			r.names = append(r.names, t.Name)
		}
		sort.Strings(r.names)
		done <- r
	}()
	select {
	case r := <-done:
		return r.defs, r.names, r.err
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
}

// dial starts the server and runs the initialize handshake.
func (m *MCP) dial(ctx context.Context) (*upstream, error) {
	up := &upstream{since: time.Now()}
	client := mcp.NewClient(&mcp.Implementation{Name: "airlock-executor", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(_ context.Context, req *mcp.ToolListChangedRequest) { m.toolsChanged(req.Session) },
	})
	t, proc := m.transport()
	up.proc = proc
	type result struct {
		cs  *mcp.ClientSession
		err error
	}
	done := make(chan result, 1)
	go func() {
		cs, err := client.Connect(ctx, t, nil)
		done <- result{cs, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			m.kill(up) // the SDK leaves the process running when the handshake fails
			return nil, fmt.Errorf("%w%s", r.err, proc.exitNote())
		}
		up.cs = r.cs
		return up, nil
	case <-ctx.Done():
		m.kill(up)
		go func() { // the handshake may still complete: close what it opened
			if r := <-done; r.cs != nil {
				_ = r.cs.Close()
			}
		}()
		return nil, fmt.Errorf("no answer to initialize: %w%s", ctx.Err(), proc.exitNote())
	}
}

// toolsChanged handles the server's notifications/tools/list_changed: the
// tools are listed again before the next use (so a new tool is callable at
// once), and the OnToolsChanged hook is told.
func (m *MCP) toolsChanged(s *mcp.ClientSession) {
	m.mu.Lock()
	current := m.cur != nil && m.cur.cs == s
	if current {
		m.cur.stale = true
	}
	m.mu.Unlock()
	if current {
		m.announce()
	}
}

// announce tells the OnToolsChanged hook, if any, without blocking.
func (m *MCP) announce() {
	go func() {
		m.mu.Lock()
		fn := m.changed
		m.mu.Unlock()
		if fn != nil {
			fn(m.name)
		}
	}()
}

// watch retires up when its server goes away by itself.
func (m *MCP) watch(up *upstream) {
	err := up.cs.Wait()
	note := ""
	if err != nil {
		note = ": " + err.Error()
	}
	m.retire(up, "the server closed the connection"+note)
}

// probe pings up after a call on it timed out and retires it when the
// ping is not answered in time: a hung server is restarted.
func (m *MCP) probe(up *upstream) {
	m.mu.Lock()
	busy := up.probing || up.retired
	up.probing = true
	m.mu.Unlock()
	if busy {
		return
	}
	defer func() {
		m.mu.Lock()
		up.probing = false
		m.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), m.timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- up.cs.Ping(ctx, nil) }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		m.retire(up, fmt.Sprintf("it did not answer a ping within %s after a call timed out (%v)", m.timeout, err))
	}
}

// retire forgets up, if it is still current, and ends it: its process group
// is killed, so calls still waiting on it return at once. It returns a note
// for error messages.
func (m *MCP) retire(up *upstream, why string) string {
	m.mu.Lock()
	first := !up.retired
	up.retired = true
	if m.cur == up {
		m.cur = nil
	}
	m.mu.Unlock()
	if first {
		m.log.Warn("MCP server retired; it is started again on the next call", "why", why, "up_for", time.Since(up.since).Round(time.Millisecond))
		go m.kill(up)
	}
	return fmt.Sprintf(" (MCP server %s: %s; it is started again on the next call%s)", m.name, why, up.proc.exitNote())
}

// kill ends up at once: the process group, then the session.
func (m *MCP) kill(up *upstream) {
	up.proc.kill()
	if up.cs != nil {
		closeWithin(up.cs, m.timeout)
	}
}

// closeWithin closes cs, waiting at most d (the SDK's Close waits for
// requests in flight).
func closeWithin(cs *mcp.ClientSession, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		_ = cs.Close()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// Close implements Adapter: it ends the session gracefully within the
// upstream timeout, then kills the server's process group or closes its
// idle HTTP connections.
func (m *MCP) Close() error {
	if m.http != nil {
		defer m.http.CloseIdleConnections()
	}
	m.mu.Lock()
	m.closed = true
	up := m.cur
	m.cur = nil
	if up != nil {
		up.retired = true
	}
	m.mu.Unlock()
	if up == nil {
		return nil
	}
	ok := closeWithin(up.cs, m.timeout)
	up.proc.kill()
	if !ok {
		return fmt.Errorf("MCP server %s did not close within %s; its process group was killed", m.name, m.timeout)
	}
	return nil
}

func (m *MCP) transport() (mcp.Transport, *process) {
	if m.cfg.URL != "" {
		client := &http.Client{Transport: m.http}
		if len(m.cfg.Headers) > 0 {
			client.Transport = headerTransport{headers: m.cfg.Headers, next: m.http}
		}
		return &mcp.StreamableClientTransport{Endpoint: m.cfg.URL, HTTPClient: client, DisableStandaloneSSE: true}, nil
	}
	cmd := exec.Command(m.cfg.Command, m.cfg.Args...)
	cmd.Dir = m.cfg.Dir
	cmd.Env = upstreamEnv(os.LookupEnv, m.cfg.Env)
	p := &process{}
	cmd.Stderr = &p.stderr
	// Its own process group, so that killing it reaches what it started
	// (npx → node); Wait does not wait for descendants holding its pipes.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = time.Second
	return &stdioTransport{CommandTransport: mcp.CommandTransport{Command: cmd, TerminateDuration: m.timeout / 3}, p: p}, p
}

// inheritedEnv are the variables a stdio server inherits from airlock's
// environment: what a program needs to start and speak (the MCP SDKs'
// default, plus the locale and the temporary directory). Nothing else is
// passed on: the server is third-party code running what agents ask of it,
// and airlock's environment holds secrets (webhook signing keys read by
// secret_env, the decision key, whatever the operator exported). A server
// that needs a variable gets it from its entry's env, where
// "${GITHUB_TOKEN}" passes on one of airlock's.
var inheritedEnv = []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR"}

// upstreamEnv is a stdio server's environment: inheritedEnv as lookup finds
// them, then its entry's env, each value's ${VAR} expanded from lookup.
func upstreamEnv(lookup func(string) (string, bool), entry map[string]string) []string {
	env := make([]string, 0, len(inheritedEnv)+len(entry))
	for _, k := range inheritedEnv {
		if v, ok := lookup(k); ok {
			env = append(env, k+"="+v)
		}
	}
	expand := func(k string) string { v, _ := lookup(k); return v }
	for _, k := range slices.Sorted(maps.Keys(entry)) {
		env = append(env, k+"="+os.Expand(entry[k], expand))
	}
	return env
}

// stdioTransport is the SDK's command transport that tells process when
// the child has started, so that a kill racing the start still reaches it.
type stdioTransport struct {
	mcp.CommandTransport
	p *process
}

func (t *stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.CommandTransport.Connect(ctx)
	if err == nil {
		t.p.started(t.Command.Process.Pid)
	}
	return c, err
}

func (m *MCP) where() string {
	if m.cfg.URL != "" {
		return m.cfg.URL
	}
	return strings.Join(append([]string{m.cfg.Command}, m.cfg.Args...), " ")
}

// process is a stdio server's child process.
type process struct {
	stderr tail

	mu     sync.Mutex
	pid    int // 0 until started
	killed bool
}

func (p *process) started(pid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pid = pid
	if p.killed {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// kill kills the process group, now or as soon as it starts (a no-op for
// HTTP).
func (p *process) kill() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.killed = true
	if p.pid > 0 {
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	}
}

// exitNote is the end of what the server wrote to stderr, for error messages.
func (p *process) exitNote() string {
	if p == nil {
		return ""
	}
	if s := p.stderr.String(); s != "" {
		return "; its stderr ends: " + s
	}
	return ""
}

// tail keeps the last bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailMax = 512

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailMax {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailMax:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(strings.Fields(string(t.buf)), " ")
}

var _ io.Writer = (*tail)(nil)

type headerTransport struct {
	headers map[string]string
	next    http.RoundTripper
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, os.ExpandEnv(v))
	}
	return h.next.RoundTrip(r)
}
