package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/config"
)

// TestBenchGatewayMeasuresEveryFigure runs a short `airlock bench gateway`
// for each protocol era: the auto-allowed echo calls must complete directly
// and through the gateway, and every figure must be present.
func TestBenchGatewayMeasuresEveryFigure(t *testing.T) {
	for _, version := range []string{"", "2025-11-25"} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		rep, err := runGatewayBench(ctx, config.Default(), gatewayBenchOptions{Samples: 20, Version: version})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if version != "" && rep.Protocol != version {
			t.Errorf("asked for protocol %s, measured %s", version, rep.Protocol)
		}
		for i, f := range []float64{rep.Direct.P50us, rep.Gateway.P50us, rep.RoundTrip.P50us, rep.Ratio, rep.HTTPHop.P50us, rep.MCPHop.P50us,
			rep.SDKCall.P50us, rep.ClientHop.P50us, rep.Reach} {
			if !(f > 0) {
				t.Fatalf("figure %d is %v in %+v", i, f, rep)
			}
		}
		b, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{`"direct_call"`, `"gateway_call"`, `"round_trip"`, `"overhead_p50_us"`, `"overhead_per_round_trip_p50"`, `"goal_met"`,
			`"http_hop_floor"`, `"mcp_hop_floor"`, `"gateway_own_per_round_trip_p50"`, `"sdk_call"`, `"client_hop_floor"`, `"reach_per_round_trip_p50"`,
			`"gateway_server_p50_us"`} {
			if !strings.Contains(string(b), key) {
				t.Fatalf("--json output lacks %s: %s", key, b)
			}
		}
		var out bytes.Buffer
		printGatewayBench(&out, rep)
		if !strings.Contains(out.String(), "(b) − (a)") || !strings.ContainsAny(out.String(), "✓✗") || !strings.Contains(out.String(), "(e) floor") ||
			!strings.Contains(out.String(), "reach: (g) + (f) − (a)") {
			t.Fatalf("the report does not state the goal:\n%s", out.String())
		}
	}
}

// TestGatewayMissedSaysWhenTheGoalIsOutOfReach: a missed goal names the
// reach when even a gateway that cost nothing would have missed it.
func TestGatewayMissedSaysWhenTheGoalIsOutOfReach(t *testing.T) {
	for _, c := range []struct {
		name  string
		rep   gatewayReport
		want  int
		reach bool
	}{
		{"a_met_goal_names_nothing", gatewayReport{Ratio: 1.2, GoalMax: 1.3, GoalMet: true, Reach: 1.1}, 0, false},
		{"a_goal_missed_within_reach_says_only_that", gatewayReport{Ratio: 1.8, GoalMax: 1.3, Reach: 1.2}, 1, false},
		{"a_goal_missed_out_of_reach_names_the_reach", gatewayReport{Ratio: 1.8, GoalMax: 1.3, Reach: 1.45}, 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.rep.Missed()
			if len(got) != c.want {
				t.Fatalf("Missed() = %q, want %d entries", got, c.want)
			}
			if c.want > 0 && strings.Contains(got[0], "out of reach") != c.reach {
				t.Fatalf("Missed() = %q: naming the reach should be %v", got[0], c.reach)
			}
			if c.reach && !strings.Contains(got[0], "1.45×") {
				t.Fatalf("Missed() = %q does not give the reach", got[0])
			}
		})
	}
}
