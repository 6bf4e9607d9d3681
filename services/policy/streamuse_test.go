package policy_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/policy"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// lockedBuffer is a log the service writes while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestThePolicyServiceWarnsOfAFillingEventsStream: the policy service
// records every new call in the events stream, which refuses new events at
// stream.max_bytes; it watches the stream's use (airlock_stream_bytes) and
// warns once past bus.StreamUseWarning.
func TestThePolicyServiceWarnsOfAFillingEventsStream(t *testing.T) {
	n := testenv.StartNATS(t)
	cfg := testenv.Config(n.URL())
	cfg.Stream.MaxMsgSize = 16 << 10
	cfg.Stream.MaxBytes = 64 * int64(cfg.Stream.MaxMsgSize) // the least the configuration allows
	deps := testenv.Deps(t, cfg)
	var logged lockedBuffer
	deps.Log = slog.New(slog.NewTextHandler(&logged, nil))
	ctx := context.Background()
	pub := deps.Publisher("test")
	for i := 0; ; i++ {
		u, err := bus.ReadStreamUse(ctx, deps.JS, cfg.Stream.Name)
		if err != nil {
			t.Fatal(err)
		}
		if u.Level() != "" {
			break
		}
		ev := &airlockv1.Event{AgentId: "bot", CallId: fmt.Sprintf("fill_%d", i), Revision: 1, Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "test"},
			Body: &airlockv1.Event_Notified{Notified: &airlockv1.Notified{Channel: "test", Kind: "fill", Ref: strings.Repeat("x", 8<<10)}}}
		if _, err := pub.Publish(ctx, ev, ""); err != nil {
			t.Fatal(err)
		}
	}
	pol, err := policy.NewFromConfig(ctx, deps)
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunService(t, pol) // ready once the stream's use was read
	if got := testutil.ToFloat64(deps.Metrics.StreamMaxBytes.WithLabelValues(cfg.Stream.Name)); got != float64(cfg.Stream.MaxBytes) {
		t.Fatalf("airlock_stream_max_bytes %v, want %d", got, cfg.Stream.MaxBytes)
	}
	if !strings.Contains(logged.String(), "stream use is warning") {
		t.Fatalf("the policy service did not warn of its events stream past 80%%:\n%s", logged.String())
	}
}
