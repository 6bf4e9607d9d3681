package bench

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/config"
)

// TestBenchRoundtripMeasuresEveryFigure runs a short `airlock bench
// roundtrip`: the auto-allowed demo__echo calls must complete through the
// policy and executor services, every figure must be present, and what the
// server counted per call must be the mix the floor is composed from.
func TestBenchRoundtripMeasuresEveryFigure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := runRoundtripBench(ctx, config.Default(), roundtripOptions{Samples: 50, Duration: 500 * time.Millisecond, Concurrency: 8, FloorOps: 400})
	if err != nil {
		t.Fatal(err)
	}
	figures := []float64{rep.RawHop.Latency.P50us, rep.RawHop.Latency.P99us, rep.RawHop.Throughput.PerSecond,
		rep.RoundTrip.Latency.P50us, rep.RoundTrip.Latency.P99us, rep.RoundTrip.Throughput.PerSecond,
		rep.Ratios.P50, rep.Ratios.P99, rep.Ratios.CPU, rep.FloorCPUus,
		rep.RawHop.Throughput.CPUPerOpUs, rep.RoundTrip.Throughput.CPUPerOpUs,
		rep.Chain.Latency.P50us, rep.Chain.Latency.P99us, rep.Chain.Throughput.PerSecond, rep.Chain.Throughput.CPUPerOpUs,
		rep.Ratios.ChainP50, rep.Ratios.ChainP99, rep.Ratios.OverChainP50, rep.Ratios.OverChainP99, rep.Ratios.OverChainCPU,
		rep.MinimalChain.Latency.P50us, rep.MinimalChain.Latency.P99us, rep.MinimalChain.Throughput.PerSecond, rep.MinimalChain.Throughput.CPUPerOpUs,
		rep.EnvelopedChain.Latency.P50us, rep.EnvelopedChain.Latency.P99us, rep.EnvelopedChain.Throughput.PerSecond, rep.EnvelopedChain.Throughput.CPUPerOpUs,
		rep.Ratios.EnvelopedP50, rep.Ratios.EnvelopedCPU,
		rep.Ratios.MinimalP50, rep.Ratios.MinimalP99, rep.ChainHop.P50us, rep.ChainHop.P99us, rep.Ratios.MinimalP50InTurn,
		rep.CPUBound.WorkUs, rep.CPUBound.MinimalUs, rep.CPUBound.MinimalFloorUs, rep.CPUBound.CallUs,
		rep.CPUBound.MinimalToOwnFloor, rep.CPUBound.MinimalToFloor, rep.CPUBound.CallToFloor}
	for i, f := range figures {
		if !(f > 0) {
			t.Fatalf("figure %d is %v in %+v", i, f, rep)
		}
	}
	// Calls in flight when the count starts and ends blur it a little.
	near := func(got, want float64) bool { return math.Abs(got-want) <= 0.25 }
	m, c := rep.Mix, rep.PerCall
	for _, check := range []struct {
		what      string
		got, want float64
	}{
		{"intake writes", c.IntakeWrites, 1},
		{"event writes (sync publishes and compare-and-appends but the agent's)", c.EventWrites, m.SyncPublish + m.CASPublish - 1},
		{"policy deliveries (work queue)", c.PolicyDeliveries, m.PullDeliverAckWorkQueue},
		{"executor deliveries", c.ExecutorDeliveries, m.PullDeliverAck},
	} {
		if !near(check.got, check.want) {
			t.Errorf("%s per call: the server counted %.2f, the floor assumes %.0f", check.what, check.got, check.want)
		}
	}
	// The chain floor does what a call does, no more, no less: the server
	// counts the same writes and deliveries per chain as per call.
	cc := rep.Chain.PerCall
	for _, check := range []struct {
		what      string
		got, want float64
	}{
		{"intake writes", cc.IntakeWrites, c.IntakeWrites},
		{"event writes", cc.EventWrites, c.EventWrites},
		{"policy deliveries", cc.PolicyDeliveries, c.PolicyDeliveries},
		{"executor deliveries", cc.ExecutorDeliveries, c.ExecutorDeliveries},
	} {
		if !near(check.got, check.want) {
			t.Errorf("%s: the server counted %.2f per chain and %.2f per call", check.what, check.got, check.want)
		}
	}
	// The minimal exactly-once chain is the chain floor without its
	// separate `requested`: one event write fewer, everything else the same.
	mc := rep.MinimalChain.PerCall
	for _, check := range []struct {
		what      string
		got, want float64
	}{
		{"intake writes", mc.IntakeWrites, cc.IntakeWrites},
		{"event writes", mc.EventWrites, cc.EventWrites - 1},
		{"policy deliveries", mc.PolicyDeliveries, cc.PolicyDeliveries},
		{"executor deliveries", mc.ExecutorDeliveries, cc.ExecutorDeliveries},
	} {
		if !near(check.got, check.want) {
			t.Errorf("%s: the server counted %.2f per minimal chain, want %.0f (the chain floor's, without requested)", check.what, check.got, check.want)
		}
	}
	// The chain with airlock's headers does the chain floor's writes, no
	// more, and its records are as large: only the headers differ.
	ec := rep.EnvelopedChain.PerCall
	writes := func(c callCounts) [4]float64 {
		return [4]float64{c.IntakeWrites, c.EventWrites, c.PolicyDeliveries, c.ExecutorDeliveries}
	}
	if got, want := writes(ec), writes(cc); !near(got[0], want[0]) || !near(got[1], want[1]) || !near(got[2], want[2]) || !near(got[3], want[3]) {
		t.Errorf("the server counted %v intake writes, event writes, policy and executor deliveries per chain with airlock's headers, %v per chain floor", got, want)
	}
	if got, want := ec.EventBytes/ec.EventWrites, cc.EventBytes/cc.EventWrites; math.Abs(got-want) > 0.15*want {
		t.Errorf("the chain with airlock's headers stores %.0f B per event, the chain floor %.0f B: its records should be as large", got, want)
	}
	// The CPU bound adds every piece of a call's work, each measured.
	if len(rep.CPUBound.Work) < 5 {
		t.Errorf("the CPU bound counts %d pieces of work: %+v", len(rep.CPUBound.Work), rep.CPUBound.Work)
	}
	for _, w := range rep.CPUBound.Work {
		if !(w.CPUus > 0) {
			t.Errorf("work %q measured %v µs", w.Name, w.CPUus)
		}
	}
	if got, want := rep.CPUBound.MinimalUs, rep.MinimalChain.Throughput.CPUPerOpUs+rep.CPUBound.WorkUs; math.Abs(got-want) > 1e-6 {
		t.Errorf("the minimal CPU bound is %v µs, not the minimal chain's CPU plus the work (%v µs)", got, want)
	}
	var out strings.Builder
	printRoundtrip(&out, rep)
	for _, line := range []string{"minimal exactly-once chain", "minimal chain = ", "chain with airlock's headers", "CPU lower bound"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("the output lacks %q:\n%s", line, out.String())
		}
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"raw_hop"`, `"round_trip"`, `"floor"`, `"floor_mix"`, `"measured_per_call"`, `"chain_floor"`, `"chain_p50_to_raw_hop"`, `"minimal_chain"`, `"minimal_chain_p50_to_raw_hop"`, `"raw_hop_in_turn_with_chains"`, `"enveloped_chain"`, `"enveloped_chain_p50_to_chain"`, `"cpu_lower_bound"`, `"ratios"`, `"goals"`, `"p50_us"`, `"per_second"`, `"cpu_us_per_op"`} {
		if !strings.Contains(string(b), key) {
			t.Fatalf("--json output lacks %s: %s", key, b)
		}
	}
	if !strings.Contains(rep.Decider, "configured policy") {
		t.Errorf("the default policy did not auto-allow demo__echo; the bench fell back to: %s", rep.Decider)
	}
}
