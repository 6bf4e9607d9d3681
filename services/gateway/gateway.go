// Package gateway is airlock's MCP gateway: an MCP server (streamable HTTP
// and stdio) in front of the tool registry's upstream servers, so that any
// MCP client is an airlock agent without code changes (SPEC §4, seed 001).
//
// Each endpoint (config gateway.endpoints) is bound by configuration to one
// agent id, one profile and the person its calls act for; nothing a client
// or a model sends changes them. The gateway is a front-end: it submits
// each tools/call for its endpoint's agent, sealed with the front-end key,
// so the policy service believes the person it acts for and the tool
// annotations it passes on (for upstreams the registry trusts). It shows
// the registry's tools as the executor describes them
// (airlock.api.executor.tools), minus those the endpoint's profile denies
// outright (asked of the policy service's dry run), and lists them again
// when an upstream or the policy changes.
//
// A call waits for its outcome: the upstream's result exactly as the
// executor ran it once, or an isError result saying why it did not run.
// Meanwhile the client hears progress (with its progress token) and a
// heartbeat; when the policy lets the endpoint's own person decide
// (approvers name "requester") and the client can ask them, an elicitation
// (a form, or a link to the call's console page) is answered as that
// person's decision. Elicitations and progress go only to the session that
// made the call. A call that waits for a person longer than the endpoint's
// answer_within is answered that it waits; the same call repeated in the
// same session rejoins it and returns its outcome once (rejoin.go).
package gateway

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/clientwait"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/executorapi"
	"github.com/airlock-gate/airlock/services/shared/policyapi"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// Frontend is the name the gateway seals its requests with; the policy
// records it as the request's sealed_by.
const Frontend = "gateway"

// Channel is the channel recorded with decisions a person makes through
// the gateway (an elicitation answer).
const Channel = "mcp"

// Gateway serves the configured endpoints. Build it with New, run its
// catalog with Run, and serve it over HTTP (Handler, Register) or stdio
// (ServeStdio).
type Gateway struct {
	deps      svc.Deps
	log       *slog.Logger
	frontend  seal.Key
	approvals *approvalapi.Client
	policy    *policyapi.Client
	catalog   *catalog
	// waits: calls a client was told to call again, and whether a client
	// waits for each (rejoin.go).
	waits *clientwait.Store
	// vacancies: leases on calls this gateway's requests ended (vacancy.go).
	vacancies *vacancies
	endpoints []*endpoint
	byName    map[string]*endpoint
	heartbeat time.Duration
	// exe is this program, which runs run_code scripts as its children
	// (its main calls codemode.MaybeChild).
	exe string
	// scripts are the places of run_code scripts over all endpoints
	// (gateway.run_code_max_running), shared fairly among agents.
	scripts *scriptSlots
	// listed is marked once the first catalog sync is done (or given up on).
	listed svc.Readiness
	// serving: Run follows the notices of tool and policy changes (the
	// service's readiness; its HTTP routes are mounted before Run).
	serving svc.Readiness

	// rejoins: this replica's view of the rejoin entries, which answers
	// for the sessions it started (sessionMark) without a round trip.
	rejoins *clientwait.Rejoins
	// sessionMark starts the id of every MCP session this replica starts
	// (a session is served only where it started).
	sessionMark string
}

// New builds the gateway from deps.Config.Gateway: every endpoint's MCP
// server, agent client and token. It refuses to start with a clear error
// when the front-end key is missing or an endpoint's token file cannot be
// read.
func New(deps svc.Deps) (*Gateway, error) {
	key, err := deps.FrontendKey()
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g := &Gateway{
		deps: deps, log: deps.Log.With("service", "gateway"), frontend: key,
		approvals: approvalapi.New(deps.NC, key, Frontend),
		policy:    policyapi.New(deps.NC, seal.Key{}, ""),
		byName:    map[string]*endpoint{},
		heartbeat: deps.Config.Gateway.Heartbeat,
		scripts:   newScriptSlots(deps.Config.Gateway.ScriptsAtOnce(), deps.Config.Gateway.RunCodeAgents()),
	}
	g.catalog = newCatalog(executorapi.New(deps.NC), g.log)
	octx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	g.waits, err = clientwait.Open(octx, deps.JS, deps.Config.Buckets.ClientWaits)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g.rejoins, g.sessionMark, g.vacancies = g.waits.Rejoins(), newNonce(), newVacancies()
	for _, cfg := range deps.Config.Gateway.Endpoints {
		if cfg.RunCode.Enabled && g.exe == "" {
			if g.exe, err = os.Executable(); err != nil {
				g.close()
				return nil, fmt.Errorf("gateway endpoint %s enables run_code, whose scripts run in a child process of this program, but its path is unknown: %w", cfg.Name, err)
			}
		}
		ep, err := g.newEndpoint(cfg)
		if err != nil {
			g.close()
			return nil, err
		}
		g.endpoints = append(g.endpoints, ep)
		g.byName[cfg.Name] = ep
	}
	return g, nil
}

// Name implements svc.Service.
func (g *Gateway) Name() string { return "gateway" }

// Ready implements svc.Service.
func (g *Gateway) Ready() <-chan struct{} { return g.serving.Ready() }

// Run implements svc.Service: it keeps every endpoint's tool list in step
// with the registry and the policy until ctx ends — listing the tools at
// start, again whenever the executor says an upstream's tools changed or
// the policy changed, and every refresh interval in case a notice was lost.
// It is ready once it follows those notices; a client's first tools/list
// still waits for the first listing (markReady).
func (g *Gateway) Run(ctx context.Context) error {
	defer g.close()
	go g.rejoins.Follow(ctx, g.log)
	for _, ep := range g.endpoints {
		go ep.abandonSweep(ctx)
		go ep.endedSweep(ctx)
	}
	if len(g.endpoints) == 0 {
		g.markReady()
		g.serving.Mark()
		<-ctx.Done()
		return nil
	}
	wake := make(chan struct{}, 1)
	poke := func(*nats.Msg) {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	tools, err := executorapi.OnChanged(g.deps.NC, func() { poke(nil) })
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	defer func() { _ = tools.Unsubscribe() }()
	policy, err := g.deps.NC.Subscribe(subject.Out(subject.PolicyChanges), poke)
	if err != nil {
		return fmt.Errorf("gateway: follow %s: %w", subject.Out(subject.PolicyChanges), err)
	}
	defer func() { _ = policy.Unsubscribe() }()
	g.serving.MarkServing(g.deps.NC, g.log)
	// Give up waiting for a first sync after a while: a client then sees
	// the tools that are known (maybe none) and a list_changed later.
	firstDeadline := time.AfterFunc(20*time.Second, g.markReady)
	defer firstDeadline.Stop()
	// The executor may start after the gateway (in one `airlock dev`, or
	// in a deployment): until the first listing, try again quickly and
	// quietly.
	starting := time.Now().Add(startupGrace)
	for {
		ok := g.sync(ctx, time.Now().Before(starting))
		if ok {
			g.markReady()
		}
		next := refreshEvery
		switch {
		case !ok && g.isReady():
			next = retryEvery
		case !ok:
			next = startupRetry
		}
		timer := time.NewTimer(next)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-wake:
			timer.Stop()
			// A burst of notices (a server restarting, several rules
			// changing) is listed once.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(debounce):
			}
			select {
			case <-wake:
			default:
			}
		case <-timer.C:
		}
	}
}

// How often the tools are listed again without a notice, and sooner after a
// listing that failed or left a server out.
const (
	refreshEvery = 30 * time.Second
	retryEvery   = 3 * time.Second
	debounce     = 150 * time.Millisecond
	// Before the first listing: how often to try, and for how long a
	// failure is expected (the executor still starting) and logged quietly.
	startupRetry = 250 * time.Millisecond
	startupGrace = 10 * time.Second
)

// sync lists the tools and updates every endpoint; ok is false when
// something must be tried again soon. While starting, a failure is logged
// only at debug level.
func (g *Gateway) sync(ctx context.Context, starting bool) bool {
	tools, complete, err := g.catalog.refresh(ctx)
	if err != nil {
		switch {
		case ctx.Err() != nil:
		case starting:
			g.log.Debug("the registry's tools are not listed yet (the executor may still be starting); retrying", "err", err)
		default:
			g.log.Warn("the registry's tools could not be listed; retrying", "err", err)
		}
		return false
	}
	ok := complete
	for _, ep := range g.endpoints {
		if !ep.sync(ctx, tools) {
			ok = false
		}
	}
	return ok
}

func (g *Gateway) markReady() { g.listed.Mark() }

// isReady reports whether the first listing is done (or given up on).
func (g *Gateway) isReady() bool {
	select {
	case <-g.listed.Ready():
		return true
	default:
		return false
	}
}

// awaitReady waits (at most a few seconds) for the first tool listing, so
// a client that connects as airlock starts does not see an empty list.
func (g *Gateway) awaitReady(ctx context.Context) {
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-g.listed.Ready():
	case <-ctx.Done():
	case <-t.C:
	}
}

func (g *Gateway) close() {
	for _, ep := range g.endpoints {
		ep.close()
	}
}

// Handler serves every endpoint that has a token at its HTTP path.
func (g *Gateway) Handler() http.Handler {
	mux := http.NewServeMux()
	for path, h := range g.Routes() {
		mux.Handle(path, h)
	}
	return mux
}

// Routes maps each HTTP path to its endpoint's handler; endpoints without a
// token are served over stdio only and have no route.
func (g *Gateway) Routes() map[string]http.Handler {
	out := map[string]http.Handler{}
	for _, ep := range g.endpoints {
		if ep.token != nil {
			out[ep.cfg.HTTPPath()] = ep
		}
	}
	return out
}

// ServeStdio serves endpoint name over t (nil: stdin and stdout, for a
// client that launched `airlock gateway --stdio`) until the client
// disconnects or ctx ends. Run must be running for the tool list to fill.
func (g *Gateway) ServeStdio(ctx context.Context, name string, t mcp.Transport) error {
	if t == nil {
		t = &mcp.StdioTransport{}
	}
	ep, ok := g.byName[name]
	if !ok {
		return fmt.Errorf("no gateway endpoint %q: configure it under gateway.endpoints (there are: %s)", name, strings.Join(g.deps.Config.Gateway.Names(), ", "))
	}
	ss, err := ep.server.Connect(ctx, t, nil)
	if err != nil {
		return fmt.Errorf("gateway endpoint %s over stdio: %w", name, err)
	}
	done := make(chan error, 1)
	go func() { done <- ss.Wait() }()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) && !isEOF(err) {
			return fmt.Errorf("gateway endpoint %s over stdio: %w", name, err)
		}
		return nil
	case <-ctx.Done():
		_ = ss.Close()
		<-done
		return nil
	}
}

func isEOF(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "closed"))
}

// loadToken reads an endpoint's bearer token; nil when it has none.
func loadToken(cfg config.GatewayEndpoint) ([]byte, error) {
	switch {
	case cfg.Token != "":
		return []byte(cfg.Token), nil
	case cfg.TokenFile != "":
		raw, err := os.ReadFile(cfg.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("gateway endpoint %s: read its token file: %w (write a random token there, e.g. `openssl rand -hex 24 > %s`)", cfg.Name, err, cfg.TokenFile)
		}
		tok := strings.TrimSpace(string(raw))
		if len(tok) < 16 {
			return nil, fmt.Errorf("gateway endpoint %s: the token in %s is shorter than 16 characters: write a random one (e.g. `openssl rand -hex 24`)", cfg.Name, cfg.TokenFile)
		}
		return []byte(tok), nil
	}
	return nil, nil
}

// tokenOK compares a presented bearer token in constant time.
func tokenOK(want []byte, header string) bool {
	got, ok := strings.CutPrefix(header, "Bearer ")
	if !ok || len(want) == 0 {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), want) == 1
}

// newClient is the agent client an endpoint submits with: the gateway's
// own connection, every request sealed as the gateway, the calls' stored
// events read with the gateway's own Direct Gets (its user may).
func (g *Gateway) newClient(agent string) (*airlock.Client, error) {
	cfg := g.deps.Config
	return airlock.New(g.deps.NC, agent, airlock.WithStream(cfg.Stream.Name), airlock.WithMaxRequestBytes(cfg.Limits.MaxRequestBytes), airlock.WithDirectReads(),
		airlock.WithRequestSeal(func(m *nats.Msg) { g.frontend.Request(m, Frontend, time.Now()) }))
}
