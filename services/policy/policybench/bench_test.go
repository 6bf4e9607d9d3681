package policybench_test

import (
	"context"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/policy/policybench"
)

// TestRunMeasuresBothWaysOnTheSamePolicy runs a short measurement: it fails
// if OPA's REST server cannot be started or decides differently from the
// in-process evaluator (Run checks that before measuring).
func TestRunMeasuresBothWaysOnTheSamePolicy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := policybench.Run(ctx, policybench.Options{Rules: 100, Decisions: 300, RESTDecisions: 60})
	if err != nil {
		t.Fatal(err)
	}
	if res.Action != "allow" || res.RuleID != "read-only" {
		t.Errorf("sample call decided %s by %s, want allow by read-only", res.Action, res.RuleID)
	}
	if res.InProcP50us <= 0 || res.RESTP50us <= 0 || res.RatioP50 <= 0 || res.FloorInProcP50us <= 0 || res.FloorRESTP50us <= 0 {
		t.Errorf("figures missing: %+v", res)
	}
	t.Logf("in process p50 %.1fµs p99 %.1fµs; REST p50 %.1fµs p99 %.1fµs; ratio %.1f×; floor %.1fµs vs %.1fµs (%.1f×)", res.InProcP50us, res.InProcP99us, res.RESTP50us, res.RESTP99us, res.RatioP50, res.FloorInProcP50us, res.FloorRESTP50us, res.FloorRatioP50)
}
