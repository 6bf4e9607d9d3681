package policy_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/airlock-gate/airlock/services/policy"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestThePolicyServiceWarnsOfAFillingEventsStream: the policy service
// records every new call in the events stream, which refuses new events at
// stream.max_bytes; it watches the stream's use (airlock_stream_bytes) and
// warns once past bus.StreamUseWarning.
func TestThePolicyServiceWarnsOfAFillingEventsStream(t *testing.T) {
	n := testenv.StartNATS(t)
	cfg := testenv.Config(n.URL())
	testenv.SmallEventsStream(&cfg)
	deps := testenv.Deps(t, cfg)
	var logged testenv.SyncBuffer
	deps.Log = slog.New(slog.NewTextHandler(&logged, nil))
	testenv.FillEventsStream(t, deps)
	pol, err := policy.NewFromConfig(context.Background(), deps)
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
