package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/ingress"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// endpoint is one configured MCP endpoint: its MCP server (one for every
// session of the endpoint; each session is its own *mcp.ServerSession, to
// which a call's progress and elicitations go), the agent it submits as,
// and the tools it shows.
type endpoint struct {
	g       *Gateway
	cfg     config.GatewayEndpoint
	log     *slog.Logger
	token   []byte // nil: stdio only
	server  *mcp.Server
	client  *airlock.Client
	watcher *airlock.Watcher
	// stateful serves the session-based protocol versions (2025-11-25 and
	// older), stateless the 2026-07-28 protocol, which has no sessions;
	// statelessJSON the same, answering with one JSON body instead of an
	// event stream (see ServeHTTP).
	stateful, stateless, statelessJSON http.Handler
	// nonce stands for the session of a connection without a session id
	// (stdio), so its threads are its own.
	nonce  string
	recent *recentCalls
	// sessions bounds the stateful handler's live sessions (sessions.go).
	sessions *sessionCap
	// requests holds a token per POST being served (gateway.max_requests),
	// taken before its body is read.
	requests chan struct{}
	// maxBody bounds a POST's body (ingress.MaxJSONBody of
	// limits.max_request_bytes): one tools/call and its envelope.
	maxBody int64
	// maxArgs is limits.max_request_bytes, which a call's arguments must
	// fit once encoded (ingress.ArgumentsFit).
	maxArgs int

	mu     sync.Mutex
	tools  map[string]*tool // as registered on server
	hidden map[string]bool  // the profile's verdict per tool, as last asked
	// codeTools: the tools run_code was last registered with (runcode.go).
	codeTools []string
	// codeRunning holds a token per script running (runcode.go).
	codeRunning chan struct{}
	// answering: the context of the HTTP request whose response is to
	// carry a session's tools/call answer, by session and request id
	// (streamKey), while that request lasts.
	answering sync.Map
}

func (g *Gateway) newEndpoint(cfg config.GatewayEndpoint) (*endpoint, error) {
	token, err := loadToken(cfg)
	if err != nil {
		return nil, err
	}
	client, err := g.newClient(cfg.Agent)
	if err != nil {
		return nil, fmt.Errorf("gateway endpoint %s: %w", cfg.Name, err)
	}
	w, err := client.Watch(airlock.WatchAlso(subject.ApprovalRequested))
	if err != nil {
		return nil, fmt.Errorf("gateway endpoint %s: %w", cfg.Name, err)
	}
	ep := &endpoint{
		g: g, cfg: cfg, log: g.log.With("endpoint", cfg.Name, "agent", cfg.Agent), token: token,
		client: client, watcher: w, nonce: newNonce(), recent: newRecentCalls(), tools: map[string]*tool{}, hidden: map[string]bool{},
		codeRunning: make(chan struct{}, cfg.RunCode.Running()),
		sessions:    newSessionCap(g.deps.Config.Gateway.MaxSessions),
		requests:    make(chan struct{}, g.deps.Config.Gateway.MaxRequests),
		maxBody:     ingress.MaxJSONBody(g.deps.Config.Limits.MaxRequestBytes),
		maxArgs:     g.deps.Config.Limits.MaxRequestBytes,
	}
	// The SDK logs every session's start and end at INFO, and a 2026-07-28
	// request is a session of its own: its warnings and errors are enough.
	sdkLog := slog.New(atLeast{ep.log.Handler(), slog.LevelWarn})
	ep.server = mcp.NewServer(&mcp.Implementation{Name: "airlock", Title: "airlock gateway (" + cfg.Name + ")", Version: "1"}, &mcp.ServerOptions{
		Instructions: fmt.Sprintf("These are the tools of airlock endpoint %s. airlock checks every call against policy: "+
			"some run at once, some are refused with the reason, some wait for a person's approval (this can take minutes). "+
			"A refused call returns isError with what to do; do not retry it unchanged.", cfg.Name),
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
		Logger:       sdkLog,
		GetSessionID: func() string {
			id := g.newSessionID()
			ep.sessions.named(id)
			return id
		},
	})
	ep.server.AddReceivingMiddleware(ep.waitForTools)
	timeout := g.deps.Config.Gateway.SessionTimeout
	get := func(*http.Request) *mcp.Server { return ep.server }
	ep.stateful = mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{SessionTimeout: timeout, Logger: sdkLog, MaxRequestBodyBytes: ep.maxBody})
	// A 2026-07-28 request is its whole exchange: a client that closes it
	// gave up (there is no notifications/cancelled to wait for), so its
	// handler ends, its call is withdrawn and its script's place freed.
	ep.stateless = mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true, Logger: sdkLog, MaxRequestBodyBytes: ep.maxBody})
	ep.statelessJSON = mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, PropagateRequestCancellation: true, Logger: sdkLog, MaxRequestBodyBytes: ep.maxBody})
	return ep, nil
}

func (ep *endpoint) close() {
	if ep.watcher != nil {
		_ = ep.watcher.Close()
	}
}

// waitForTools holds the first tools/list and tools/call of a gateway that
// just started until the tools are known.
func (ep *endpoint) waitForTools(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if (method == "tools/list" || method == "tools/call") && !ep.g.isReady() {
			ep.g.awaitReady(ctx)
		}
		return next(ctx, method, req)
	}
}

// sync shows exactly the tools of the registry that the endpoint's profile
// does not deny outright. ok is false when the policy could not be asked
// about some tool (it is shown meanwhile: the policy still decides every
// call).
func (ep *endpoint) sync(ctx context.Context, tools []*tool) bool {
	hidden, ok := ep.denied(ctx, tools)
	want := map[string]*tool{}
	for _, t := range tools {
		if !hidden[t.def.Name] {
			want[t.def.Name] = t
		}
	}
	ep.mu.Lock()
	defer ep.mu.Unlock()
	var gone []string
	for name := range ep.tools {
		if want[name] == nil {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		sort.Strings(gone)
		ep.server.RemoveTools(gone...)
		for _, n := range gone {
			delete(ep.tools, n)
		}
	}
	for name, t := range want {
		if t.same(ep.tools[name]) {
			continue
		}
		if err := ep.add(t); err != nil {
			ep.log.Warn("a tool is left out", "tool", name, "err", err)
			continue
		}
		ep.tools[name] = t
	}
	ep.syncRunCode()
	return ok
}

// add registers t; the SDK refuses (panics on) some schemas, which must
// leave out that one tool, not stop the gateway.
func (ep *endpoint) add(t *tool) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the MCP SDK refuses its definition: %v", r)
		}
	}()
	def := *t.def
	ep.server.AddTool(&def, ep.handler(t))
	return nil
}

// evalParallel bounds concurrent dry runs while filtering a tool list.
const evalParallel = 8

// denied asks the policy's dry run which tools the endpoint's profile
// denies outright. ok is false when some answer is missing.
func (ep *endpoint) denied(ctx context.Context, tools []*tool) (map[string]bool, bool) {
	out := map[string]bool{}
	var mu sync.Mutex
	ok := true
	sem := make(chan struct{}, evalParallel)
	var wg sync.WaitGroup
	for _, t := range tools {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			ectx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			d, err := ep.g.policy.Eval(ectx, ep.probe(t))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if ok && ctx.Err() == nil {
					ep.log.Warn("the policy could not say whether the profile denies a tool; it is shown until it can", "tool", t.def.Name, "err", err)
				}
				ok = false
				// Keep what was decided before (unknown: shown).
				ep.mu.Lock()
				out[t.def.Name] = ep.hidden[t.def.Name]
				ep.mu.Unlock()
				return
			}
			out[t.def.Name] = deniedOutright(d)
			ep.mu.Lock()
			ep.hidden[t.def.Name] = out[t.def.Name]
			ep.mu.Unlock()
		}()
	}
	wg.Wait()
	return out, ok
}

// probe is the call a tool is dry-run as: the endpoint's agent and person,
// no arguments.
func (ep *endpoint) probe(t *tool) *airlockv1.ToolCall {
	return &airlockv1.ToolCall{
		AgentId: ep.cfg.Agent, CallId: "gateway-tools-list", OnBehalfOf: ep.cfg.OnBehalfOf,
		Server: t.up.GetServer(), Tool: t.up.GetTool(),
	}
}

// requestHeader carries the JSON-RPC id of a tools/call from the HTTP
// layer to the tool handler (the SDK does not pass it on). Whatever a
// client sends under this name is removed first.
const requestHeader = "Airlock-Mcp-Request-Id"

// ServeHTTP authenticates the client with the endpoint's bearer token,
// notes a tools/call's request id, and hands the request to the handler of
// its protocol era.
func (ep *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !tokenOK(ep.token, r.Header.Get("Authorization")) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="airlock gateway"`)
		http.Error(w, fmt.Sprintf("airlock gateway endpoint %s needs its bearer token: send Authorization: Bearer <token> (airlock dev prints it; in production it is gateway.endpoints[].token_file)", ep.cfg.Name), http.StatusUnauthorized)
		return
	}
	r.Header.Del(requestHeader)
	var body []byte
	if r.Method == http.MethodPost && r.Body != nil {
		// The slot first: bodies being read are held to
		// gateway.max_requests of them too, not to the connections.
		select {
		case ep.requests <- struct{}{}:
			defer func() { <-ep.requests }()
		default:
			prefix, _ := io.ReadAll(io.LimitReader(r.Body, busyPrefix))
			ep.tooManyRequests(w, prefix)
			return
		}
		var err error
		if body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, ep.maxBody)); err != nil {
			http.Error(w, fmt.Sprintf("request body over %d bytes (twice limits.max_request_bytes and 64 KiB for the envelope): pass large inputs by reference (a path or URL) instead of inline", ep.maxBody), http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	callID, callTool, callArgs, isCall := toolsCall(body)
	if isCall {
		if err := argumentsFit(callArgs, ep.maxArgs); err != nil {
			refuseArguments(w, callID, err)
			return
		}
	}
	if r.Header.Get("Mcp-Protocol-Version") >= statelessVersion {
		// No session, so a call's id is random and its request id is not
		// needed. Without a progress token nothing reaches the client
		// before the answer (this protocol has no ping, and a confirmation
		// comes back in the result), so the answer is one JSON body, not an
		// event stream: cheaper at both ends. Any mention of a progress
		// token, even in the arguments, keeps the stream, and so does any
		// \u escape (which could spell the name).
		if r.Method == http.MethodPost && !bytes.Contains(body, []byte(`"progressToken"`)) && !bytes.Contains(body, []byte(`\u`)) {
			ep.statelessJSON.ServeHTTP(w, r)
			return
		}
		ep.stateless.ServeHTTP(w, r)
		return
	}
	if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
		defer ep.sessions.use(sid, r.Method == http.MethodPost)()
	} else if r.Method == http.MethodPost {
		release, ok := ep.sessions.admit(ep.liveSessions)
		if !ok {
			ep.tooManySessions(w, body)
			return
		}
		defer release()
	}
	if id, tool := callID, callTool; isCall {
		r.Header.Set(requestHeader, id)
		// Only a script reads the request that carries its answer
		// (untilAnswerUnread). MCP wants a request id unique in its
		// session: one still in flight is refused here, before the first
		// request's entry could be overwritten (the SDK refuses the same
		// for every other request). A request sent again after the first
		// ended is another request, and reaches the same call (callIDOf).
		if sid := r.Header.Get("Mcp-Session-Id"); sid != "" && tool == runCodeTool {
			key, ctx := streamKey(sid, id), r.Context()
			if _, inFlight := ep.answering.LoadOrStore(key, ctx); inFlight {
				duplicateID(w, id)
				return
			}
			defer ep.answering.CompareAndDelete(key, ctx)
		}
	}
	ep.stateful.ServeHTTP(w, r)
}

// duplicateID answers a request whose id (JSON text) a request still in
// flight in the same session has, with a JSON-RPC invalid-request error.
func duplicateID(w http.ResponseWriter, id string) {
	msg := fmt.Sprintf("request id %s is already used by a tools/call still in flight in this session: MCP request ids must be unique within a session, so send this request with a new id", id)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id),
		"error": map[string]any{"code": jsonrpc.CodeInvalidRequest, "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(body)
}

func streamKey(session, requestID string) string { return session + "\x00" + requestID }

// untilAnswerUnread is ctx, ended as well when the client closes the HTTP
// request that was to carry the answer: the gateway's sessions keep no
// event store, so nothing can resume that response and nobody would read
// the answer. stop releases it.
func (ep *endpoint) untilAnswerUnread(ctx context.Context, req *mcp.CallToolRequest) (_ context.Context, stop func()) {
	sid, _ := sessionOf(req)
	h := headerOf(req)
	if sid == "" || h == nil {
		return ctx, func() {}
	}
	v, ok := ep.answering.Load(streamKey(sid, h.Get(requestHeader)))
	if !ok {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	unhook := context.AfterFunc(v.(context.Context), cancel)
	return ctx, func() { unhook(); cancel() }
}

// statelessVersion is the first protocol version without sessions.
const statelessVersion = "2026-07-28"

// toolsCall returns the JSON-RPC id (as its JSON text), the tool name and
// the arguments (JSON, not decoded) of a body that is one tools/call
// request.
func toolsCall(body []byte) (id, tool string, args json.RawMessage, ok bool) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if len(body) == 0 || body[0] != '{' || json.Unmarshal(body, &m) != nil {
		return "", "", nil, false
	}
	if m.Method != "tools/call" || len(m.ID) == 0 || string(m.ID) == "null" {
		return "", "", nil, false
	}
	var params struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	_ = json.Unmarshal(m.Params, &params) // params the SDK refuses name no tool
	return string(m.ID), params.Name, params.Arguments, true
}

// refuseArguments answers the tools/call with JSON-RPC id id, whose
// arguments cannot fit limits.max_request_bytes, as callTool would (an
// error result saying why), before the MCP SDK decodes them: it reads a
// tools/call's arguments whole, into maps, to check its headers.
func refuseArguments(w http.ResponseWriter, id string, why error) {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "result": errorResult("invalid", "", why.Error())})
	if err != nil {
		http.Error(w, why.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// atLeast passes on only the records of level or above.
type atLeast struct {
	slog.Handler
	level slog.Level
}

func (h atLeast) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.level && h.Handler.Enabled(ctx, l)
}

func (h atLeast) WithAttrs(as []slog.Attr) slog.Handler {
	return atLeast{h.Handler.WithAttrs(as), h.level}
}

func (h atLeast) WithGroup(name string) slog.Handler {
	return atLeast{h.Handler.WithGroup(name), h.level}
}
