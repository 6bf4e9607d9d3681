package bench

import (
	"context"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/config"
)

// TestBenchFanoutMeasuresEveryFigure runs a short `airlock bench fanout`:
// every call must reach its one or five channels, and every figure must be
// present (the goal itself is the benchmark's, not this test's). Each agent
// may keep 3 calls pending here, far fewer than the run's 62 calls, so the
// bench must stay within every agent's share as the full run (660 calls,
// 100 each) must.
func TestBenchFanoutMeasuresEveryFigure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := config.Default()
	cfg.Approval.MaxPendingPerAgent = 3
	rep, err := runFanoutBench(ctx, cfg, fanoutBenchOptions{Samples: 10})
	if err != nil {
		t.Fatal(err)
	}
	if rep.One.N != 10 || rep.Five.N != 10 || !(rep.One.P50us > 0) || !(rep.Five.P50us > 0) || !(rep.Ratio > 0) {
		t.Fatalf("figures missing: %+v", rep)
	}
}
