// Package console is airlock's web console and REST API, served by echo.
//
// People sign in (local users with bcrypt hashes, sessions in the console KV
// bucket so that every replica shares them and a restart keeps them) and see
// pending calls live: the console follows the events stream and pushes
// server-sent events to open inboxes. Every decision goes to the approval
// service with the signed-in principal as actor; the console authorizes only
// what a role may reach, the approval service decides whether that person
// may decide that call.
//
// Agents that do not speak NATS use the REST API (POST /api/v1/calls,
// GET /api/v1/calls/{id}?wait=30s) with agent tokens; reviewers and scripts
// (the `airlock approvals` CLI) use personal tokens.
package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/clientwait"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/executorapi"
	"github.com/airlock-gate/airlock/services/shared/ingress"
	"github.com/airlock-gate/airlock/services/shared/onetap"
	"github.com/airlock-gate/airlock/services/shared/policyapi"
	"github.com/airlock-gate/airlock/services/shared/quota"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

//go:embed web/templates/*.html web/static/*
var webFS embed.FS

// Options adjust a Console; the zero value is fine.
type Options struct {
	// Now is the clock (tests move it); default time.Now.
	Now func() time.Time
	// HealthWait bounds how long the health page collects micro stats replies.
	HealthWait time.Duration
	// SweepEvery is how often expired sessions are deleted (default 10m).
	SweepEvery time.Duration
	// Audit reads the audit trail for the audit and analytics pages; nil
	// leaves them out.
	Audit Audit
	// Suggest computes the Suggestions page; nil leaves it out.
	Suggest Suggester
	// ShadowRows bounds the audit rows one shadow divergences summary
	// reads (default 20,000); each agent's rows count up to a tenth of it.
	ShadowRows int
}

// Console is the web console, the REST API and the live feed behind the inbox.
// It implements svc.Service: Run follows the events stream for the feed.
type Console struct {
	cfg config.Config
	log *slog.Logger
	nc  *nats.Conn
	js  jetstream.JetStream
	// ready: the feed follows the events stream.
	ready svc.Readiness
	// use are the reviewers' use cases, shared by the pages and the REST API.
	use *useCases
	// frontend seals what the console does for a person or an agent it
	// authenticated (decisions, rule changes, REST submissions).
	frontend seal.Key
	policy   *policyapi.Client
	store    *store
	logins   *loginLimiter
	proxies  []*net.IPNet
	// dir answers who may decide a call, as the approval service asks it.
	dir   calls.Directory
	pages map[string]*template.Template
	feed  *feed
	opts  Options
	sso   *sso           // single sign-on, nil when console.oidc is not configured (sso.go)
	pub   *bus.Publisher // sign-ins, tokens, refused requests (audit_events.go)
	// agents are the agents' use cases of the REST API (agentcalls.go).
	agents *agentCalls
	app    *webApp // manifest, service worker, icons, devices (devices.go)
	// clients says whether an MCP gateway client still waits for a call.
	clients *clientwait.Store
	// tools warns of pending calls of a tool the registry lacks (registry.go).
	tools *registry
	// oneTap verifies the one-tap links of approval mails (onetap.go); nil
	// when email.one_tap is off.
	oneTap *onetap.Key
}

// New builds the console from deps. The console bucket must exist
// (bus.Provision creates it); users in the configuration are checked here so
// a bad hash is refused at start, not at the first sign-in.
func New(ctx context.Context, deps svc.Deps, opts Options) (*Console, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.SweepEvery == 0 {
		opts.SweepEvery = 10 * time.Minute
	}
	if opts.HealthWait == 0 {
		opts.HealthWait = 300 * time.Millisecond
	}
	if opts.ShadowRows <= 0 {
		opts.ShadowRows = shadowMaxRows
	}
	st, err := openStore(ctx, deps, opts.Now)
	if err != nil {
		return nil, err
	}
	kv := st.kv
	clients, err := clientwait.Open(ctx, deps.JS, deps.Config.Buckets.ClientWaits)
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	fk, err := deps.FrontendKey()
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	proxies, err := parseProxies(deps.Config.Console.TrustedProxies)
	if err != nil {
		return nil, err
	}
	tools := &registry{list: executorapi.New(deps.NC).List, now: opts.Now, log: deps.Log}
	c := &Console{
		cfg: deps.Config, log: deps.Log, nc: deps.NC, js: deps.JS, frontend: fk,
		use:    &useCases{approvals: approvalapi.New(deps.NC, fk, Frontend), store: st, cfg: deps.Config, now: opts.Now},
		policy: policyapi.New(deps.NC, fk, Frontend), store: st, dir: calls.DirectoryOf(deps.Config), pages: pages, opts: opts, proxies: proxies,
		logins: newLoginLimiter(st, deps.Config.Console.SignIn, opts.Now),
		pub:    deps.Publisher("console"),
		agents: &agentCalls{nc: deps.NC, js: deps.JS, cfg: deps.Config, frontend: fk, approvals: approvalapi.New(deps.NC, fk, Frontend),
			now: opts.Now, waits: quota.New(maxWaitsPerAgent), bodies: quota.New(maxBodiesPerAgent), tools: tools, overBudget: airlock.NewOverBudgetNotices(opts.Now), follows: airlock.NewFollows(deps.NC)},
		clients: clients, tools: tools,
	}
	if deps.Config.Email.OneTap.Enabled {
		k, err := onetap.LoadKey(deps.Config)
		if err != nil {
			return nil, fmt.Errorf("console: %w", err)
		}
		c.oneTap = &k
	}
	c.sso = newSSO(deps.Config, kv, st, opts.Now)
	c.use.recordToken = c.recordToken
	c.feed = newFeed(c)
	if c.app, err = newWebApp(c); err != nil {
		return nil, err
	}
	if len(deps.Config.Console.Users) == 0 && c.sso == nil {
		if n, err := st.runtimeUsers(ctx); err == nil && n == 0 {
			deps.Log.Warn("console: nobody can sign in yet: add console.users to the configuration (hash passwords with `airlock users hash-password`) or start `airlock dev` once to create the first admin")
		}
	}
	return c, nil
}

// Frontend is the name the console seals its requests with.
const Frontend = approvalapi.ConsoleFrontend

// Name implements svc.Service.
func (con *Console) Name() string { return "console" }

// Ready implements svc.Service: closed once the feed follows the events
// stream (the pages and the REST API are mounted before Run).
func (con *Console) Ready() <-chan struct{} { return con.ready.Ready() }

// Run follows the events stream and fans pending and decided calls out to
// every open inbox until ctx ends. Each replica follows the stream on its
// own (an ordered consumer from "now"), because each serves its own browsers.
func (con *Console) Run(ctx context.Context) error {
	// Followed before the console is ready (the feed marks it), so a
	// change announced once it is cannot be missed.
	tools, err := executorapi.OnChanged(con.nc, func() { con.tools.changed(ctx) })
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	defer func() { _ = tools.Unsubscribe() }()
	// The policy's over-budget notices, for agents on the REST API.
	overBudget, err := con.nc.Subscribe(subject.OverBudgetNotice("*", "*"), con.agents.overBudget.Hear)
	if err != nil {
		return fmt.Errorf("console: follow the policy's over-budget notices: %w", err)
	}
	defer func() { _ = overBudget.Unsubscribe() }()
	go con.sweep(ctx)
	return con.feed.run(ctx)
}

// sweep removes expired sessions every SweepEvery until ctx ends.
func (con *Console) sweep(ctx context.Context) {
	t := time.NewTicker(con.opts.SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n, err := con.store.sweepSessions(ctx); err != nil {
				con.log.Warn("sweep expired sessions", "err", err)
			} else if n > 0 {
				con.log.Info("swept expired sessions", "count", n)
			}
			if err := con.logins.sweep(ctx); err != nil {
				con.log.Warn("sweep old sign-in failures", "err", err)
			}
			if err := con.store.sweepOneTap(ctx); err != nil {
				con.log.Warn("sweep the uses of expired one-tap links", "err", err)
			}
			if con.sso != nil {
				if err := con.sso.sweepPending(ctx); err != nil {
					con.log.Warn("sweep unfinished single sign-ons", "err", err)
				}
			}
		}
	}
}

// Register mounts the console pages, the REST API and the static assets on e,
// and makes the console's error handler e's: errors become JSON
// {"code","message"} under /api/ and an error page elsewhere, with the HTTP
// status from apierr.HTTPStatus.
func (con *Console) Register(e *echo.Echo) {
	e.HTTPErrorHandler = con.handleError
	static, _ := fs.Sub(webFS, "web/static")
	e.GET("/static/*", echo.WrapHandler(http.StripPrefix("/static/", http.FileServer(http.FS(static)))), securityHeaders, cacheStatic)

	r := func(method, path string, h echo.HandlerFunc, a access) {
		e.Add(method, path, h, securityHeaders, con.authenticate(a))
	}
	// the installable app: public, none of it holds anyone's data
	e.GET("/manifest.webmanifest", con.manifest, securityHeaders)
	e.GET("/sw.js", con.serviceWorker, securityHeaders)
	e.GET("/icons/:file", con.icon, securityHeaders)

	// pages
	r(http.MethodGet, "/login", con.loginPage, public)
	r(http.MethodPost, "/login", con.login, public)
	r(http.MethodGet, ssoStart, con.ssoStartPage, public)
	r(http.MethodGet, ssoCallback, con.ssoCallbackPage, public)
	r(http.MethodPost, "/logout", con.logout, signedIn)
	r(http.MethodGet, "/", con.inboxPage, signedIn)
	r(http.MethodGet, "/inbox/events", con.inboxEvents, signedIn)
	r(http.MethodGet, "/calls/:agent/:id", con.callPage, signedIn)
	r(http.MethodPost, "/calls/:agent/:id/approve", con.approveForm, deciders)
	r(http.MethodPost, "/calls/:agent/:id/reject", con.rejectForm, deciders)
	r(http.MethodPost, "/calls/:agent/:id/changes", con.changesForm, deciders)
	r(http.MethodPost, "/calls/:agent/:id/edit", con.editForm, deciders)
	r(http.MethodPost, "/calls/:agent/:id/cancel", con.cancelForm, deciders)
	r(http.MethodPost, "/threads/approve", con.approveThreadForm, reviewerOnly)
	// a mail's one-tap link: GET shows the call, only the POST decides
	// (each checks the approver and the call itself: onetap.go)
	r(http.MethodGet, oneTapRoute, con.oneTapPage, signedIn)
	r(http.MethodPost, oneTapRoute, con.oneTapDecide, signedIn)
	r(http.MethodGet, "/in-doubt", con.inDoubtPage, reviewerOnly)
	r(http.MethodPost, "/calls/:agent/:id/in-doubt", con.resolveInDoubtForm, reviewerOnly)
	r(http.MethodGet, "/history", con.historyPage, signedIn)
	r(http.MethodGet, "/grants", con.grantsPage, signedIn)
	r(http.MethodGet, "/grants/new", con.newGrantPage, deciders)
	r(http.MethodPost, "/grants", con.createGrantForm, deciders)
	r(http.MethodPost, "/grants/scope", con.grantScope, deciders)
	r(http.MethodPost, "/grants/:id/revoke", con.revokeGrantForm, deciders)
	r(http.MethodGet, "/rules", con.rulesPage, signedIn)
	r(http.MethodPost, "/rules", con.putRuleForm, adminOnly)
	r(http.MethodPost, "/rules/:id/delete", con.deleteRuleForm, adminOnly)
	r(http.MethodPost, "/rules/eval", con.evalForm, signedIn)
	r(http.MethodGet, "/health", con.healthPage, signedIn)
	r(http.MethodGet, "/audit", con.auditPage, auditorOnly)
	r(http.MethodGet, "/audit/export", con.auditExport, auditorOnly)
	r(http.MethodGet, "/audit/analytics", con.analyticsPage, auditorOnly)
	r(http.MethodGet, "/shadow", con.shadowPage, auditorOnly)
	r(http.MethodPost, "/shadow/stop", con.stopShadowForm, adminOnly)
	r(http.MethodGet, "/suggestions", con.suggestionsPage, auditorOnly)
	r(http.MethodPost, "/suggestions/:id/adopt", con.adoptSuggestion, adminOnly)
	r(http.MethodPost, "/suggestions/:id/dismiss", con.dismissSuggestion, adminOnly)
	r(http.MethodGet, "/tokens", con.tokensPage, signedIn)
	r(http.MethodPost, "/tokens", con.createTokenForm, signedIn)
	r(http.MethodPost, "/tokens/:id/revoke", con.revokeTokenForm, signedIn)
	r(http.MethodGet, "/devices", con.devicesPage, signedIn)
	r(http.MethodPost, "/devices/:id/revoke", con.revokeDeviceForm, signedIn)

	// REST API
	r(http.MethodGet, "/api/v1/openapi.json", con.apiDocument, public)
	r(http.MethodPost, "/api/v1/calls", con.apiSubmit, agentOnly)
	r(http.MethodGet, "/api/v1/calls/:id", con.apiAwait, agentOnly)
	r(http.MethodPost, "/api/v1/calls/:id/cancel", con.apiCancel, agentOnly)
	r(http.MethodPost, "/api/v1/calls/:id/report", con.apiReport, agentOnly)
	r(http.MethodGet, "/api/v1/approvals", con.apiList, signedIn)
	r(http.MethodGet, "/api/v1/approvals/:agent/:id", con.apiGet, signedIn)
	r(http.MethodGet, "/api/v1/approvals/:agent/:id/events", con.apiEvents, signedIn)
	r(http.MethodPost, "/api/v1/approvals/:agent/:id/approve", con.apiApprove, deciders)
	r(http.MethodPost, "/api/v1/approvals/:agent/:id/reject", con.apiReject, deciders)
	r(http.MethodPost, "/api/v1/approvals/:agent/:id/changes", con.apiChanges, deciders)
	r(http.MethodPost, "/api/v1/approvals/:agent/:id/cancel", con.apiCancelCall, deciders)
	r(http.MethodPost, "/api/v1/threads/:agent/:thread/approve", con.apiApproveThread, reviewerOnly)
	r(http.MethodGet, "/api/v1/in-doubt", con.apiInDoubt, reviewerOnly)
	r(http.MethodPost, "/api/v1/in-doubt/:agent/:id", con.apiResolveInDoubt, reviewerOnly)
	r(http.MethodGet, "/api/v1/grants", con.apiListGrants, signedIn)
	r(http.MethodPost, "/api/v1/grants", con.apiCreateGrant, deciders)
	r(http.MethodDelete, "/api/v1/grants/:id", con.apiRevokeGrant, deciders)
	r(http.MethodGet, "/api/v1/tokens", con.apiListTokens, signedIn)
	r(http.MethodPost, "/api/v1/tokens", con.apiCreateToken, signedIn)
	r(http.MethodDelete, "/api/v1/tokens/:id", con.apiRevokeToken, signedIn)
	r(http.MethodGet, "/api/v1/whoami", con.apiWhoami, signedIn)
	r(http.MethodGet, "/api/v1/devices", con.apiListDevices, signedIn)
	r(http.MethodPost, "/api/v1/devices", con.apiSubscribe, signedIn)
	r(http.MethodDelete, "/api/v1/devices/:id", con.apiRevokeDevice, signedIn)
	r(http.MethodPost, "/api/v1/rules", con.apiPutRule, adminOnly)
	r(http.MethodDelete, "/api/v1/rules/:id", con.apiDeleteRule, adminOnly)
	r(http.MethodGet, "/api/v1/policy/shadow", con.apiShadowStatus, signedIn)
	r(http.MethodPost, "/api/v1/policy/shadow", con.apiStartShadow, adminOnly)
	r(http.MethodDelete, "/api/v1/policy/shadow", con.apiStopShadow, adminOnly)
	r(http.MethodGet, "/api/v1/policy/shadow/divergences", con.apiShadowDivergences, auditorOnly)
}

func cacheStatic(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header().Set("Cache-Control", "no-cache")
		return next(c)
	}
}

// apiError is the JSON body of every REST error.
type apiError struct {
	Code    apierr.Code `json:"code"`
	Message string      `json:"message"`
	// OverBudget is the policy's notice, when the call was not decided
	// because its agent is over its budget: the shape every SDK reads.
	OverBudget *ingress.OverBudget `json:"over_budget,omitempty"`
}

// handleError is the one place an error becomes an HTTP status: apierr codes
// through apierr.HTTPStatus, echo's own errors (no route, bad method, body
// too large) through their status.
func (con *Console) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	code, msg := apierr.CodeOf(err), ""
	var he *echo.HTTPError
	var ae *apierr.Error
	switch {
	case errors.As(err, &ae):
		msg = ae.Message
	case errors.As(err, &he):
		code = codeForStatus(he.Code)
		msg = fmt.Sprint(he.Message)
		if he.Code == http.StatusNotFound {
			msg = "no such page or endpoint: " + c.Request().URL.Path
		}
	}
	status := apierr.HTTPStatus(code)
	if he != nil && ae == nil {
		status = he.Code
	}
	if code == apierr.Internal {
		con.log.Error("request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
		msg = "something went wrong on our side; the log has the details"
	} else if msg == "" {
		msg = err.Error()
	}
	var over *airlock.OverBudgetError
	var notice *ingress.OverBudget
	if errors.As(err, &over) {
		// A call the agent's budget kept from being decided: submit it again then.
		n := over.Notice()
		notice = &n
		c.Response().Header().Set("Retry-After", strconv.Itoa(n.RetryAfterSeconds))
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(status)
		return
	}
	if isAPI(c) || strings.Contains(c.Request().Header.Get(echo.HeaderAccept), "application/json") {
		_ = c.JSON(status, apiError{Code: code, Message: msg, OverBudget: notice})
		return
	}
	c.Response().Header().Set("Content-Security-Policy", contentSecPolicy)
	back := callPath(c.Param("agent"), c.Param("id"))
	if back == "" {
		back = "/"
	}
	_ = con.render(c, status, "error", &errorView{layout: layout{Title: "Error", Error: msg}, Code: string(code), Back: back})
}

func codeForStatus(s int) apierr.Code {
	switch s {
	case http.StatusNotFound:
		return apierr.NotFound
	case http.StatusUnauthorized:
		return apierr.Unauthenticated
	case http.StatusForbidden:
		return apierr.NotAuthorized
	case http.StatusConflict:
		return apierr.Conflict
	case http.StatusServiceUnavailable:
		return apierr.Unavailable
	}
	if s >= 400 && s < 500 {
		return apierr.InvalidRequest
	}
	return apierr.Internal
}
