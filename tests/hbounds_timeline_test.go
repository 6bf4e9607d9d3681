package tests

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestAnAgentCannotGrowItsCallsPageWithoutBound (h-bounds review): the
// call page (and GET /api/v1/approvals/{agent}/{id}/events) reads and
// renders every event of the call (Console.timeline, bus.ReadStored, no
// page). An agent adds events to its own pending call at will: every
// report it sends for the call is refused and recorded as an
// unauthorized_attempt on it (one event per intake message), up to its
// call budget a minute (600 at the defaults: 36,000 events an hour); the
// gateway's client comings and goings add `notified` events uncharged. The
// page a reviewer opens to decide the call grows with them, and once the
// read takes more than its 5 s the page fails.
func TestAnAgentCannotGrowItsCallsPageWithoutBound(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "airlock.yaml")
	// The budget is raised only to make the test short: at the default 600
	// a minute the same page takes seven minutes.
	if err := os.WriteFile(cfg, []byte("approval:\n  groups: {reviewers: [alice]}\nlimits:\n  agent_calls_per_minute: 1000000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_CONFIG="+cfg)
	agent := dev.Agent(t, "bot")
	token := adminToken(t, dev)
	_, js := dev.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	id, err := agent.Submit(ctx, airlock.Call{ID: "noisy", Server: "fs", Tool: "write_file", Args: map[string]any{"path": "/tmp/x", "content": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	waitPending(t, dev, token, id)
	_, small := bearerGet(t, dev.HTTPURL+"/calls/bot/"+id, token)

	const reports = 4000
	for i := 0; i < reports; i++ {
		if err := agent.Report(ctx, id, 1, airlock.Report{Result: []byte(`{"ok":true}`)}); err != nil {
			t.Fatal(err)
		}
	}
	attempts, err := subject.Event("bot", id, subject.UnauthorizedAttempt)
	if err != nil {
		t.Fatal(err)
	}
	stored := func() uint64 {
		s, err := js.Stream(ctx, config.Default().Stream.Name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(attempts))
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Subjects[attempts]
	}
	testenv.Eventually(t, 3*time.Minute, "the refused reports to be recorded", func() bool { return stored() >= reports })
	start := time.Now()
	status, page := bearerGet(t, dev.HTTPURL+"/calls/bot/"+id, token)
	took := time.Since(start)
	shown := strings.Count(page, "ev-unauthorized_attempt")
	t.Logf("call page of a pending call: %d bytes before; after the agent's %d refused reports (%d events stored on the call): status %d, %d bytes, %d events shown, %s",
		len(small), reports, stored(), status, len(page), shown, took.Round(time.Millisecond))
	if status != http.StatusOK {
		t.Fatalf("the call page answered %d", status)
	}
	if len(page) > 1<<20 || shown > 1000 {
		t.Fatalf("the call page a reviewer opens to decide the call is %d bytes with %d of the agent's events", len(page), shown)
	}
}
