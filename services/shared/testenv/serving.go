package testenv

import (
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/lastevents"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// startTimeout bounds a service's start in a test: generous, because a
// loaded 2-core CI machine can take seconds where an idle one takes
// milliseconds, and it costs nothing when the service is up at once.
const startTimeout = 30 * time.Second

// Answering waits until each of subjects has a responder: for endpoints
// that stop answering while their service runs (NATS restarted), as
// RunService already waits for a service's start. Each subject is asked
// with an empty request and any reply counts, an error reply included, so
// give only endpoints that change nothing (an empty request to a sealed
// endpoint is recorded as an unauthorized attempt). A service registers its
// endpoints one after the other on one connection: the one it registers
// last answering means every earlier one does.
func Answering(t testing.TB, nc *nats.Conn, subjects ...string) {
	t.Helper()
	for _, s := range subjects {
		Eventually(t, startTimeout, "a responder on "+s, func() bool {
			_, err := nc.Request(s, nil, 5*time.Second)
			return err == nil
		})
	}
}

// ApprovalServing waits until the approval service answers its endpoints
// (an agent's read of its stored events is the one it registers last; an
// empty one is refused as not JSON).
func ApprovalServing(t testing.TB, nc *nats.Conn) {
	t.Helper()
	Answering(t, nc, approvalapi.Subject(approvalapi.List), approvalapi.Subject(approvalapi.InDoubtGet), subject.AgentCancel("ready"), subject.AgentEvents("ready"))
}

// ServeAgentReads answers agents' reads of their calls' stored events
// (lastevents) over nc, as the approval service does, for a test that runs
// agents without it; it stops with the test. nc needs the approval
// service's permissions (or none).
func ServeAgentReads(t testing.TB, nc *nats.Conn, stream string) {
	t.Helper()
	srv := lastevents.NewServer(nc, stream, slog.New(slog.DiscardHandler))
	m, err := micro.AddService(nc, micro.Config{Name: approvalapi.Service, Version: "1.0.0"})
	if err != nil {
		t.Fatalf("serve agents' reads: %v", err)
	}
	if err := m.AddEndpoint("agent_events", micro.HandlerFunc(srv.Handle), micro.WithEndpointSubject(subject.AgentEvents("*"))); err != nil {
		t.Fatalf("serve agents' reads: %v", err)
	}
	Subscribed(t, nc)
	t.Cleanup(func() {
		_ = m.Stop()
		srv.Wait()
	})
}

// Subscribed returns once the server has every subscription made on nc so
// far. A stand-in's endpoints registered on one connection are otherwise
// only queued for the server: a request from another connection (the
// service under test) could get no responder.
func Subscribed(t testing.TB, nc *nats.Conn) {
	t.Helper()
	if err := nc.Flush(); err != nil {
		t.Fatalf("flush the subscriptions to NATS: %v", err)
	}
}
