package bench

import (
	"context"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/config"
)

// A small `airlock bench pending` builds its calls through the real
// services, times every reviewer operation on both stacks and attributes
// memory: every figure is there (the ratios themselves are the benchmark's
// business, not a test's).
func TestPendingBenchMeasuresEveryReviewerOperation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := runPendingBench(ctx, config.Default(), pendingOptions{Pending: 40, Agents: 2, Small: 10, Samples: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Figures) != len(reviewerOps) {
		t.Fatalf("%d figures, want one per reviewer operation (%d)", len(rep.Figures), len(reviewerOps))
	}
	for _, f := range rep.Figures {
		if !(f.SmallUs > 0 && f.LargeUs > 0 && f.Ratio > 0) {
			t.Errorf("%s: figures missing: %+v", f.Name, f)
		}
	}
	if _, ok := rep.MemoryPerCall["approval"]; !ok {
		t.Errorf("no memory figure for the approval service: %v", rep.MemoryPerCall)
	}
}
