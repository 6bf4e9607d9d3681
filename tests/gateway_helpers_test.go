package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/policyapi"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// nodeBin is an npm package's command under tests/node; a test that needs
// one fails (never skips) with how to install it.
func nodeBin(t *testing.T, name string) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("node", "node_modules", ".bin", name))
	if err == nil {
		_, err = os.Stat(path)
	}
	if err != nil {
		t.Fatalf("%s is not installed (%v): run `go tool task test:deps` (npm install --prefix tests/node)", name, err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not installed: install Node.js (apt-get install nodejs npm), then `go tool task test:deps`")
	}
	return path
}

// gatewayEnv is `airlock dev` with a registry of real MCP servers and four
// gateway endpoints:
//   - bot (agent bot, acts for dana, elicitation_fallback deny),
//   - wait (agent waiter, acts for dana, elicitation_fallback wait),
//   - safe (agent safebot, profile "safe": read, list and search tools only),
//   - plain (agent plainbot, acts for nobody: reviewers decide),
//   - patient (agent patientbot, like plain; answers "waiting for approval"
//     after 2s),
//   - leaving (agent leaver, like patient; cancels a call nobody waits for
//     after 2s),
//   - crowd (agent crowdbot, like patient, answering after 60s: time for
//     many requests to wait for one call at once, and for their reads of
//     the bucket to be counted),
//   - coder (agent coder, like plain, with run_code: 1s busy, 32 MiB),
//   - selfcoder (agent selfcoder, like bot, with run_code),
//   - coder2 (agent coder2, like plain, with run_code and max_running 1).
//
// For bot, waiter and selfcoder a rule lets the requester confirm fs__write_file.
type gatewayEnv struct {
	dev     *devProcess
	files   string // the filesystem server's directory
	evPID   string // file where the everything server writes its pid
	tokens  map[string]string
	api     *approvalapi.Client
	baseURL string
	config  string
	// admin reads the bus as its admin; clientWaits is the client-waits
	// bucket (rejoin entries, offers, leases) it reads.
	admin       jetstream.JetStream
	clientWaits jetstream.KeyValue
}

func startGatewayEnv(t *testing.T) *gatewayEnv {
	t.Helper()
	fsBin, evBin := nodeBin(t, "mcp-server-filesystem"), nodeBin(t, "mcp-server-everything")
	growing, err := filepath.Abs(filepath.Join("node", "growing-server.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	nodeBin(t, "mcp-inspector-cli") // fail early when the test packages are missing
	dir := t.TempDir()
	g := &gatewayEnv{files: filepath.Join(dir, "files"), evPID: filepath.Join(dir, "ev.pid"), tokens: map[string]string{}}
	if err := os.MkdirAll(g.files, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(g.files, "hello.txt"), "hello from the filesystem server\n")
	// The everything server runs under a shell that records its pid, so a
	// test can kill it mid-session.
	writeFile(t, filepath.Join(dir, "tools.yaml"), fmt.Sprintf(`servers:
  fs:
    mcp: {command: %q, args: [%q]}
    trusted: true
  ev:
    mcp: {command: sh, args: ["-c", "echo $$ > %s; exec %s"]}
  grow:
    mcp: {command: node, args: [%q]}
`, fsBin, g.files, g.evPID, evBin, growing))
	var eps strings.Builder
	for _, e := range []struct{ name, agent, extra string }{
		{"bot", "bot", "on_behalf_of: dana"},
		{"wait", "waiter", "on_behalf_of: dana, elicitation_fallback: wait"},
		{"safe", "safebot", "profile: safe"},
		{"plain", "plainbot", ""},
		{"patient", "patientbot", "answer_within: 2s"},
		{"leaving", "leaver", "answer_within: 2s, abandon_after: 2s"},
		{"crowd", "crowdbot", "answer_within: 60s"},
		{"coder", "coder", "run_code: {enabled: true, busy: 1s, max_memory_mb: 32}"},
		{"selfcoder", "selfcoder", "on_behalf_of: dana, run_code: {enabled: true}"},
		{"coder2", "coder2", "run_code: {enabled: true, max_running: 1}"},
	} {
		tok := fmt.Sprintf("%s-token-%d-abcdefghijklmnop", e.name, time.Now().UnixNano())
		g.tokens[e.name] = tok
		file := filepath.Join(dir, e.name+".token")
		writeFile(t, file, tok+"\n")
		extra := ""
		if e.extra != "" {
			extra = ", " + e.extra
		}
		fmt.Fprintf(&eps, "    - {name: %s, agent: %s, token_file: %q%s}\n", e.name, e.agent, file, extra)
	}
	cfg := filepath.Join(dir, "airlock.yaml")
	writeFile(t, cfg, fmt.Sprintf(`approval:
  groups: {reviewers: [alice]}
executor:
  tools_file: %q
gateway:
  heartbeat: 1s
  run_code_max_running: %d
  endpoints:
%s`, filepath.Join(dir, "tools.yaml"), gatewayScriptsAtOnce, eps.String()))
	g.config = cfg
	g.dev = startDev(t, filepath.Join(dir, "data"), 0, "", "AIRLOCK_CONFIG="+cfg)
	g.baseURL = g.dev.HTTPURL
	g.api = g.dev.API(t)
	nc, js := g.dev.Admin(t)
	g.admin = js
	if g.clientWaits, err = js.KeyValue(context.Background(), config.Default().Buckets.ClientWaits); err != nil {
		t.Fatal(err)
	}
	rules := policyapi.New(nc, testenv.DevFrontendKey(t, g.dev.DataDir), "console")
	for _, agent := range []string{"bot", "waiter", "selfcoder"} {
		_, err := rules.PutRule(context.Background(), &airlockv1.PolicyRule{
			Id: "confirm-" + agent, Priority: 5, Agent: agent, Pattern: "fs__write_file", Effect: "ask",
			Approvers: []string{"requester"}, Reason: "writes need the user's own confirmation",
		}, &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "admin", Channel: "cli"})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The default policy asks about get_* tools (they mostly reach the
	// network); the test's growing upstream reaches nothing.
	if _, err := rules.PutRule(context.Background(), &airlockv1.PolicyRule{
		Id: "grow-local", Priority: 5, Pattern: "grow__get_*", Effect: "allow", Reason: "the test's growing upstream reaches no network",
	}, &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "admin", Channel: "cli"}); err != nil {
		t.Fatal(err)
	}
	// The gateway lists every upstream once each has started (node servers
	// can take a while on a busy machine).
	cs := g.connect(t, "plain", clientOpts{version: "2025-11-25"})
	testenv.Eventually(t, 120*time.Second, "every upstream's tools in the gateway's tools/list", func() bool {
		names := toolNames(t, cs)
		return names["fs__read_text_file"] != nil && names["ev__echo"] != nil && names["grow__get_more_tools"] != nil
	})
	// The rules are in force once a dry run says so.
	testenv.Eventually(t, 15*time.Second, "the confirmation rules to be in force", func() bool {
		d, err := rules.Eval(context.Background(), &airlockv1.ToolCall{AgentId: "bot", Server: "fs", Tool: "write_file"})
		return err == nil && d.GetRuleId() == "confirm-bot"
	})
	return g
}

// url is an endpoint's URL.
func (g *gatewayEnv) url(endpoint string) string { return g.baseURL + "/mcp/" + endpoint }

// bearer adds an Authorization header to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// clientOpts configures a go-sdk client of the gateway.
type clientOpts struct {
	version  string // "" = the newest (2026-07-28)
	elicit   func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)
	urlOnly  bool // the client supports only URL elicitations
	formURL  bool // the client supports form and URL elicitations
	complete func(string)
	progress func(*mcp.ProgressNotificationClientRequest)
	changed  func()
}

// connect opens an MCP session with an endpoint over streamable HTTP.
func (g *gatewayEnv) connect(t *testing.T, endpoint string, o clientOpts) *mcp.ClientSession {
	t.Helper()
	copts := &mcp.ClientOptions{ElicitationHandler: o.elicit}
	if o.urlOnly {
		copts.Capabilities = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}
	}
	if o.formURL {
		copts.Capabilities = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}}
	}
	if o.complete != nil {
		copts.ElicitationCompleteHandler = func(_ context.Context, r *mcp.ElicitationCompleteNotificationRequest) {
			o.complete(r.Params.ElicitationID)
		}
	}
	if o.progress != nil {
		copts.ProgressNotificationHandler = func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { o.progress(r) }
	}
	if o.changed != nil {
		copts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) { o.changed() }
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "gateway-test", Version: "1"}, copts)
	tr := &mcp.StreamableClientTransport{Endpoint: g.url(endpoint), HTTPClient: &http.Client{Transport: bearer{g.tokens[endpoint], http.DefaultTransport}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: o.version})
	if err != nil {
		t.Fatalf("connect to gateway endpoint %s (%q): %v", endpoint, o.version, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// direct opens a session with the filesystem server itself, as the
// executor does.
func (g *gatewayEnv) direct(t *testing.T) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(nodeBin(t, "mcp-server-filesystem"), g.files)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func toolNames(t *testing.T, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	out := map[string]*mcp.Tool{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		out[tool.Name] = tool
	}
	return out
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

// callAsync calls a tool on its own goroutine; a call that fails answers
// an isError result with the error, so the test reports it (t.Fatal must
// not be called off the test's goroutine).
func callAsync(cs *mcp.ClientSession, name string, args map[string]any) <-chan *mcp.CallToolResult {
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the call failed: " + err.Error()}}}
		}
		done <- res
	}()
	return done
}

// text joins a result's text content.
func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// pendingFor waits until agent has a pending call of tool on path and returns it.
func (g *gatewayEnv) pendingFor(t *testing.T, agent, tool, path string) *airlockv1.ApprovalRecord {
	t.Helper()
	return pendingWhere(t, g.api, agent, tool, "on "+path, func(r *airlockv1.ApprovalRecord) bool {
		return r.GetCall().GetArguments().AsMap()["path"] == path
	})
}

func (g *gatewayEnv) decide(t *testing.T, rec *airlockv1.ApprovalRecord, who string, kind airlockv1.DecisionKind, reason string) {
	t.Helper()
	if _, err := decideAs(t, g.api, who, rec, kind, reason); err != nil {
		t.Fatal(err)
	}
}

// rawSession is an MCP session spoken as plain HTTP (testenv.MCPSession),
// for what a go-sdk client never does (sending a request again, answering
// another session's request); its posts must be accepted.
type rawSession struct {
	*testenv.MCPSession
	t *testing.T
}

func (g *gatewayEnv) raw(t *testing.T, endpoint string, caps string) *rawSession {
	t.Helper()
	return &rawSession{testenv.OpenMCPSession(t, g.url(endpoint), g.tokens[endpoint], caps, "raw", "1"), t}
}

// post sends body in the session and fails the test unless it is accepted.
func (s *rawSession) post(body string) *http.Response {
	s.t.Helper()
	resp := s.Post(context.Background(), body)
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		s.t.Fatalf("POST: %s: %s", resp.Status, b)
	}
	return resp
}

// rpcMsg is a JSON-RPC message as read from a response stream.
type rpcMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// messages reads a response (SSE or JSON) into a channel, closed at its end.
func messages(resp *http.Response) <-chan rpcMsg {
	out := make(chan rpcMsg, 16)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			var m rpcMsg
			if json.NewDecoder(resp.Body).Decode(&m) == nil {
				out <- m
			}
			return
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var m rpcMsg
			if json.Unmarshal([]byte(line), &m) == nil {
				out <- m
			}
		}
	}()
	return out
}

// next waits for the first message on ch that match accepts.
func next(t *testing.T, ch <-chan rpcMsg, what string, match func(rpcMsg) bool) rpcMsg {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case m, ok := <-ch:
			if !ok {
				t.Fatalf("the stream ended before %s", what)
			}
			if match(m) {
				return m
			}
		case <-timeout:
			t.Fatalf("no %s within 60s", what)
		}
	}
}

// toolResult decodes a tools/call result message.
func toolResult(t *testing.T, m rpcMsg) *mcp.CallToolResult {
	t.Helper()
	if len(m.Error) > 0 {
		t.Fatalf("tools/call answered an error: %s", m.Error)
	}
	res := &mcp.CallToolResult{}
	if err := json.Unmarshal(m.Result, res); err != nil {
		t.Fatalf("decode %s: %v", m.Result, err)
	}
	return res
}

// inspector runs the MCP inspector's CLI against an endpoint.
func (g *gatewayEnv) inspector(t *testing.T, endpoint string, args ...string) string {
	t.Helper()
	bin := nodeBin(t, "mcp-inspector-cli")
	real, err := filepath.EvalSymlinks(bin)
	if err != nil {
		t.Fatal(err)
	}
	full := append([]string{real, "--cli", g.url(endpoint), "--transport", "http", "--header", "Authorization: Bearer " + g.tokens[endpoint]}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", full...)
	// The CLI finds its own package.json relative to the working directory.
	cmd.Dir = filepath.Dir(real)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("inspector %v: %v\n%s", args, err, out.String())
	}
	return out.String()
}

// jsonOf cuts the JSON document out of the inspector's output (it prints a
// deprecation banner first).
func jsonOf(t *testing.T, out string) map[string]any {
	t.Helper()
	i := strings.Index(out, "{")
	if i < 0 {
		t.Fatalf("no JSON in %q", out)
	}
	var v map[string]any
	if err := json.NewDecoder(strings.NewReader(out[i:])).Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", out[i:], err)
	}
	return v
}

// counter counts events from concurrent callbacks.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) add(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[k]++
}

func (c *counter) get(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[k]
}

// stdioSession runs `airlock gateway --stdio` as a client that launches its
// servers would.
func (g *gatewayEnv) stdioSession(t *testing.T, endpoint string) *mcp.ClientSession {
	t.Helper()
	cs, _ := g.stdioGateway(t, endpoint)
	return cs
}

// stdioGateway is stdioSession with the gateway's process, a replica of
// its own that a test may kill.
func (g *gatewayEnv) stdioGateway(t *testing.T, endpoint string) (*mcp.ClientSession, *exec.Cmd) {
	t.Helper()
	return g.stdioGatewayWith(t, endpoint, g.config)
}

// stdioGatewayWith is stdioGateway with the configuration file config.
func (g *gatewayEnv) stdioGatewayWith(t *testing.T, endpoint, config string) (*mcp.ClientSession, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(airlockBinary(t), "gateway", "--stdio", "--endpoint", endpoint, "--data", g.dev.DataDir, "--nats", g.dev.NATSURL)
	cmd.Env = append(os.Environ(), "AIRLOCK_CONFIG="+config) // no NATS credentials there: it uses dev's gateway user
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	c := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("start airlock gateway --stdio: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() {
		_ = cs.Close()
		if t.Failed() {
			testenv.LogTail(t, "airlock gateway --stdio stderr", stderr.String())
		}
	})
	return cs, cmd
}
