package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/airlock-gate/airlock/services/approval"
	"github.com/airlock-gate/airlock/services/audit"
	"github.com/airlock-gate/airlock/services/console"
	"github.com/airlock-gate/airlock/services/executor"
	"github.com/airlock-gate/airlock/services/gateway"
	"github.com/airlock-gate/airlock/services/policy"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/executorapi"
	"github.com/airlock-gate/airlock/services/shared/obs"
	"github.com/airlock-gate/airlock/services/shared/policyapi"
	"github.com/airlock-gate/airlock/services/shared/svc"
	airlockslack "github.com/airlock-gate/airlock/services/slack"
	airlockteams "github.com/airlock-gate/airlock/services/teams"
)

// constructors builds each service by name; `airlock dev` runs them all,
// `airlock serve NAME...` the ones named.
func constructors() map[string]func(context.Context, svc.Deps) (svc.Service, error) {
	return map[string]func(context.Context, svc.Deps) (svc.Service, error){
		"policy": func(ctx context.Context, d svc.Deps) (svc.Service, error) { return policy.NewFromConfig(ctx, d) },
		"approval": func(ctx context.Context, d svc.Deps) (svc.Service, error) {
			return approval.NewFromConfig(ctx, d, notifiers(d)...)
		},
		"executor": func(ctx context.Context, d svc.Deps) (svc.Service, error) { return executor.NewFromConfig(ctx, d) },
		"audit":    func(ctx context.Context, d svc.Deps) (svc.Service, error) { return audit.NewFromConfig(ctx, d) },
		"console": func(ctx context.Context, d svc.Deps) (svc.Service, error) {
			a := newConsoleAudit(d)
			return console.New(ctx, d, console.Options{Audit: a, Suggest: newConsoleSuggest(a)})
		},
		"gateway": func(_ context.Context, d svc.Deps) (svc.Service, error) { return gateway.New(d) },
	}
}

func serviceNames() []string {
	var names []string
	for n := range constructors() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// buildServices builds the named services. A service whose build fails in
// a way the bus may yet get over — a JetStream request unanswered in time,
// no JetStream answering, a cluster without a leader yet (bus.Transient) —
// is built again until startWait has passed since the first try: started
// beside a cluster still electing its leaders, or on a machine too busy to
// answer within a request's timeout, a service starts once the bus answers
// instead of exiting (a replica of the production layout once exited so,
// its console bucket's lookup timed out). A bus that is not provisioned
// fails at once: no wait helps it.
func buildServices(ctx context.Context, deps svc.Deps, names []string, startWait time.Duration) ([]svc.Service, error) {
	all := constructors()
	var out []svc.Service
	for _, n := range names {
		mk, ok := all[n]
		if !ok {
			return nil, fmt.Errorf("unknown service %q: choose from %s", n, strings.Join(serviceNames(), ", "))
		}
		s, err := buildTrying(ctx, deps, n, mk, startWait)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// buildTrying builds service name with mk, again after a transient failure
// (waiting 100 ms, doubling to 2 s) until startWait has passed.
func buildTrying(ctx context.Context, deps svc.Deps, name string, mk func(context.Context, svc.Deps) (svc.Service, error), startWait time.Duration) (svc.Service, error) {
	first := time.Now()
	pause := 100 * time.Millisecond
	for {
		s, err := mk(ctx, deps)
		if err == nil {
			return s, nil
		}
		waited := time.Since(first)
		if !bus.Transient(err) || ctx.Err() != nil {
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		if waited+pause > startWait {
			return nil, fmt.Errorf("start %s: NATS JetStream did not answer within %s (%w): check that the NATS servers run and, in a cluster, that its streams have leaders (`nats server report jetstream`), then start it again", name, startWait, err)
		}
		deps.Log.Warn("start "+name+": NATS JetStream did not answer; trying again", "err", err, "waited", waited.Round(time.Millisecond), "gives_up_after", startWait)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("start %s: %w", name, ctx.Err())
		case <-time.After(pause):
		}
		pause = min(2*pause, 2*time.Second)
	}
}

// newHTTP builds the process's HTTP server: /healthz (503 until every
// service is ready, and while a store it writes is down or, where the
// policy service runs, the events stream is full), /livez and /metrics always;
// the console, REST API and Slack's interactivity URL when the console
// service runs here (every service with a Register(*echo.Echo) method
// mounts its routes).
func newHTTP(deps svc.Deps, names []string, services ...svc.Service) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	health := obs.Health{NC: deps.NC, Services: names, Ready: map[string]<-chan struct{}{}, Endpoints: endpointsOf(names), Started: time.Now()}
	for _, s := range services {
		health.Ready[s.Name()] = s.Ready()
	}
	health.Stores = map[string]func() error{}
	if deps.ClickHouse != nil && slices.Contains(names, "audit") {
		health.Stores["audit_store"] = func() error { _, err := deps.ClickHouse(false); return err }
	}
	// A full events stream refuses every new event: the process that reads
	// its use (the policy service's watch) says so. Only there: a console
	// or gateway taken out of service by its readiness probe would hide
	// the health page that says what to do.
	for _, s := range services {
		if w, ok := s.(interface{ EventsStreamUse() (bus.StreamUse, bool) }); ok {
			health.Stores["events_stream"] = func() error {
				if u, read := w.EventsStreamUse(); read && u.Full() {
					return errors.New(u.Advice())
				}
				return nil
			}
		}
	}
	e.GET("/healthz", echo.WrapHandler(health))
	// Liveness is not readiness: a process still starting, or waiting out a
	// NATS outage, is alive and must not be restarted for it (an orchestrator's
	// liveness probe asks /livez, its readiness probe /healthz).
	e.GET("/livez", func(c echo.Context) error {
		if deps.NC != nil && deps.NC.IsClosed() {
			return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "dead",
				"message": "the NATS connection is closed for good and will not reconnect: restart this process"})
		}
		return c.JSON(http.StatusOK, map[string]string{"status": "alive"})
	})
	e.GET("/metrics", echo.WrapHandler(deps.Metrics.MetricsHandler()))
	for _, s := range services {
		if r, ok := s.(interface{ Register(*echo.Echo) }); ok {
			r.Register(e)
		}
		// Plain handlers by path (the MCP gateway's endpoints).
		if r, ok := s.(interface {
			Routes() map[string]http.Handler
		}); ok {
			for path, h := range r.Routes() {
				e.Any(path, echo.WrapHandler(h))
			}
		}
	}
	// Slack's clicks and Teams' activities are a front-end's: only the console's process (and
	// its NATS user) serves them.
	if slices.Contains(names, "console") {
		var opts []airlockslack.Option
		var teamsOpts []airlockteams.Option
		for _, s := range services {
			if c, ok := s.(*console.Console); ok {
				opts = append(opts, airlockslack.WithVouchedGroups(c.VouchedGroups))
				teamsOpts = append(teamsOpts, airlockteams.WithVouchedGroups(c.VouchedGroups))
			}
		}
		mountSlack(e, deps, opts...)
		mountTeams(e, deps, teamsOpts...)
	}
	return e
}

// endpointsOf names the micro services that the named services serve, which
// must answer before /healthz reports the process ready.
func endpointsOf(names []string) []string {
	var out []string
	for _, n := range names {
		switch n {
		case "approval":
			out = append(out, approvalapi.Service)
		case "policy":
			out = append(out, policyapi.Service)
		case "executor":
			out = append(out, executorapi.Service)
		}
	}
	return out
}

// run runs services and the HTTP server until ctx ends, then stops the
// services (each finishes its in-flight message), closes HTTP and drains NATS.
func run(ctx context.Context, deps svc.Deps, services []svc.Service, e *echo.Echo, ln net.Listener) error {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(services)+1)
	var wg sync.WaitGroup
	for _, s := range services {
		wg.Add(1)
		go func(s svc.Service) {
			defer wg.Done()
			err := s.Run(runCtx)
			if err == nil && runCtx.Err() == nil {
				// A service that ends while the process runs would leave it
				// alive (/livez) but never ready again: end the process, so
				// its supervisor starts it afresh.
				err = errors.New("stopped on its own while the process was running; the process stops so that it is started again")
			}
			if err != nil {
				errs <- fmt.Errorf("%s: %w", s.Name(), err)
				cancel()
			}
		}(s)
	}
	if ln != nil {
		srv := newHTTPServer(deps.Config.HTTP, e)
		go func() {
			if err := serveHTTP(srv, ln, deps.Config.HTTP.MaxConnections); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("http: %w", err)
				cancel()
			}
		}()
		defer func() {
			sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer scancel()
			_ = srv.Shutdown(sctx)
		}()
	}
	<-runCtx.Done()
	stopped := make(chan struct{})
	go func() { wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(deps.Config.NATS.DrainTimeout):
		deps.Log.Warn("services did not stop in time; draining anyway", "timeout", deps.Config.NATS.DrainTimeout)
	}
	if err := bus.Drain(deps.NC, deps.Config.NATS.DrainTimeout); err != nil {
		deps.Log.Warn("drain", "err", err)
	}
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}
