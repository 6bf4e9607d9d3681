package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// TestBenchRoundtripMeasuresEveryFigure runs a short `airlock bench
// roundtrip`: the auto-allowed demo__echo calls must complete through the
// policy and executor services, every figure must be present, and what the
// server counted per call must be the mix the floor is composed from.
func TestBenchRoundtripMeasuresEveryFigure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := config.Default()
	cfg.Dev.Sync = "100ms" // the rounds wait one sync interval before each part
	rep, err := runRoundtripBench(ctx, cfg, roundtripOptions{Samples: 50, Duration: 500 * time.Millisecond, Concurrency: 8, FloorOps: 600, Rounds: 3})
	if err != nil {
		t.Fatal(err)
	}
	figures := []float64{rep.RawHop.Latency.P50us, rep.RawHop.Latency.P99us, rep.RawHop.Throughput.PerSecond,
		rep.RoundTrip.Latency.P50us, rep.RoundTrip.Latency.P99us, rep.RoundTrip.Throughput.PerSecond,
		rep.Ratios.P50, rep.Ratios.P99, rep.Ratios.CPU, rep.FloorCPUus, rep.Ratios.CPUBare, rep.BareFloorCPUus,
		rep.RawHop.Throughput.CPUPerOpUs, rep.RoundTrip.Throughput.CPUPerOpUs,
		rep.Chain.Latency.P50us, rep.Chain.Latency.P99us, rep.Chain.Throughput.PerSecond, rep.Chain.Throughput.CPUPerOpUs,
		rep.Ratios.ChainP50, rep.Ratios.ChainP99, rep.Ratios.OverChainP50, rep.Ratios.OverChainP99, rep.Ratios.OverChainCPU,
		rep.MinimalChain.Latency.P50us, rep.MinimalChain.Latency.P99us, rep.MinimalChain.Throughput.PerSecond, rep.MinimalChain.Throughput.CPUPerOpUs,
		rep.EnvelopedChain.Latency.P50us, rep.EnvelopedChain.Latency.P99us, rep.EnvelopedChain.Throughput.PerSecond, rep.EnvelopedChain.Throughput.CPUPerOpUs,
		rep.Ratios.EnvelopedP50, rep.Ratios.EnvelopedCPU,
		rep.SpecChain.Latency.P50us, rep.SpecChain.Latency.P99us, rep.SpecChain.Throughput.PerSecond, rep.SpecChain.Throughput.CPUPerOpUs,
		rep.Ratios.SpecP50, rep.Ratios.SpecP99, rep.Ratios.SpecP50InTurn, rep.Ratios.SpecOverMinimalP50,
		rep.SpecCallChain.Latency.P50us, rep.SpecCallChain.Throughput.CPUPerOpUs,
		rep.SpecInBlocks.Spec.P50us, rep.SpecInBlocks.Hop.P50us, rep.Ratios.BlocksP50, rep.Ratios.BlocksP50InBlocks,
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
	// The minimal chain with SPEC's headers does the minimal chain's writes,
	// no more, its records as large.
	sc := rep.SpecChain.PerCall
	if got, want := writes(sc), writes(mc); !near(got[0], want[0]) || !near(got[1], want[1]) || !near(got[2], want[2]) || !near(got[3], want[3]) {
		t.Errorf("the server counted %v intake writes, event writes, policy and executor deliveries per minimal chain with SPEC's headers, %v per minimal chain", got, want)
	}
	if got, want := sc.EventBytes/sc.EventWrites, mc.EventBytes/mc.EventWrites; math.Abs(got-want) > 0.15*want {
		t.Errorf("the minimal chain with SPEC's headers stores %.0f B per event, the minimal chain %.0f B: its records should be as large", got, want)
	}
	// The chain with SPEC's headers does the chain floor's writes, its
	// records as large.
	scc := rep.SpecCallChain.PerCall
	if got, want := writes(scc), writes(cc); !near(got[0], want[0]) || !near(got[1], want[1]) || !near(got[2], want[2]) || !near(got[3], want[3]) {
		t.Errorf("the server counted %v intake writes, event writes, policy and executor deliveries per chain with SPEC's headers, %v per chain floor", got, want)
	}
	if got, want := scc.EventBytes/scc.EventWrites, cc.EventBytes/cc.EventWrites; math.Abs(got-want) > 0.15*want {
		t.Errorf("the chain with SPEC's headers stores %.0f B per event, the chain floor %.0f B: its records should be as large", got, want)
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
	// The p50 verdict's chain and hop are timed in blocks, as many calls each
	// as the other latencies.
	if rep.SpecInBlocks.Spec.N != 50 || rep.SpecInBlocks.Hop.N != 50 {
		t.Errorf("timed in blocks: %d calls of the minimal chain with SPEC's headers and %d hops, want 50 each", rep.SpecInBlocks.Spec.N, rep.SpecInBlocks.Hop.N)
	}
	// The CPU goal and bounds come from the rounds: every round measured
	// each side, the ratio and the bounds are medians of theirs.
	rs := rep.Rounds
	for name, xs := range map[string][]float64{"round trip": rs.RoundTripUs, "chain with SPEC's headers": rs.SpecCallUs, "minimal chain with SPEC's headers": rs.SpecChainUs,
		"floor": rs.FloorUs, "minimal floor": rs.MinimalFloorUs, "ratio": rs.Ratio, "bare floor": rs.BareFloorUs, "ratio to the bare floor": rs.BareRatio} {
		if len(xs) != 3 || slices.ContainsFunc(xs, func(x float64) bool { return !(x > 0) }) {
			t.Errorf("the rounds measured %s as %v, want 3 figures above 0", name, xs)
		}
	}
	if rs.SettleSeconds < 0.1 {
		t.Errorf("the rounds count %vs after each part, less than the store's sync interval", rs.SettleSeconds)
	}
	// The goal's floor is of operations whose messages carry SPEC's
	// headers, every operation measured in each round both ways.
	for name, f := range map[string]*messagingFloor{"with SPEC's headers": rep.Floor, "bare": rep.BareFloor} {
		for op, x := range map[string]float64{"sync publish": f.SyncPublish.CPUPerOpUs, "compare-and-append": f.CASPublish.CPUPerOpUs,
			"delivery + ack": f.PullDeliverAck.CPUPerOpUs, "delivery + ack from a work queue": f.PullDeliverAckWorkQueue.CPUPerOpUs} {
			if !(x > 0) {
				t.Errorf("the floor %s: %s measured %v µs", name, op, x)
			}
		}
	}
	if len(rs.floors) != 3 || len(rs.bareFloors) != 3 {
		t.Errorf("%d rounds of the floor with SPEC's headers and %d bare, want 3 each", len(rs.floors), len(rs.bareFloors))
	}
	if got, want := rep.Ratios.CPUBare, median(rs.BareRatio); got != want {
		t.Errorf("the CPU ratio to the bare floor is %v, not the median of the rounds' %v", got, rs.BareRatio)
	}
	// A round's background is the mean of the windows before and after it.
	if len(rs.IdleWindowsUsPerSecond) != 4 {
		t.Errorf("the background was measured %d times, want before the first round and after each of 3", len(rs.IdleWindowsUsPerSecond))
	} else {
		for i, idle := range rs.IdleUsPerSecond {
			if want := (rs.IdleWindowsUsPerSecond[i] + rs.IdleWindowsUsPerSecond[i+1]) / 2; math.Abs(idle-want) > 1e-6 {
				t.Errorf("round %d: background %v µs a second, not the mean of the windows before and after it (%v)", i, idle, want)
			}
		}
	}
	if rs.IdleWindowSeconds < 3*rs.SettleSeconds {
		t.Errorf("the background was measured over %vs, less than three sync intervals (%vs)", rs.IdleWindowSeconds, 3*rs.SettleSeconds)
	}
	// Each round measured the idle CPU it subtracts, and charged the round
	// trip, which allocates, for its collections.
	if len(rs.IdleUsPerSecond) != 3 || len(rs.GCRoundTripUs) != 3 || len(rs.GCFloorUs) != 3 ||
		slices.ContainsFunc(rs.GCRoundTripUs, func(x float64) bool { return !(x > 0) }) {
		t.Errorf("idle CPU %v, collections charged to the round trip %v and the floor %v: want 3 rounds each, the round trip's above 0", rs.IdleUsPerSecond, rs.GCRoundTripUs, rs.GCFloorUs)
	}
	if got, want := rep.Ratios.CPU, median(rs.Ratio); got != want {
		t.Errorf("the CPU ratio is %v, not the median of the rounds' %v", got, rs.Ratio)
	}
	if got, want := rep.FloorCPUus, median(rs.FloorUs); got != want {
		t.Errorf("the floor is %v µs, not the median of the rounds' %v", got, rs.FloorUs)
	}
	// The work is timed in each round, and the bounds are the medians of
	// the rounds' chain + work.
	if len(rs.WorkUs) != 3 || len(rs.work) != 3 || slices.ContainsFunc(rs.WorkUs, func(x float64) bool { return !(x > 0) }) {
		t.Errorf("the work of a call was timed as %v in the rounds, want 3 figures above 0", rs.WorkUs)
	}
	sums := func(chain []float64) []float64 {
		var out []float64
		for i := range chain {
			out = append(out, chain[i]+rs.WorkUs[i])
		}
		return out
	}
	if got, want := rep.CPUBound.CallUs, median(sums(rs.SpecCallUs)); math.Abs(got-want) > 1e-6 {
		t.Errorf("the CPU bound of today's writes is %v µs, not the median of the rounds' CPU of the chain with SPEC's headers plus their work (%v µs)", got, want)
	}
	if got, want := rep.CPUBound.MinimalUs, median(sums(rs.SpecChainUs)); math.Abs(got-want) > 1e-6 {
		t.Errorf("the minimal CPU bound is %v µs, not the median of the rounds' CPU of the minimal chain with SPEC's headers plus their work (%v µs)", got, want)
	}
	if got, want := rep.CPUBound.RoundTripUs, median(rs.RoundTripUs); got != want {
		t.Errorf("the CPU bound compares itself with a round trip of %v µs, not the rounds' median %v µs", got, want)
	}
	for i, r := range rs.Ratio {
		if math.Abs(r-rs.RoundTripUs[i]/rs.FloorUs[i]) > 1e-9 {
			t.Errorf("round %d: ratio %v, not its round trip %v ÷ its floor %v", i, r, rs.RoundTripUs[i], rs.FloorUs[i])
		}
		if f := rs.floors[i].CPUus(callMix); math.Abs(f-rs.FloorUs[i]) > 1e-9 {
			t.Errorf("round %d: the goal's floor %v is not that of the operations with SPEC's headers (%v)", i, rs.FloorUs[i], f)
		}
		if f := rs.bareFloors[i].CPUus(callMix); math.Abs(f-rs.BareFloorUs[i]) > 1e-9 {
			t.Errorf("round %d: the bare floor %v is not that of the bare operations (%v)", i, rs.BareFloorUs[i], f)
		}
	}
	var out strings.Builder
	printRoundtrip(&out, rep)
	for _, line := range []string{"minimal exactly-once chain", "minimal chain = ", "chain with airlock's headers", "minimal chain with SPEC's headers", "with SPEC's headers = ", "CPU lower bound",
		"the messaging floor with SPEC's headers (goal", "floor of the call, bare", "round trip ÷ bare floor", "background CPU per second"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("the output lacks %q:\n%s", line, out.String())
		}
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"raw_hop"`, `"round_trip"`, `"floor"`, `"floor_mix"`, `"measured_per_call"`, `"chain_floor"`, `"chain_p50_to_raw_hop"`, `"minimal_chain"`, `"minimal_chain_p50_to_raw_hop"`, `"raw_hop_in_turn_with_chains"`, `"enveloped_chain"`, `"enveloped_chain_p50_to_chain"`, `"minimal_chain_spec_headers"`, `"spec_chain_p50_to_raw_hop"`, `"cpu_rounds"`, `"floor_without_headers"`, `"cpu_per_call_to_floor_without_headers"`, `"idle_window_seconds"`, `"spec_chain_and_raw_hop_in_blocks"`, `"cpu_lower_bound"`, `"ratios"`, `"goals"`, `"p50_us"`, `"per_second"`, `"cpu_us_per_op"`} {
		if !strings.Contains(string(b), key) {
			t.Fatalf("--json output lacks %s: %s", key, b)
		}
	}
	if !strings.Contains(rep.Decider, "configured policy") {
		t.Errorf("the default policy did not auto-allow demo__echo; the bench fell back to: %s", rep.Decider)
	}
}

// TestTheSpecChainCarriesExactlyTheHeadersSPECRequires: every message of
// the lower bounds' chains has the CloudEvents attributes and traceparent,
// each compare-and-append its two expectations, the decision stored by its
// message id that id, and nothing else.
func TestTheSpecChainCarriesExactlyTheHeadersSPECRequires(t *testing.T) {
	hs, err := newEnvelopeHeaders(specWrites.prefix(), specHeaders)
	if err != nil {
		t.Fatal(err)
	}
	every := []string{envelope.HeaderCEID, envelope.HeaderCEType, envelope.HeaderCESource, envelope.HeaderCETime, envelope.HeaderCESpec, envelope.HeaderTraceparent}
	after := []string{envelope.HeaderExpectedLastSubjSeq, envelope.HeaderExpectedLastSubjSeqSubject}
	for _, tc := range []struct {
		name, typ, expect string
		msgID             bool
		want              []string
	}{
		{"the agent's request", subject.Requested, "", false, every},
		{"requested appended as the call's first event (today's writes)", subject.Requested, "c.>", false, append(slices.Clone(every), after...)},
		{"the decision stored with its message id (today's writes)", subject.Allowed, "", true, append(slices.Clone(every), envelope.HeaderMsgID)},
		{"the decision appended as the call's first event", subject.Allowed, "c.>", false, append(slices.Clone(every), after...)},
		{"started appended on the ledger", subject.Started, "c.exec.*", false, append(slices.Clone(every), after...)},
		{"completed appended after started", subject.Completed, "c.exec.*", false, append(slices.Clone(every), after...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hs.of(tc.typ, "call_x", tc.expect, 7, tc.msgID)
			got := slices.Sorted(maps.Keys(h))
			if want := slices.Sorted(slices.Values(tc.want)); !slices.Equal(got, want) {
				t.Errorf("headers %v, want %v", got, want)
			}
			for k, v := range h {
				if len(v) != 1 || v[0] == "" {
					t.Errorf("header %s is %q", k, v)
				}
			}
		})
	}
}

// TestTheRoundtripSaysAGoalIsOutOfReachOnlyWhenBothHopsShowIt: the p50
// verdict needs the minimal chain with SPEC's headers above the goal
// against the raw hop timed alone and timed in blocks; the CPU verdict needs
// both bounds above it; each says so with its numbers, and the missed
// goal's message says so too.
func TestTheRoundtripSaysAGoalIsOutOfReachOnlyWhenBothHopsShowIt(t *testing.T) {
	for _, tc := range []struct {
		name                       string
		alone, inBlocks            float64
		minimalToOwn, callToFloor  float64
		roundTripUs                float64
		p50OutOfReach, cpuOutReach bool
	}{
		{"above against both hops and both floors", 4, 3.6, 1.7, 1.8, 400, true, true},
		{"above against the hop alone only", 4, 3.4, 1.7, 1.5, 400, false, false},
		{"above against the hop in blocks only", 3.4, 4, 1.5, 1.7, 400, false, false},
		{"below both", 3, 2, 1.2, 1.3, 400, false, false},
		{"above both floors, but today's bound above the round trip itself", 3, 2, 1.7, 1.8, 350, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &roundtripReport{}
			r.Goals.P50Max, r.Goals.CPUMax = 3.5, 1.6
			r.RawHop.Latency.P50us, r.SpecInBlocks.Hop.P50us, r.SpecInBlocks.Spec.P50us = 400/tc.alone, 400/tc.inBlocks, 400
			r.Ratios.BlocksP50, r.Ratios.BlocksP50InBlocks = tc.alone, tc.inBlocks
			r.FloorCPUus = 200
			r.CPUBound = cpuBound{MinimalToOwnFloor: tc.minimalToOwn, CallToFloor: tc.callToFloor, MinimalUs: 170 * tc.minimalToOwn, MinimalFloorUs: 170, CallUs: 200 * tc.callToFloor, RoundTripUs: tc.roundTripUs}
			if got := strings.Contains(r.minimalVerdict(), "OUT OF REACH"); got != tc.p50OutOfReach {
				t.Errorf("p50 out of reach: %v, want %v: %s", got, tc.p50OutOfReach, r.minimalVerdict())
			}
			if got := strings.Contains(r.cpuVerdict(), "OUT OF REACH"); got != tc.cpuOutReach {
				t.Errorf("CPU out of reach: %v, want %v: %s", got, tc.cpuOutReach, r.cpuVerdict())
			}
			if tc.p50OutOfReach && !strings.Contains(r.minimalVerdict(), "400µs") {
				t.Errorf("the p50 verdict does not give the chain's figure: %s", r.minimalVerdict())
			}
			if tc.cpuOutReach && !strings.Contains(r.cpuVerdict(), fmt.Sprintf("%.0fµs", r.CPUBound.MinimalUs)) {
				t.Errorf("the CPU verdict does not give the bound's figure: %s", r.cpuVerdict())
			}
			// The goal is missed here (CPUMet false): not out of reach, it says missed.
			if !tc.cpuOutReach && !strings.HasPrefix(r.cpuVerdict(), "CPU goal missed, not out of reach") {
				t.Errorf("the CPU verdict of a missed goal not out of reach: %s", r.cpuVerdict())
			}
			// Both goals missed: the exit message says which are out of reach.
			r.Ratios.P50, r.Ratios.CPU, r.Goals.P99Met = 6, 2, true
			missed := r.Missed()
			if len(missed) != 2 {
				t.Fatalf("Missed() = %q, want the p50 and the CPU goals", missed)
			}
			if got := strings.Contains(missed[0], "out of reach"); got != tc.p50OutOfReach {
				t.Errorf("Missed() p50 = %q: naming the reach should be %v", missed[0], tc.p50OutOfReach)
			}
			if got := strings.Contains(missed[1], "out of reach"); got != tc.cpuOutReach {
				t.Errorf("Missed() CPU = %q: naming the reach should be %v", missed[1], tc.cpuOutReach)
			}
		})
	}
}
