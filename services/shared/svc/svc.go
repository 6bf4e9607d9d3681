// Package svc defines what an airlock service is built from and how it runs,
// so `airlock dev` and `airlock serve <name>` start every service the same way.
package svc

import (
	"context"
	"log/slog"

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
