package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/airlock/internal/mcpclient"
	"github.com/airlock-gate/airlock/services/executor"
	"github.com/airlock-gate/airlock/services/gateway"
	"github.com/airlock-gate/airlock/services/policy"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// gatewayBenchOptions tune `airlock bench gateway`.
type gatewayBenchOptions struct {
	JSON       bool
	Samples    int
	Version    string
	CPUProfile string
	MemProfile string
}

// gatewayReport holds the figures of one run.
type gatewayReport struct {
	Setup    string  `json:"setup"`
	Protocol string  `json:"protocol"`
	Direct   latency `json:"direct_call"`
	Gateway  latency `json:"gateway_call"`
	// OverheadP50us is the gateway's p50 minus the direct call's p50.
	OverheadP50us float64 `json:"overhead_p50_us"`
	RoundTrip     latency `json:"round_trip"`
	// Ratio is OverheadP50us / RoundTrip.P50us; the goal is ≤ GoalMax.
	Ratio   float64 `json:"overhead_per_round_trip_p50"`
	GoalMax float64 `json:"goal_max"`
	GoalMet bool    `json:"goal_met"`
	// The floors of the hop the gateway adds (not goals): the gateway's
	// tools/call request and response through net/http alone, and the same
	// tools/call to a go-sdk server served as the gateway serves it, whose
	// tool answers at once.
	HTTPHop latency `json:"http_hop_floor"`
	MCPHop  latency `json:"mcp_hop_floor"`
	// OwnP50us is (b) − (a) − the round trip − the MCP hop floor, p50: what
	// the gateway adds beyond one MCP hop and the round trip; OwnRatio the
	// same over the round trip p50.
	OwnP50us float64 `json:"gateway_own_p50_us"`
	OwnRatio float64 `json:"gateway_own_per_round_trip_p50"`
	// SDKCall is (f), the call of (b) made by an SDK agent, no gateway;
	// ClientHop is (g), the client of (b) and a server that answers the
	// gateway's result at once. Neither is a goal: together they bound
	// what any gateway can measure.
	SDKCall   latency `json:"sdk_call"`
	ClientHop latency `json:"client_hop_floor"`
	// ReachP50us is (g) + (f) − (a), p50: (b) − (a) for a gateway that
	// cost nothing; Reach the same over the round trip p50. The goal is out
	// of reach in a run whose Reach is over GoalMax.
	ReachP50us float64 `json:"reach_p50_us"`
	Reach      float64 `json:"reach_per_round_trip_p50"`
	// ServerP50us is (b) − (f) − (g), p50: what the gateway's server (the
	// MCP SDK's handler and the gateway's own code) adds to the call.
	ServerP50us float64 `json:"gateway_server_p50_us"`
}

func newGatewayCmd(env Env) *cobra.Command {
	o := gatewayBenchOptions{}
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "MCP gateway overhead: an auto-allowed tools/call direct vs through the gateway, against the round trip (goal ≤ 1.3×)",
		Long: `Starts an embedded NATS server, an MCP server (streamable HTTP, one echo tool)
as the upstream, and in this one process measures, in one run:
  (a) tools/call of the upstream's echo tool by a go-sdk client, directly;
  (b) the same tools/call through the gateway (policy allows it, the executor
      runs it on the upstream, the gateway answers with its result);
  (c) the auto-allowed round trip of ` + "`bench roundtrip`" + ` (the SDK submits
      demo__echo) on the same services;
and floors (not goals):
  (d) the gateway's tools/call request and its response, replayed through
      net/http on loopback to a handler that answers the same bytes;
  (e) the same tools/call to a go-sdk MCP server served as the gateway
      serves that protocol, whose tool answers at once;
  (f) the call of (b) made by an SDK agent instead (no gateway);
  (g) the tools/call of (b) from the same go-sdk client to a server that
      answers the gateway's result at once.
They alternate, sample by sample. The goal: (b) − (a) ≤ 1.3 × (c), p50.
(g) + (f) − (a) is what (b) − (a) would be with a gateway that cost
nothing: where it is over 1.3 × (c), the goal is out of reach.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return benchRun(cmd, env, o.CPUProfile, o.JSON, func(ctx context.Context, cfg config.Config) (*gatewayReport, error) {
				rep, err := runGatewayBench(ctx, cfg, o)
				if err == nil && o.MemProfile != "" {
					err = writeProfile(o.MemProfile, "allocs") // every allocation since the start
				}
				return rep, err
			}, printGatewayBench)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.JSON, "json", false, "print one JSON object with every figure")
	f.IntVar(&o.Samples, "samples", 1000, "calls timed for each figure")
	f.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	f.StringVar(&o.MemProfile, "memprofile", "", "write an allocation profile of the whole run to this file (go tool pprof -sample_index=alloc_space)")
	f.StringVar(&o.Version, "protocol", "", "MCP protocol version the clients ask for (default the newest, 2026-07-28; e.g. 2025-11-25)")
	return cmd
}

// Missed names the goal when the run missed it.
func (r *gatewayReport) Missed() []string {
	if r.GoalMet {
		return nil
	}
	msg := fmt.Sprintf("gateway overhead %.2f× the round trip p50, goal ≤ %.1f×", r.Ratio, r.GoalMax)
	if r.Reach > r.GoalMax {
		msg += fmt.Sprintf(" (out of reach in this run: with a gateway that cost nothing it would be %.2f×, (g) + (f) − (a))", r.Reach)
	}
	return []string{msg}
}

func runGatewayBench(ctx context.Context, cfg config.Config, o gatewayBenchOptions) (*gatewayReport, error) {
	if o.Samples < 10 {
		return nil, errors.New("--samples must be at least 10")
	}
	dir, url, stop, err := startBenchServer(cfg)
	if err != nil {
		return nil, err
	}
	defer stop()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	upURL, stopUp, err := startBenchUpstream()
	if err != nil {
		return nil, err
	}
	defer stopUp()
	tools := filepath.Join(dir, "tools.yaml")
	if err := os.WriteFile(tools, fmt.Appendf(nil, "servers:\n  up:\n    mcp: {url: %q}\n", upURL), 0o600); err != nil {
		return nil, err
	}
	token := seal.NewKey().Hex()
	cfg.NATS.URL = url
	cfg.Dev.DataDir = dir
	cfg.Executor.ToolsFile, cfg.Executor.Sandbox = tools, ""
	cfg.Security.DecisionKey, cfg.Security.FrontendKey = seal.NewKey().Hex(), seal.NewKey().Hex()
	cfg.Gateway.Endpoints = []config.GatewayEndpoint{{Name: "bench", Agent: "bench", Token: token}}

	rep := &gatewayReport{
		Setup:   fmt.Sprintf("embedded NATS, file store, fsync %s; policy, executor and gateway in-process; upstream: an in-process MCP server over streamable HTTP", config.SyncText(cfg.Dev.Sync)),
		GoalMax: 1.3,
	}
	services := newBenchServices(ctx, cfg, log)
	defer services.stop()
	var gw *gateway.Gateway
	for name, mk := range map[string]func(svc.Deps) (svc.Service, error){
		"policy":   func(d svc.Deps) (svc.Service, error) { return policy.NewFromConfig(ctx, d) },
		"executor": func(d svc.Deps) (svc.Service, error) { return executor.NewFromConfig(ctx, d) },
		"gateway": func(d svc.Deps) (svc.Service, error) {
			var err error
			gw, err = gateway.New(d)
			return gw, err
		},
	} {
		if _, err := services.start(name, mk); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	// The last tools/call request and response the gateway served: the
	// bytes the net/http floor replays.
	rec := &exchangeRecorder{next: gw.Handler(), recorded: make(chan struct{})}
	srv := &http.Server{Handler: rec, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	direct, err := benchClient(ctx, upURL, "", o.Version)
	if err != nil {
		return nil, fmt.Errorf("connect to the upstream: %w", err)
	}
	defer direct.Close()
	through, err := benchClient(ctx, "http://"+ln.Addr().String()+"/mcp/bench", token, o.Version)
	if err != nil {
		return nil, fmt.Errorf("connect to the gateway: %w", err)
	}
	defer through.Close()
	rep.Protocol = through.InitializeResult().ProtocolVersion
	mcpFloor, stopMCP, err := floorClient(ctx, benchMCPFloor("echo"), o.Version, "the MCP floor")
	if err != nil {
		return nil, err
	}
	defer stopMCP()
	// The round trip runs on the same services, as another agent.
	nc, err := nats.Connect(cfg.NATS.URL)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	_, roundTrip, closeRT, err := roundTripOp(nc, cfg, "bench-rt")
	if err != nil {
		return nil, err
	}
	defer closeRT()
	sdkCall, closeSDK, err := sdkCallOp(nc, cfg, "bench-sdk", echoArgs())
	if err != nil {
		return nil, err
	}
	defer closeSDK()

	callResult := func(cs *mcp.ClientSession, name string) (*mcp.CallToolResult, error) {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: name, Arguments: echoArgs()})
		if err != nil {
			return nil, err
		}
		if res.IsError {
			return nil, fmt.Errorf("%s answered an error: %v", name, res.Content)
		}
		return res, nil
	}
	call := func(cs *mcp.ClientSession, name string) error {
		_, err := callResult(cs, name)
		return err
	}
	// The gateway lists the upstream's tools once the executor has started
	// it; then warm both paths up.
	deadline := time.Now().Add(30 * time.Second)
	for err := call(through, "up__echo"); err != nil; err = call(through, "up__echo") {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the gateway did not serve up__echo within 30s: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	httpHop, stopHTTP, err := rec.replayer(ctx)
	if err != nil {
		return nil, err
	}
	defer stopHTTP()
	// The client floor answers what the gateway answers.
	res, err := callResult(through, "up__echo")
	if err != nil {
		return nil, err
	}
	result, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	clientFloor, stopHop, err := floorClient(ctx, benchClientFloor("up__echo", result), o.Version, "the client floor")
	if err != nil {
		return nil, err
	}
	defer stopHop()
	// They alternate, sample by sample, so a change in the machine's load
	// affects each alike.
	figures := []struct {
		what string
		run  func() error
		into *latency
	}{
		{"the direct call", func() error { return call(direct, "echo") }, &rep.Direct},
		{"the call through the gateway", func() error { return call(through, "up__echo") }, &rep.Gateway},
		{"round trip", func() error { return roundTrip(ctx) }, &rep.RoundTrip},
		{"net/http floor", func() error { return httpHop(ctx) }, &rep.HTTPHop},
		{"MCP floor", func() error { return call(mcpFloor, "echo") }, &rep.MCPHop},
		{"the call by an SDK agent", func() error { return sdkCall(ctx) }, &rep.SDKCall},
		{"client floor", func() error { return call(clientFloor, "up__echo") }, &rep.ClientHop},
	}
	samples := make([][]time.Duration, len(figures))
	for i := range o.Samples/10 + 20 + o.Samples {
		for k, f := range figures {
			t := time.Now()
			if err := f.run(); err != nil {
				return nil, fmt.Errorf("%s: %w", f.what, err)
			}
			if i >= o.Samples/10+20 { // after the warm-up
				samples[k] = append(samples[k], time.Since(t))
			}
		}
	}
	for k, f := range figures {
		*f.into = summarize(samples[k])
	}
	rep.OverheadP50us = rep.Gateway.P50us - rep.Direct.P50us
	rep.Ratio = rep.OverheadP50us / rep.RoundTrip.P50us
	rep.GoalMet = rep.Ratio <= rep.GoalMax
	rep.OwnP50us = rep.OverheadP50us - rep.RoundTrip.P50us - rep.MCPHop.P50us
	rep.OwnRatio = rep.OwnP50us / rep.RoundTrip.P50us
	rep.ReachP50us = rep.ClientHop.P50us + rep.SDKCall.P50us - rep.Direct.P50us
	rep.Reach = rep.ReachP50us / rep.RoundTrip.P50us
	rep.ServerP50us = rep.Gateway.P50us - rep.SDKCall.P50us - rep.ClientHop.P50us
	return rep, nil
}

// exchangeRecorder serves next and keeps the last tools/call request it
// passed on (headers as the client sent them, body) and the response.
type exchangeRecorder struct {
	next http.Handler
	// recorded is closed once an exchange is kept: the client may read
	// the answer before ServeHTTP has returned and kept it.
	recorded chan struct{}
	once     sync.Once
	// replaying is set once replayer has taken the exchange: from then on
	// requests go straight to next, so the samples of (b) do not pay for
	// reading, copying and keeping every exchange.
	replaying atomic.Bool

	mu               sync.Mutex
	header, respHead http.Header
	body, resp       []byte
}

func (x *exchangeRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if x.replaying.Load() {
		x.next.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if !bytes.Contains(body, []byte(`"tools/call"`)) {
		x.next.ServeHTTP(w, r)
		return
	}
	header := r.Header.Clone()
	cw := &capture{ResponseWriter: w}
	x.next.ServeHTTP(cw, r)
	x.mu.Lock()
	x.header, x.body, x.respHead, x.resp = header, body, w.Header().Clone(), cw.buf.Bytes()
	x.mu.Unlock()
	x.once.Do(func() { close(x.recorded) })
}

// capture keeps a copy of what is written through it.
type capture struct {
	http.ResponseWriter
	buf bytes.Buffer
}

func (c *capture) Write(b []byte) (int, error) {
	c.buf.Write(b)
	return c.ResponseWriter.Write(b)
}

func (c *capture) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// replayer starts a net/http server on loopback that answers the recorded
// response, and returns one request of the recorded body to it, its answer
// read whole: an HTTP exchange of the gateway's bytes with no MCP in it.
func (x *exchangeRecorder) replayer(ctx context.Context) (func(context.Context) error, func(), error) {
	select {
	case <-x.recorded:
	case <-time.After(10 * time.Second):
	case <-ctx.Done():
	}
	x.mu.Lock()
	header, body, respHead, resp := x.header, x.body, x.respHead, x.resp
	x.mu.Unlock()
	x.replaying.Store(true)
	if body == nil {
		return nil, nil, errors.New("no tools/call went through the gateway to replay")
	}
	url, stop, err := serveLoopback(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for k, v := range respHead {
			w.Header()[k] = v
		}
		_, _ = w.Write(resp)
	}))
	if err != nil {
		return nil, nil, err
	}
	hc := &http.Client{}
	op := func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header = header.Clone()
		res, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		got, err := io.ReadAll(res.Body)
		if err != nil {
			return err
		}
		if len(got) != len(resp) {
			return fmt.Errorf("answered %d bytes, want %d", len(got), len(resp))
		}
		return nil
	}
	return op, func() { stop(); hc.CloseIdleConnections() }, nil
}

// floorClient serves h on a loopback port and connects a go-sdk client to
// it (what names the floor in an error); stop closes both.
func floorClient(ctx context.Context, h http.Handler, version, what string) (*mcp.ClientSession, func(), error) {
	url, stopServer, err := serveLoopback(h)
	if err != nil {
		return nil, nil, err
	}
	cs, err := benchClient(ctx, url, "", version)
	if err != nil {
		stopServer()
		return nil, nil, fmt.Errorf("connect to %s: %w", what, err)
	}
	return cs, func() { _ = cs.Close(); stopServer() }, nil
}

// benchMCPFloor is an MCP server with one tool, which returns its text,
// over streamable HTTP as the gateway serves it: for 2026-07-28 requests
// the stateless handler, answering in one JSON body a request that names no
// progress token; the session handler before.
func benchMCPFloor(tool string) http.Handler {
	s := mcp.NewServer(&mcp.Implementation{Name: "bench-floor", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: tool, Description: "Returns its text.", InputSchema: map[string]any{"type": "object"}}, echoTool)
	get := func(*http.Request) *mcp.Server { return s }
	stateful := mcp.NewStreamableHTTPHandler(get, nil)
	stateless := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Protocol-Version") >= "2026-07-28" {
			stateless.ServeHTTP(w, r) // the bench's calls name no progress token
			return
		}
		stateful.ServeHTTP(w, r)
	})
}

// benchClientFloor serves what a gateway that cost nothing would: a
// tools/call is answered at once with result (the gateway's, as JSON) under
// the request's id, after reading no more of the request than that id;
// everything else (initialize, discovery) goes to benchMCPFloor(tool).
func benchClientFloor(tool string, result json.RawMessage) http.Handler {
	mcpFloor := benchMCPFloor(tool)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if r.Method == http.MethodPost && json.Unmarshal(body, &m) == nil && m.Method == "tools/call" && len(m.ID) > 0 {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(slices.Concat([]byte(`{"jsonrpc":"2.0","id":`), m.ID, []byte(`,"result":`), result, []byte(`}`)))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		mcpFloor.ServeHTTP(w, r)
	})
}

// echoArgs are the arguments of every echo call the gateway bench makes.
func echoArgs() map[string]any { return map[string]any{"text": "hello from the bench"} }

// serveLoopback serves h on a loopback port until the returned stop.
func serveLoopback(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String() + "/mcp", func() { _ = srv.Close() }, nil
}

// echoTool answers the text it is given.
func echoTool(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(req.Params.Arguments, &args)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: args.Text}}}, nil
}

// sdkCallOp is the gateway bench's call made by an SDK agent instead of an
// MCP client: the SDK's fast path submits up__echo with args and waits for
// its result.
func sdkCallOp(nc *nats.Conn, cfg config.Config, agent string, args map[string]any) (func(context.Context) error, func(), error) {
	client, err := airlock.New(nc, agent, airlock.WithStream(cfg.Stream.Name))
	if err != nil {
		return nil, nil, err
	}
	w, err := client.Watch()
	if err != nil {
		return nil, nil, err
	}
	op := func(ctx context.Context) error {
		out, err := w.DoFast(ctx, airlock.Call{Server: "up", Tool: "echo", Args: args})
		if err != nil {
			return err
		}
		if !out.Completed() {
			return fmt.Errorf("call %s ended %s: %s", out.CallID, out.Status, out.Reason)
		}
		return nil
	}
	return op, func() { _ = w.Close() }, nil
}

// startBenchUpstream serves an MCP server with one tool, echo, over
// streamable HTTP on a loopback port.
func startBenchUpstream() (string, func(), error) {
	s := mcp.NewServer(&mcp.Implementation{Name: "bench-upstream", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "echo", Description: "Returns its text.", InputSchema: map[string]any{"type": "object"}}, echoTool)
	return serveLoopback(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
}

// benchClient connects a go-sdk client, with a bearer token when given.
func benchClient(ctx context.Context, url, token, version string) (*mcp.ClientSession, error) {
	return mcpclient.Connect(ctx, url, mcpclient.Options{Name: "airlock-bench", Token: token, Protocol: version, Within: 30 * time.Second})
}

func printGatewayBench(w io.Writer, r *gatewayReport) {
	fmt.Fprintf(w, "airlock bench gateway — %s\nprotocol %s\n\n", r.Setup, r.Protocol)
	fmt.Fprintf(w, "%-40s %10s %10s\n", "", "p50", "p99")
	fmt.Fprintf(w, "%-40s %8.0fµs %8.0fµs\n", "(a) tools/call directly to the upstream", r.Direct.P50us, r.Direct.P99us)
	fmt.Fprintf(w, "%-40s %8.0fµs %8.0fµs\n", "(b) the same call through the gateway", r.Gateway.P50us, r.Gateway.P99us)
	fmt.Fprintf(w, "%-40s %8.0fµs %8.0fµs\n", "(c) auto-allowed round trip", r.RoundTrip.P50us, r.RoundTrip.P99us)
	fmt.Fprintf(w, "%-40s %8.0fµs %8.0fµs\n", "(d) floor: the same bytes, net/http only", r.HTTPHop.P50us, r.HTTPHop.P99us)
	fmt.Fprintf(w, "%-40s %8.0fµs %8.0fµs\n", "(e) floor: one go-sdk MCP hop, no work", r.MCPHop.P50us, r.MCPHop.P99us)
	fmt.Fprintf(w, "%-40s %8.0fµs %8.0fµs\n", "(f) the call of (b) by an SDK agent", r.SDKCall.P50us, r.SDKCall.P99us)
	fmt.Fprintf(w, "%-40s %8.0fµs %8.0fµs\n", "(g) floor: the client, a free server", r.ClientHop.P50us, r.ClientHop.P99us)
	fmt.Fprintf(w, "\n(b) − (a) = %.0fµs = %.2f× the round trip p50 (goal ≤ %.1f×): %s\n", r.OverheadP50us, r.Ratio, r.GoalMax, mark(r.GoalMet))
	reach := "within the goal"
	if r.Reach > r.GoalMax {
		reach = "the goal is out of reach in this run"
	}
	fmt.Fprintf(w, "reach: (g) + (f) − (a) = %.0fµs = %.2f× the round trip p50, (b) − (a) with a gateway that cost nothing: %s\n", r.ReachP50us, r.Reach, reach)
	chain := r.SDKCall.P50us - r.Direct.P50us - r.RoundTrip.P50us
	fmt.Fprintf(w, "the gateway's server, (b) − (f) − (g) = %.0fµs = %.2f× the round trip p50; what the MCP tool adds to the chain beyond (a), (f) − (a) − (c) = %.0fµs = %.2f×\n",
		r.ServerP50us, r.ServerP50us/r.RoundTrip.P50us, chain, chain/r.RoundTrip.P50us)
	fmt.Fprintf(w, "the hop alone, (e) = %.2f× the round trip p50; (b) − (a) − (c) − (e) = %.0fµs = %.2f×: the gateway's own work and what its call adds to the round trip\n",
		r.MCPHop.P50us/r.RoundTrip.P50us, r.OwnP50us, r.OwnRatio)
}
