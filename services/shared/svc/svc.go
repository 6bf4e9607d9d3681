// Package svc defines what an airlock service is built from and how it runs,
// so `airlock dev` and `airlock serve <name>` start every service the same way.
package svc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/obs"
	"github.com/airlock-gate/airlock/services/shared/seal"
)

// Deps are the connections and settings a service is constructed with.
// Every field is set by the caller; services keep no package-level state.
type Deps struct {
	Config  config.Config
	Log     *slog.Logger
	NC      *nats.Conn
	JS      jetstream.JetStream
	Metrics *obs.Metrics
	// ClickHouse, when set, says where the audit store is now: the
	// writer's DSN (reader false) or the readers', or an error saying why
	// there is none (the ClickHouse `airlock dev --clickhouse-local` runs
	// has exited: nothing may connect to its old address, where another
	// process could listen and read the password). Nil: the configured
	// DSNs hold.
	ClickHouse func(reader bool) (string, error)
}

// Publisher returns an event publisher whose ce-source is "airlock/<service>"
// and that counts what it stores in airlock_events_published_total.
func (d Deps) Publisher(service string) *bus.Publisher {
	p := bus.NewPublisher(d.JS, "airlock/"+service)
	if d.Metrics != nil {
		p.Counting(func(typ string) { d.Metrics.Published.WithLabelValues(service, typ).Inc() })
	}
	return p
}

// Service is a long-running airlock service.
type Service interface {
	// Name is the service's short name ("policy", "executor", ...).
	Name() string
	// Run processes messages until ctx is canceled, then stops its consumers
	// (letting in-flight work finish) and returns. A non-nil error means the
	// service could not run at all.
	Run(ctx context.Context) error
	// Ready is closed once Run serves: its endpoints are registered and
	// on the server (a request from any connection is answered), its
	// consumers subscribed. It stays open when Run fails before that.
	// /healthz and testenv.RunService wait for it.
	Ready() <-chan struct{}
}

// Readiness is what a service keeps to implement Ready: its Run calls
// Mark at the point it serves. The zero value is not ready.
type Readiness struct {
	made, marked sync.Once
	ch           chan struct{}
}

func (r *Readiness) channel() chan struct{} {
	r.made.Do(func() { r.ch = make(chan struct{}) })
	return r.ch
}

// Mark says the service is ready; calls after the first change nothing.
func (r *Readiness) Mark() { r.marked.Do(func() { close(r.channel()) }) }

// Ready is closed once Mark is called.
func (r *Readiness) Ready() <-chan struct{} { return r.channel() }

// MarkServing marks r once the server has every subscription made on nc so
// far (the endpoints the service registered): until a flush they are only
// queued, and a request from another connection would find no responder.
// A flush that fails (NATS is reconnecting) is logged and r marked all the
// same: the subscriptions are sent again on reconnect, and /healthz
// reports the connection itself.
func (r *Readiness) MarkServing(nc *nats.Conn, log *slog.Logger) {
	if err := nc.Flush(); err != nil {
		log.Warn("the service's endpoints are registered but not yet on the NATS server; they will be once it reconnects", "err", err)
	}
	r.Mark()
}

// DecisionKey is the key that seals `allowed` and `approved` events.
func (d Deps) DecisionKey() (seal.Key, error) {
	s := d.Config.Security
	return seal.Load("security.decision_key", s.DecisionKey, s.DecisionKeyFile)
}

// FrontendKey is the key that seals front-end requests.
func (d Deps) FrontendKey() (seal.Key, error) {
	s := d.Config.Security
	return seal.Load("security.frontend_key", s.FrontendKey, s.FrontendKeyFile)
}

// Start runs s on a goroutine of its own until ctx ends and returns once s
// is ready; ended then receives what Run returns. It fails, naming the
// service, when Run ends before s is ready or s is not ready within within;
// then Run has ended, or was told to stop and given within again to do so,
// so the caller may close what s uses. (Tests use testenv.RunService,
// which also fails the test.)
func Start(ctx context.Context, s Service, within time.Duration) (ended <-chan error, err error) {
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	select {
	case <-s.Ready():
		// runCtx ends with ctx; cancel is kept only for a failed start.
		context.AfterFunc(ctx, cancel)
		return done, nil
	case err := <-done:
		cancel()
		select {
		case <-s.Ready(): // ready, then stopped at once: the caller reads it from ended
			done <- err
			return done, nil
		default:
		}
		if err == nil {
			err = errors.New("Run returned without an error")
		}
		return nil, fmt.Errorf("service %s stopped before it was ready: %w", s.Name(), err)
	case <-deadline.C:
		cancel()
		select {
		case <-done:
		case <-time.After(within):
		}
		return nil, fmt.Errorf("service %s was not ready within %s: it has not registered its endpoints or subscribed its consumers", s.Name(), within)
	}
}
