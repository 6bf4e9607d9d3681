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
		if s.Floor.P50us <= 0 || s.Wrapped.P50us <= 0 || s.Topdown.P50us <= 0 || s.PolicyRevision == "" {
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

// TestShadowModeTimesEveryCaseWithAndWithoutACandidate runs a short shadow
// measurement: every case has both figures, and the candidate decided
// calls meanwhile, diverging only on the echo it changes.
func TestShadowModeTimesEveryCaseWithAndWithoutACandidate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := policybench.Run(ctx, policybench.Options{Sizes: []int{10}, Decisions: 400, Shadow: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Sizes[0].Cases {
		f := c.Shadow
		if f == nil || f.Off.P50us <= 0 || f.On.P50us <= 0 || f.RatioP50 <= 0 || f.Evaluated == 0 {
			t.Fatalf("%s: shadow figures missing: %+v", c.Name, f)
		}
		if echo := c.RuleID == "demo-echo"; echo != (f.Diverged > 0) || (echo && f.Diverged != f.Evaluated) {
			t.Errorf("%s (%s): the candidate diverged on %d of %d calls; want all for echo, none otherwise", c.Name, c.RuleID, f.Diverged, f.Evaluated)
		}
	}
	if !res.Shadow || res.WorstShadowP50 <= 0 {
		t.Errorf("result does not report shadow mode: %+v", res)
	}
}
