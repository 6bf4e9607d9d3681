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
		for i, f := range []float64{rep.Direct.P50us, rep.Gateway.P50us, rep.RoundTrip.P50us, rep.Ratio, rep.HTTPHop.P50us, rep.MCPHop.P50us} {
			if !(f > 0) {
				t.Fatalf("figure %d is %v in %+v", i, f, rep)
			}
		}
		b, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{`"direct_call"`, `"gateway_call"`, `"round_trip"`, `"overhead_p50_us"`, `"overhead_per_round_trip_p50"`, `"goal_met"`,
			`"http_hop_floor"`, `"mcp_hop_floor"`, `"gateway_own_per_round_trip_p50"`} {
			if !strings.Contains(string(b), key) {
				t.Fatalf("--json output lacks %s: %s", key, b)
			}
		}
		var out bytes.Buffer
		printGatewayBench(&out, rep)
		if !strings.Contains(out.String(), "(b) − (a)") || !strings.ContainsAny(out.String(), "✓✗") || !strings.Contains(out.String(), "(e) floor") {
			t.Fatalf("the report does not state the goal:\n%s", out.String())
		}
	}
}
