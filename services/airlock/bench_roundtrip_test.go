package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/config"
)

// TestBenchRoundtripMeasuresEveryFigure runs a short `airlock bench
// roundtrip`: the auto-allowed demo__echo calls must complete through the
// policy and executor services, and every figure must be present.
func TestBenchRoundtripMeasuresEveryFigure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := runRoundtripBench(ctx, config.Default(), roundtripOptions{Samples: 50, Duration: 300 * time.Millisecond, Concurrency: 8, Publishes: 2000})
	if err != nil {
		t.Fatal(err)
	}
	figures := []float64{rep.RawHop.Latency.P50us, rep.RawHop.Latency.P99us, rep.RawHop.Throughput.PerSecond,
		rep.RoundTrip.Latency.P50us, rep.RoundTrip.Latency.P99us, rep.RoundTrip.Throughput.PerSecond,
		rep.AsyncPublishPerSecond, rep.Ratios.P50, rep.Ratios.P99, rep.Ratios.Throughput,
		rep.RawHop.Throughput.CPUPerOpUs, rep.RoundTrip.Throughput.CPUPerOpUs, rep.AsyncPublishCPUus}
	for i, f := range figures {
		if !(f > 0) {
			t.Fatalf("figure %d is %v in %+v", i, f, rep)
		}
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"raw_hop"`, `"round_trip"`, `"async_publish_per_second"`, `"ratios"`, `"goals"`, `"p50_us"`, `"per_second"`, `"cpu_us_per_op"`} {
		if !strings.Contains(string(b), key) {
			t.Fatalf("--json output lacks %s: %s", key, b)
		}
	}
	if !strings.Contains(rep.Decider, "configured policy") {
		t.Errorf("the default policy did not auto-allow demo__echo; the bench fell back to: %s", rep.Decider)
	}
}
