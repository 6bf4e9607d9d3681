package policybench_test

import (
	"context"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/policy/policybench"
)

// TestRunMeasuresEveryCaseAgainstTheFloor runs a short measurement: every
// case must be decided as the default policy says and carry its figures.
func TestRunMeasuresEveryCaseAgainstTheFloor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := policybench.Run(ctx, policybench.Options{Sizes: []int{10, 200}, Decisions: 200})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Sizes) != 2 {
		t.Fatalf("%d sizes measured, want 2", len(res.Sizes))
	}
	want := map[string]string{"one rule matches": "read-only", "several rules match": "demo-echo"}
	for _, s := range res.Sizes {
		if s.Floor.P50us <= 0 || s.Wrapped.P50us <= 0 || s.PolicyRevision == "" {
			t.Errorf("%d rules: floor figures missing: %+v", s.Rules, s)
		}
		if len(s.Cases) != len(want) {
			t.Fatalf("%d rules: %d cases, want %d", s.Rules, len(s.Cases), len(want))
		}
		for _, c := range s.Cases {
			if c.Action != "allow" || c.RuleID != want[c.Name] {
				t.Errorf("%d rules, %s: %s decided %s by %s, want allow by %s", s.Rules, c.Name, c.Call, c.Action, c.RuleID, want[c.Name])
			}
			if c.P50us <= 0 || c.P99us < c.P50us || c.RatioP50 <= 0 || c.RatioP99 <= 0 {
				t.Errorf("%d rules, %s: figures missing or inconsistent: %+v", s.Rules, c.Name, c)
			}
		}
	}
}
