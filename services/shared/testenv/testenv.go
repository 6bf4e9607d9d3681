// Package testenv starts real embedded NATS servers for tests: one server
// with a file store in a temp dir that can be restarted on the same data, or
// a 3-node cluster. Nothing about the bus is mocked.
package testenv

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/embedded"
	"github.com/airlock-gate/airlock/services/shared/obs"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// NATS is an embedded server for one test.
type NATS struct {
	t      testing.TB
	Server *embedded.Server
	Dir    string
	port   int
}

// StartNATS starts a JetStream server on a free loopback port with its store
// in a temp dir; it is stopped when the test ends.
func StartNATS(t testing.TB) *NATS { return StartNATSWith(t, embedded.Options{}) }

// StartNATSWith is StartNATS with options (port and store are its own).
func StartNATSWith(t testing.TB, o embedded.Options) *NATS {
	t.Helper()
	n := &NATS{t: t, Dir: t.TempDir()}
	o.Port, o.StoreDir = -1, n.Dir
	s, err := embedded.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	n.Server = s
	n.port = s.Options().Port
	t.Cleanup(func() { n.Server.Stop() })
	return n
}

// URL is the server's client URL; it stays the same across Restart.
func (n *NATS) URL() string { return n.Server.URL() }

// Restart stops the server and starts it again on the same port and data dir.
func (n *NATS) Restart() {
	n.t.Helper()
	n.Server.Stop()
	s, err := embedded.Restart(embedded.Options{Port: n.port, StoreDir: n.Dir})
	if err != nil {
		n.t.Fatalf("restart NATS: %v", err)
	}
	n.Server = s
}

// Config returns the default configuration pointed at url, with a short
// sweep interval so time-based tests run quickly.
func Config(url string) config.Config {
	cfg := config.Default()
	cfg.NATS.URL = url
	cfg.NATS.ReconnectWait = 50 * time.Millisecond
	cfg.Approval.SweepInterval = 50 * time.Millisecond
	// A stopped replica's announcements are taken over soon (a test of a
	// replica cut off from NATS for a while sets it longer).
	cfg.Approval.TakeoverAfter = time.Second
	// Fresh seal keys: every service built from this configuration shares them.
	cfg.Security.DecisionKey, cfg.Security.FrontendKey = seal.NewKey().Hex(), seal.NewKey().Hex()
	return cfg
}

// Deps connects to url, provisions the stream and buckets, and returns the
// dependencies a service is built from. The connection is drained when the
// test ends.
func Deps(t testing.TB, cfg config.Config) svc.Deps {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	log := Logger(t)
	nc, err := bus.Connect(ctx, cfg.NATS, "test", log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bus.Drain(nc, 5*time.Second) })
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bus.Provision(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	return svc.Deps{Config: cfg, Log: log, NC: nc, JS: js, Metrics: obs.NewMetrics()}
}

// Connect opens a plain client connection, closed when the test ends.
func Connect(t testing.TB, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// Logger writes to the test log when AIRLOCK_TEST_LOG is set, else discards.
func Logger(t testing.TB) *slog.Logger {
	if os.Getenv("AIRLOCK_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// RunService runs s until the test ends (or stop is called) and returns
// once s is ready (svc.Service.Ready): its endpoints answer requests from
// any connection and its consumers are subscribed. It fails the test,
// naming the service, when s stops before it is ready or is not ready
// within startTimeout, and when Run returns an error.
func RunService(t testing.TB, s svc.Service) (stop func()) {
	t.Helper()
	return runService(t, s, startTimeout)
}

// runService is RunService with the start bounded by within.
func runService(t testing.TB, s svc.Service, within time.Duration) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ended, err := svc.Start(ctx, s, within)
	if err != nil {
		cancel()
		t.Fatalf("%v (AIRLOCK_TEST_LOG=1 shows its log)", err)
	}
	var stopped bool
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-ended:
			if err != nil {
				t.Errorf("service %s: %v", s.Name(), err)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("service %s did not stop within 15s", s.Name())
		}
	}
	t.Cleanup(stop)
	return stop
}

// Eventually polls cond every 20ms until it is true or timeout passes.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", timeout, what)
}

// Concurrently runs fn(0) … fn(n-1), at most at of them at once, and
// returns when all have: a test's many agents, or many calls of one,
// racing the services.
func Concurrently(n, at int, fn func(i int)) {
	var wg sync.WaitGroup
	slots := make(chan struct{}, max(at, 1))
	for i := range n {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			fn(i)
		}()
	}
	wg.Wait()
}
