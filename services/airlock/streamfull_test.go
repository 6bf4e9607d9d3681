package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/svc"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// At stream.max_bytes the events stream refuses every new event and airlock
// decides no new call: /healthz of the process running the policy service
// (which watches the stream's use) answers 503 "degraded", naming the
// stream and saying what to do. A stream past its warning threshold but
// with room is still ready.
func TestHealthzIsDegradedWhileTheEventsStreamIsFull(t *testing.T) {
	n := testenv.StartNATS(t)
	cfg := testenv.Config(n.URL())
	testenv.SmallEventsStream(&cfg)
	cfg.Dev.DataDir = t.TempDir()
	deps := testenv.Deps(t, cfg)
	// Past the warning threshold before the service starts: its watch then
	// reads the stream every bus.StreamWatchNearTheBound, not every minute.
	testenv.FillEventsStream(t, deps)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pol, err := constructors()["policy"](ctx, deps)
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunService(t, pol)
	srv := httptest.NewServer(newHTTP(deps, []string{"policy"}, pol))
	defer srv.Close()

	for _, step := range []struct {
		name   string
		fill   func(testing.TB, svc.Deps)
		code   int
		status string
		says   []string
	}{
		{"past_80_percent_with_room_is_ok", nil, http.StatusOK, "ok", nil},
		{"full_is_degraded_naming_the_stream_and_what_to_do", testenv.FillEventsStreamUntilRefused, http.StatusServiceUnavailable, "degraded",
			[]string{"events stream " + cfg.Stream.Name + " is full", "raise stream.max_bytes", "airlock provision", "stream.max_age"}},
	} {
		t.Run(step.name, func(t *testing.T) {
			if step.fill != nil {
				step.fill(t, deps)
			}
			var h health
			testenv.Eventually(t, 6*bus.StreamWatchNearTheBound, "/healthz to answer "+step.status, func() bool {
				h = getHealth(t, srv.URL)
				return h.code == step.code
			})
			if h.Status != step.status {
				t.Fatalf("/healthz = %d %q (%s); want %d %q", h.code, h.Status, h.Message, step.code, step.status)
			}
			for _, want := range step.says {
				if !strings.Contains(h.Message, want) {
					t.Errorf("/healthz's message %q lacks %q", h.Message, want)
				}
			}
		})
	}
}
