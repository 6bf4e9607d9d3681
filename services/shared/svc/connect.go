package svc

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/obs"
)

// Connect connects and returns what services are built from; with
// provision it creates or updates the streams and buckets first (which
// needs administrator permissions). Without, each service finds its own
// streams and buckets and says to run `airlock provision` when one is missing.
// It also applies cfg.Runtime to the process, which runs services. It
// tries to connect for up to 30 s (ConnectWithin sets another bound).
func Connect(ctx context.Context, cfg config.Config, log *slog.Logger, name string, provision bool) (Deps, error) {
	return ConnectWithin(ctx, 30*time.Second, cfg, log, name, provision)
}

// ConnectWithin is Connect trying to connect for up to wait
// (`--connect-wait`).
func ConnectWithin(ctx context.Context, wait time.Duration, cfg config.Config, log *slog.Logger, name string, provision bool) (Deps, error) {
	tuneRuntime(cfg.Runtime, log)
	cctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	nc, err := bus.Connect(cctx, cfg.NATS, name, log)
	if err != nil {
		return Deps{}, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return Deps{}, fmt.Errorf("jetstream: %w", err)
	}
	if provision {
		// Not bounded by the connection's wait: a cluster that has just
		// started may need longer to place replicated streams, and
		// Provision bounds its own wait (nats.provision_wait).
		changes, err := bus.Provision(ctx, js, cfg)
		if err != nil {
			nc.Close()
			return Deps{}, err
		}
		for _, c := range changes {
			log.Info("provisioned", "kind", c.Kind, "name", c.Name, "action", c.Action)
		}
	}
	return Deps{Config: cfg, Log: log, NC: nc, JS: js, Metrics: obs.NewMetrics()}, nil
}
