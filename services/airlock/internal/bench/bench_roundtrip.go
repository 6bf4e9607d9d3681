package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/airlock-gate/airlock/services/shared/seal"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/executor"
	"github.com/airlock-gate/airlock/services/policy"
	"github.com/airlock-gate/airlock/services/shared/canon"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// roundtripOptions tune `airlock bench roundtrip`.
type roundtripOptions struct {
	JSON        bool
	Samples     int
	Duration    time.Duration
	Concurrency int
	CPUProfile  string
	// MemProfile: where to write the allocations of the round trip's
	// throughput run (MemProfile.base holds those before it).
	MemProfile string
	// ChainCPUProfile: where to write a CPU profile of the throughput run of
	// the chain with airlock's headers (to compare with CPUProfile's).
	ChainCPUProfile string
	FixedAllow      bool
	// FloorOps: operations counted for each of the floor's CPU figures,
	// over all rounds.
	FloorOps int
	// Rounds: how many rounds the CPU goal's figures are measured in
	// (bench_rounds.go).
	Rounds int
}

// latency is a distribution summary in microseconds.
type latency struct {
	P50us float64 `json:"p50_us"`
	P99us float64 `json:"p99_us"`
	N     int     `json:"samples"`
}

// throughput is a sustained rate.
type throughput struct {
	PerSecond   float64 `json:"per_second"`
	Completed   int     `json:"completed"`
	Seconds     float64 `json:"seconds"`
	Concurrency int     `json:"concurrency"`
	// CPUPerOpUs is the CPU time (user + system) the whole process — NATS
	// server, services and clients — spent per completed operation. On a
	// CPU-bound machine it, not latency, bounds the sustained rate.
	CPUPerOpUs float64 `json:"cpu_us_per_op"`
}

// roundtripReport holds every figure of one run.
type roundtripReport struct {
	Setup   string `json:"setup"`
	Decider string `json:"decider"`
	// FixedAllow: the round trip decided with a fixed allow, without the
	// Rego evaluation the bounds' chains do: the bounds then bound nothing.
	FixedAllow bool `json:"fixed_allow"`
	RawHop     struct {
		Latency    latency    `json:"latency"`
		Throughput throughput `json:"throughput"`
	} `json:"raw_hop"`
	RoundTrip struct {
		Latency    latency    `json:"latency"`
		Throughput throughput `json:"throughput"`
	} `json:"round_trip"`
	// Chain is the chain floor (newChainRig, callWrites): the call's
	// JetStream operations in sequence with bare nats.go, measured as the
	// round trip.
	Chain chainFigures `json:"chain_floor"`
	// MinimalChain is the minimal exactly-once chain (newChainRig,
	// minimalWrites), measured the same way.
	MinimalChain chainFigures `json:"minimal_chain"`
	// EnvelopedChain is the chain floor with airlock's envelope headers on
	// every message (newChainRig, envelopedWrites), measured the same way:
	// what the headers alone cost the writes.
	EnvelopedChain chainFigures `json:"enveloped_chain"`
	// SpecChain is the minimal exactly-once chain with the headers SPEC
	// and exactly-once require on every message (newChainRig, specWrites),
	// measured the same way: the chain the lower bounds are made of.
	SpecChain chainFigures `json:"minimal_chain_spec_headers"`
	// SpecCallChain is the chain floor with the same headers (newChainRig,
	// specCallWrites): today's writes in the CPU bound.
	SpecCallChain chainFigures `json:"chain_spec_headers"`
	// ChainHop is a raw hop timed in turn with the chains (one call of
	// each): the chains slow it, but it shares their moments of the
	// machine's load.
	ChainHop latency `json:"raw_hop_in_turn_with_chains"`
	// SpecInBlocks: a raw hop, the minimal chain with SPEC's headers, the
	// same with the work every call needs done at its place in the chain
	// (specWorkWrites), and the round trip, timed in blocks
	// (timeInBlocks): the p50 verdict's figures.
	SpecInBlocks struct {
		Hop  latency `json:"raw_hop"`
		Spec latency `json:"spec_chain"`
		// Work: the minimal chain with SPEC's headers and the work.
		Work latency `json:"spec_chain_with_work"`
		// RoundTrip: the round trip, which does that chain's writes and
		// work and more: a bound above it bounds nothing in that run.
		RoundTrip latency `json:"round_trip"`
		// Load: the machine's load average (one minute) as the blocks
		// began, -1 where the system does not say: a machine busier than
		// its cores stretches a chain doing more CPU more than the hop.
		Load float64 `json:"load_average_1m"`
		// WorkPerCall: what the server counted per chain with the work
		// over its warm-up: the minimal chain's writes, no more.
		WorkPerCall callCounts `json:"spec_chain_with_work_measured_per_call"`
	} `json:"spec_chain_and_raw_hop_in_blocks"`
	// CallWorkPerCall: what the server counted per chain of today's writes
	// with SPEC's headers doing the work (specCallWorkWrites), over its
	// warm-up: that chain's writes, no more.
	CallWorkPerCall callCounts `json:"spec_call_chain_with_work_measured_per_call"`
	// CPUBound is the CPU goal's lower bound (bench_bound.go).
	CPUBound cpuBound `json:"cpu_lower_bound"`
	// PerCall is what the server counted during the throughput run, per
	// completed call: the check that Mix is what a call really does.
	PerCall callCounts `json:"measured_per_call"`
	// Mix is the JetStream operations one call is made of (callMix).
	Mix floorMix `json:"floor_mix"`
	// Floor is every operation of the mixes alone, each message with the
	// headers SPEC requires of it, measured against the same server in the
	// rounds: each one's median over them. FloorCPUus is the median of the
	// rounds' floors (Rounds.FloorUs): the CPU goal's.
	Floor      *messagingFloor `json:"floor"`
	FloorCPUus float64         `json:"floor_cpu_us_per_call"`
	// BareFloor, BareFloorCPUus: the same with bare messages (the goal's
	// floor until issue 27's review), shown beside.
	BareFloor      *messagingFloor `json:"floor_without_headers"`
	BareFloorCPUus float64         `json:"floor_without_headers_cpu_us_per_call"`
	// Rounds: the round trip's and the chains' CPU per call and the floor,
	// measured in turn (bench_rounds.go); Ratios.CPU and the CPU bound are
	// medians of their per-round values.
	Rounds *cpuRounds `json:"cpu_rounds"`
	Ratios struct {
		P50 float64 `json:"p50"`
		P99 float64 `json:"p99"`
		// CPU: the median of the rounds' CPU per call ÷ floor; CPUBare:
		// the same against the bare floor.
		CPU     float64 `json:"cpu_per_call_to_floor"`
		CPUBare float64 `json:"cpu_per_call_to_floor_without_headers"`
		// ChainP50, ChainP99: the chain floor against the raw hop — the
		// least a call with these writes in sequence can be.
		ChainP50 float64 `json:"chain_p50_to_raw_hop"`
		ChainP99 float64 `json:"chain_p99_to_raw_hop"`
		// MinimalP50, MinimalP99: the minimal exactly-once chain against
		// the raw hop — the least any design with SPEC's guarantees can
		// be; MinimalP50InTurn: its p50 against ChainHop.
		MinimalP50       float64 `json:"minimal_chain_p50_to_raw_hop"`
		MinimalP99       float64 `json:"minimal_chain_p99_to_raw_hop"`
		MinimalP50InTurn float64 `json:"minimal_chain_p50_to_raw_hop_in_turn"`
		// SpecP50, SpecP99, SpecP50InTurn: the same of the minimal chain
		// with SPEC's headers — the latency's lower bound;
		// SpecOverMinimalP50: it against the bare minimal chain, what
		// SPEC's headers cost those writes.
		SpecP50            float64 `json:"spec_chain_p50_to_raw_hop"`
		SpecP99            float64 `json:"spec_chain_p99_to_raw_hop"`
		SpecP50InTurn      float64 `json:"spec_chain_p50_to_raw_hop_in_turn"`
		SpecOverMinimalP50 float64 `json:"spec_chain_p50_to_minimal_chain"`
		// BlocksP50, BlocksP50InBlocks: the minimal chain with SPEC's
		// headers timed in blocks against the raw hop timed alone and
		// against the one timed in blocks with it — the p50 verdict's.
		BlocksP50         float64 `json:"spec_chain_in_blocks_p50_to_raw_hop"`
		BlocksP50InBlocks float64 `json:"spec_chain_in_blocks_p50_to_raw_hop_in_blocks"`
		// WorkP50, WorkP50InBlocks: the same of the minimal chain with
		// SPEC's headers and the work (timed in blocks) — the p50
		// verdict's lower bound.
		WorkP50         float64 `json:"spec_chain_with_work_p50_to_raw_hop"`
		WorkP50InBlocks float64 `json:"spec_chain_with_work_p50_to_raw_hop_in_blocks"`
		// OverChainP50, OverChainP99, OverChainCPU: the round trip against
		// the chain floor — what airlock adds to its writes.
		OverChainP50 float64 `json:"round_trip_p50_to_chain"`
		OverChainP99 float64 `json:"round_trip_p99_to_chain"`
		OverChainCPU float64 `json:"round_trip_cpu_to_chain"`
		// EnvelopedP50, EnvelopedCPU: the chain with airlock's headers
		// against the chain floor.
		EnvelopedP50 float64 `json:"enveloped_chain_p50_to_chain"`
		EnvelopedCPU float64 `json:"enveloped_chain_cpu_to_chain"`
	} `json:"ratios"`
	Goals struct {
		P50Max float64 `json:"p50_max"`
		P99Max float64 `json:"p99_max"`
		CPUMax float64 `json:"cpu_max"`
		P50Met bool    `json:"p50_met"`
		P99Met bool    `json:"p99_met"`
		CPUMet bool    `json:"cpu_met"`
	} `json:"goals"`
}

// Missed names each goal the run missed.
func (r *roundtripReport) Missed() []string {
	var missed []string
	if !r.Goals.P50Met {
		msg := fmt.Sprintf("round trip p50 %.2f× the raw hop, goal ≤ %.1f×", r.Ratios.P50, r.Goals.P50Max)
		if r.p50OutOfReach() {
			msg += fmt.Sprintf(" (out of reach in this run: the minimal chain with SPEC's headers doing the work every call needs is %.2f× the raw hop, %.2f× one timed in blocks with it)", r.Ratios.WorkP50, r.Ratios.WorkP50InBlocks)
		}
		missed = append(missed, msg)
	}
	if !r.Goals.P99Met {
		missed = append(missed, fmt.Sprintf("round trip p99 %.2f× the raw hop, goal ≤ %.0f×", r.Ratios.P99, r.Goals.P99Max))
	}
	if !r.Goals.CPUMet {
		msg := fmt.Sprintf("CPU per call %.2f× the messaging floor, goal ≤ %.1f×", r.Ratios.CPU, r.Goals.CPUMax)
		if r.cpuOutOfReach() {
			b := r.CPUBound
			msg += fmt.Sprintf(" (out of reach in this run: with the least background the minimal writes with SPEC's headers doing the work are %.2f× their floor with the same headers, today's %.2f× theirs; with the work timed alone %.2f× and %.2f×)",
				b.LeastMinimalToOwnFloor, b.LeastCallToFloor, b.Alone.LeastMinimalToOwnFloor, b.Alone.LeastCallToFloor)
		}
		missed = append(missed, msg)
	}
	return missed
}

// chainFigures are a chain rig's figures.
type chainFigures struct {
	Latency    latency    `json:"latency"`
	Throughput throughput `json:"throughput"`
	Payload    int        `json:"payload_bytes"`
	// PerCall: what the server counted per chain, as for the round trip:
	// the check that the chain does the writes it stands for.
	PerCall callCounts `json:"measured_per_call"`
}

// minimalVerdict says what the minimal chain with SPEC's headers and the
// work every call needs shows about the p50 goal: a chain that alone takes
// more than the goal — against the raw hop timed alone, which the goal is
// about, and against one timed in blocks with it, which shares its moments
// of load — leaves no room for any design with its writes, headers and
// work; and what the writes alone take, and what a design without a
// separate `requested` could gain.
func (r *roundtripReport) minimalVerdict() string {
	hop, goal, b := r.RawHop.Latency.P50us, r.Goals.P50Max, r.SpecInBlocks
	saved := r.Chain.Latency.P50us - r.MinimalChain.Latency.P50us
	chains := fmt.Sprintf("the writes alone take %.0fµs = %.2f× the raw hop timed alone, %.2f× the one in blocks; the work adds %+.0fµs; the round trip in the same blocks %.0fµs; writing no separate requested would save %.0fµs p50 (%.2f× the raw hop) of today's chain (the chains timed in turn)",
		b.Spec.P50us, r.Ratios.BlocksP50, r.Ratios.BlocksP50InBlocks, b.Work.P50us-b.Spec.P50us, b.RoundTrip.P50us, saved, saved/hop)
	with := fmt.Sprintf("%.0fµs = %.2f× the raw hop timed alone (%.0fµs), %.2f× the one timed in blocks with it (%.0fµs)",
		b.Work.P50us, r.Ratios.WorkP50, hop, r.Ratios.WorkP50InBlocks, b.Hop.P50us)
	switch {
	case r.p50OutOfReach():
		return fmt.Sprintf("p50 goal OUT OF REACH in this run: the minimal chain with SPEC's headers doing the work every call needs takes %s, both above %.1f×, so no design that keeps these guarantees could meet it, whatever else its code costs; %s",
			with, goal, chains)
	case r.p50NoVerdict() != "":
		return fmt.Sprintf("%s, not out of reach: %s, so the chain bounds nothing in this run; %s", with, r.p50NoVerdict(), chains)
	case r.Ratios.WorkP50 > goal || r.Ratios.WorkP50InBlocks > goal:
		return fmt.Sprintf("%s: above the p50 goal of %.1f× against one hop only (the load may have changed since the hop was timed alone): not shown out of reach in this run; %s",
			with, goal, chains)
	}
	return fmt.Sprintf("%s: below the p50 goal of %.1f×, leaving %.0fµs (%.2f× the raw hop) for what a design does beyond its writes and this work; %s",
		with, goal, (goal-r.Ratios.WorkP50)*hop, goal-r.Ratios.WorkP50, chains)
}

// p50OutOfReach: the goal is missed, and the minimal chain with SPEC's
// headers and the work (timed in blocks) is above it against the raw hop
// timed alone and against the one timed in blocks with it, and nothing in
// the run takes the bound's meaning away (p50NoVerdict). A round trip that
// met the goal refutes the bound too: it does that chain and more.
func (r *roundtripReport) p50OutOfReach() bool {
	return !r.Goals.P50Met && r.Ratios.WorkP50 > r.Goals.P50Max && r.Ratios.WorkP50InBlocks > r.Goals.P50Max && r.p50NoVerdict() == ""
}

// p50NoVerdict says why the chain with the work bounds nothing in this
// run ("" when it does): the round trip decided without the Rego
// evaluation the chain does; or in the same blocks the round trip, which
// does the chain's writes and work and more, took less than it; or the
// chain took less than the same chain without the work — the blocks'
// load moved between them.
func (r *roundtripReport) p50NoVerdict() string {
	b := r.SpecInBlocks
	switch {
	case r.FixedAllow:
		return "the round trip decided with a fixed allow, without the Rego evaluation the chain does"
	case b.RoundTrip.P50us < b.Work.P50us:
		return fmt.Sprintf("the round trip, which does that chain's writes and work and more, took less in the same blocks (%.0fµs)", b.RoundTrip.P50us)
	case b.Work.P50us < b.Spec.P50us:
		return fmt.Sprintf("the chain doing the work took less than the same chain without it (%.0fµs): the load moved between their blocks", b.Spec.P50us)
	}
	return ""
}

// cpuOutOfReach: the goal is missed; both CPU bounds (the minimal writes
// with SPEC's headers against their floor with the same headers, today's
// against theirs; the medians of the rounds' ratios, each round's the
// smaller with either of its windows of background subtracted: the least
// the background can make them) are above the goal, made either way — the
// chains doing the work, and the chains without it plus the work timed
// alone (cpuBound.Alone); and nothing in the run refutes them
// (cpuNoVerdict).
func (r *roundtripReport) cpuOutOfReach() bool {
	b, goal := r.CPUBound, r.Goals.CPUMax
	return !r.Goals.CPUMet && b.LeastCallToFloor > goal && b.LeastMinimalToOwnFloor > goal &&
		b.Alone.LeastCallToFloor > goal && b.Alone.LeastMinimalToOwnFloor > goal && r.cpuNoVerdict() == ""
}

// cpuNoVerdict says why the CPU bounds bound nothing in this run ("" when
// they do): the round trip decided without the Rego evaluation the bounds
// include; or a bound costs more than the round trip, which does today's
// writes and the work and more, as the medians of the rounds' CPU per call
// or of their ratios to the same floor (a true lower bound, round by
// round, is below the round trip against any floor).
func (r *roundtripReport) cpuNoVerdict() string {
	b := r.CPUBound
	switch {
	case r.FixedAllow:
		return "the round trip decided with a fixed allow, without the Rego evaluation the bounds include"
	case b.CallUs > b.RoundTripUs || b.CallToFloor > r.Ratios.CPU:
		return fmt.Sprintf("today's writes with SPEC's headers doing the work cost more than the round trip itself, which does both and more (%.0fµs against %.0fµs, the medians of the rounds; %.2f× against %.2f× the floor, the medians of the rounds' ratios)",
			b.CallUs, b.RoundTripUs, b.CallToFloor, r.Ratios.CPU)
	case b.MinimalUs > b.RoundTripUs || b.Alone.CallUs > b.RoundTripUs:
		return fmt.Sprintf("a bound costs more than the round trip itself (the minimal writes doing the work %.0fµs, today's writes + the work alone %.0fµs, against %.0fµs)",
			b.MinimalUs, b.Alone.CallUs, b.RoundTripUs)
	}
	return ""
}

// cpuVerdict says what the CPU bounds show about the CPU goal.
func (r *roundtripReport) cpuVerdict() string {
	b, goal := r.CPUBound, r.Goals.CPUMax
	switch {
	case r.cpuOutOfReach():
		return fmt.Sprintf("CPU goal OUT OF REACH in this run: with the least background (each round's smaller ratio of its two windows'), the minimal writes with SPEC's headers doing the work are %.2f× their messaging floor with the same headers and today's writes doing it %.2f× today's, and with the work timed alone %.2f× and %.2f×, all above %.1f× in the median of the rounds' ratios (with the mean background, doing the work: %.2f× and %.2f×; %.0fµs and %.0fµs against floors of %.0fµs and %.0fµs): a call could not meet it with either, whatever its own code costs beyond this work",
			b.LeastMinimalToOwnFloor, b.LeastCallToFloor, b.Alone.LeastMinimalToOwnFloor, b.Alone.LeastCallToFloor, goal, b.MinimalToOwnFloor, b.CallToFloor, b.MinimalUs, b.CallUs, b.MinimalFloorUs, r.FloorCPUus)
	case r.cpuNoVerdict() != "":
		return fmt.Sprintf("CPU goal %s, not out of reach: %s, so the bounds (minimal %.2f×, today's %.2f× their floors) bound nothing in this run",
			r.cpuGoalWord(), r.cpuNoVerdict(), b.MinimalToOwnFloor, b.CallToFloor)
	case !r.Goals.CPUMet && b.LeastCallToFloor > goal && b.LeastMinimalToOwnFloor > goal:
		return fmt.Sprintf("CPU goal missed, not out of reach as far as this run shows: with the least background the chains doing the work are above %.1f× (minimal %.2f×, today's %.2f×), but the chains plus the work timed alone are not both (%.2f×, %.2f×), and the difference — the work where a call does it, its garbage included, against its own hot loop — is not shown to be one every design pays",
			goal, b.LeastMinimalToOwnFloor, b.LeastCallToFloor, b.Alone.LeastMinimalToOwnFloor, b.Alone.LeastCallToFloor)
	case b.CallToFloor > goal:
		return fmt.Sprintf("CPU goal %s, not out of reach: today's writes cannot meet the goal of %.1f× in this run (doing the work: the median of the rounds' ratios %.2f×; %.0fµs, the floor %.0fµs), whatever airlock's own code costs beyond this work; the minimal writes with SPEC's headers %s",
			r.cpuGoalWord(), goal, b.CallToFloor, b.CallUs, r.FloorCPUus, room((goal-b.MinimalToOwnFloor)*b.MinimalFloorUs))
	}
	return fmt.Sprintf("CPU goal %s, not out of reach: today's writes with SPEC's headers doing the work are %.2f× their floor, below the goal of %.1f×, and leave %.0fµs per call for airlock's own code beyond this work",
		r.cpuGoalWord(), b.CallToFloor, goal, goal*r.FloorCPUus-b.CallUs)
}

// room says what a bound leaves for a design's own code, from the median
// of the rounds' ratios (the bound's figure; the quotient of the medians
// can fall on the other side of the goal: 317/178 µs against 1.55× in one
// run).
func room(us float64) string {
	if us <= 0 {
		return "leave nothing for it"
	}
	return fmt.Sprintf("leave %.0fµs for it", us)
}

// cpuGoalWord is "met" or "missed", as the CPU goal was in this run.
func (r *roundtripReport) cpuGoalWord() string {
	if r.Goals.CPUMet {
		return "met"
	}
	return "missed"
}

// callCounts are server-side counts per completed call.
type callCounts struct {
	// IntakeWrites: requests stored in the intake stream.
	IntakeWrites float64 `json:"intake_writes"`
	// EventWrites: events stored in the events stream.
	EventWrites float64 `json:"event_writes"`
	// EventBytes: bytes the events stream stored (records: subject,
	// headers, body).
	EventBytes float64 `json:"event_bytes"`
	// PolicyDeliveries, ExecutorDeliveries: messages delivered to each
	// service's durable consumer.
	PolicyDeliveries   float64 `json:"policy_deliveries"`
	ExecutorDeliveries float64 `json:"executor_deliveries"`
}

// minus is what was counted from before to c, per one of n calls.
func (c callCounts) minus(before callCounts, n float64) callCounts {
	return callCounts{
		IntakeWrites: (c.IntakeWrites - before.IntakeWrites) / n, EventWrites: (c.EventWrites - before.EventWrites) / n,
		EventBytes:         (c.EventBytes - before.EventBytes) / n,
		PolicyDeliveries:   (c.PolicyDeliveries - before.PolicyDeliveries) / n,
		ExecutorDeliveries: (c.ExecutorDeliveries - before.ExecutorDeliveries) / n,
	}
}

// floorRecordOverhead is what a stored record holds besides a message's
// headers and body: the file store's record header and hash (22 B) and a
// subject of an event's typical length.
const floorRecordOverhead = 64

// callMix is what an auto-allowed call does on the bus (ARCHITECTURE.md,
// "An auto-allowed call"): the agent's request (a publish to the intake
// stream), the policy's delivery of it from that work queue and its ack,
// `requested` appended after the call's (empty) history, the decision
// stored, the executor's delivery of it and its ack, `started` (the claim)
// and the result each appended to the call's execution ledger; the events
// stream republishes each of its four events, and the agent's watcher
// receives one of them (it subscribes to the end types only). No KV write:
// the liveness record is kept only for tools that run longer than
// ack_wait/4. The bench's stream is on a single server, where the policy
// appends `requested` and the decision one after the other (an atomic
// batch costs milliseconds there: docs/benchmarks.md).
var callMix = floorMix{SyncPublish: 2, CASPublish: 3, PullDeliverAckWorkQueue: 1, PullDeliverAck: 1, RePublish: 3, RePublishDelivered: 1}

func newRoundtripCmd(env Env) *cobra.Command {
	o := roundtripOptions{}
	cmd := &cobra.Command{
		Use:   "roundtrip",
		Short: "Auto-allowed call round trip vs a raw JetStream hop and the messaging floor (goals: p50 ≤ 3.5×, p99 ≤ 6×, CPU ≤ 1.6×)",
		Long: `Starts an embedded NATS server (file store in a temp dir, fsync as dev.sync)
and, in this one process, measures:
  (a) a raw JetStream hop: publish to a stream, a durable consumer re-publishes,
      the reply is received — latency p50/p99 and sustained hops/s;
  (b) an auto-allowed round trip: the Go SDK submits demo__echo, the policy
      service allows it, the executor runs it, the SDK receives the result —
      latency p50/p99, sustained calls/s and the process's CPU per call, with
      what the server stored and delivered per call;
  (c) the messaging floor: each JetStream operation the call is made of,
      alone, each message with the headers SPEC §3 requires of it (and
      bare, shown beside), and their sum for one call, in --rounds rounds
      with the round trip's and the chains' CPU per call;
  (d) the chain floor (the call's writes in sequence with bare nats.go),
      the minimal exactly-once chain (only the writes no design keeping
      airlock's guarantees can skip), bare and with the headers SPEC and
      exactly-once require, timed as the round trip, and lower bounds of the
      p50 (that chain with each party doing the work every call does — Rego,
      seal, encoding — at its place, timed in blocks with a raw hop and the
      round trip) and of the CPU per call (that chain and today's writes,
      each doing the same work, in the rounds; beside them each chain without
      the work plus the work timed alone — "out of reach" needs both);
and prints the ratios against the goals: round trip p50 ≤ 3.5× and
p99 ≤ 6× the raw hop; CPU per call ≤ 1.6× the floor (the median of the
rounds' ratios, against the floor with SPEC's headers). Exit status 1
when a goal is missed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A CPU profile covers the round trip's throughput run only (measure).
			return benchRun(cmd, env, "", o.JSON, func(ctx context.Context, cfg config.Config) (*roundtripReport, error) {
				return runRoundtripBench(ctx, cfg, o)
			}, printRoundtrip)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.JSON, "json", false, "print one JSON object with every figure")
	f.IntVar(&o.Samples, "samples", 2000, "sequential calls timed for the latency figures")
	f.DurationVar(&o.Duration, "duration", 3*time.Second, "how long each sustained-throughput run lasts")
	f.IntVar(&o.Concurrency, "concurrency", 64, "calls in flight during the throughput runs")
	f.IntVar(&o.FloorOps, "floor-ops", 40000, "operations counted for each of the messaging floor's CPU figures, over all rounds")
	f.IntVar(&o.Rounds, "rounds", 5, "rounds of the CPU goal: each runs the round trip and four chains (SPEC's headers; today's writes and the minimal ones, without the work and doing it) for a share of --duration, then each floor operation")
	f.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the round trip's throughput run (nothing else) to this file")
	f.StringVar(&o.MemProfile, "memprofile", "", "write the allocations up to the end of the round trip's throughput run to this file, and those before it to FILE.base (go tool pprof -diff_base FILE.base FILE)")
	f.StringVar(&o.ChainCPUProfile, "chain-cpuprofile", "", "write a CPU profile of the throughput run of the chain with airlock's headers (nothing else) to this file (go tool pprof -diff_base FILE CPUPROFILE)")
	f.BoolVar(&o.FixedAllow, "fixed-allow", false, "decide with a fixed allow instead of the configured policy (leaves Rego evaluation out of the figures)")
	return cmd
}

func runRoundtripBench(ctx context.Context, cfg config.Config, o roundtripOptions) (*roundtripReport, error) {
	if o.Samples < 10 || o.Concurrency < 1 || o.Duration <= 0 || o.Rounds < 1 {
		return nil, errors.New("--samples must be at least 10, --concurrency and --rounds at least 1, --duration positive")
	}
	syncEvery, err := config.ParseSync(cfg.Dev.Sync)
	if err != nil {
		return nil, err
	}
	dir, url, stop, err := startBenchServer(cfg)
	if err != nil {
		return nil, err
	}
	defer stop()
	cfg.NATS.URL = url
	cfg.Dev.DataDir = dir
	cfg.Executor.ToolsFile = "" // demo tools only
	cfg.Executor.Sandbox = ""
	cfg.Security.DecisionKey, cfg.Security.FrontendKey = seal.NewKey().Hex(), seal.NewKey().Hex()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	rep := &roundtripReport{Setup: fmt.Sprintf("embedded NATS, file store, fsync %s; policy and executor in-process; Go SDK as the agent", config.SyncText(cfg.Dev.Sync))}
	rep.Goals.P50Max, rep.Goals.P99Max, rep.Goals.CPUMax = 3.5, 6, 1.6
	rep.Mix = callMix

	raw, err := benchRawHop(ctx, url, o)
	if err != nil {
		return nil, fmt.Errorf("raw hop: %w", err)
	}
	rep.RawHop.Latency, rep.RawHop.Throughput = raw.lat, raw.tput

	services := newBenchServices(ctx, cfg, log)
	defer services.stop()
	rtOp, decider, count, closeRT, err := newRoundTripRig(ctx, services, cfg, o)
	if err != nil {
		return nil, fmt.Errorf("round trip: %w", err)
	}
	defer closeRT()
	rt, counts, err := measure(ctx, o, rtOp, count)
	if err != nil {
		return nil, fmt.Errorf("round trip: %w", err)
	}
	rep.Decider, rep.PerCall, rep.FixedAllow = decider.name, counts, decider.fixed
	rep.RoundTrip.Latency, rep.RoundTrip.Throughput = rt.lat, rt.tput

	// The floor's messages are as large as the call's events: a stored
	// record less what the store adds to any message (its subject and
	// record header, about floorRecordOverhead bytes).
	payload := 256
	if counts.EventWrites > 0 {
		payload = max(payload, int(counts.EventBytes/counts.EventWrites)-floorRecordOverhead)
	}
	hop, chains, chainOps, stopChains, err := benchChains(ctx, url, o, payload, callWrites, minimalWrites, envelopedWrites, specWrites, specCallWrites)
	if err != nil {
		return nil, fmt.Errorf("chain floor and minimal exactly-once chains: %w", err)
	}
	defer stopChains()
	rep.ChainHop = hop
	rep.Chain, rep.MinimalChain, rep.EnvelopedChain, rep.SpecChain, rep.SpecCallChain = chains[0], chains[1], chains[2], chains[3], chains[4]
	work, err := benchWork(ctx, cfg)
	if err != nil {
		return nil, err
	}
	workOp, workPerCall, stopWork, err := newWorkChain(ctx, url, o, payload, specWorkWrites, work)
	if err != nil {
		return nil, fmt.Errorf("minimal chain with SPEC's headers and the work: %w", err)
	}
	defer stopWork()
	callWorkOp, callWorkPerCall, stopCallWork, err := newWorkChain(ctx, url, o, payload, specCallWorkWrites, work)
	if err != nil {
		return nil, fmt.Errorf("chain with SPEC's headers and the work: %w", err)
	}
	defer stopCallWork()
	rep.CallWorkPerCall = callWorkPerCall
	rep.SpecInBlocks.Load = loadAverage()
	blocks, err := timeInBlocks(ctx, o, chainOps[0], chainOps[4], workOp, rtOp)
	if err != nil {
		return nil, fmt.Errorf("minimal chain with SPEC's headers in blocks with a raw hop: %w", err)
	}
	rep.SpecInBlocks.Hop, rep.SpecInBlocks.Spec, rep.SpecInBlocks.Work, rep.SpecInBlocks.RoundTrip = blocks[0], blocks[1], blocks[2], blocks[3]
	rep.SpecInBlocks.WorkPerCall = workPerCall
	rounds, err := runCPURounds(ctx, url, o, payload, settleWait(syncEvery), roundLoads{roundTrip: rtOp, specCall: chainOps[5], specChain: chainOps[4],
		specCallWork: callWorkOp, specWork: workOp, work: work})
	if err != nil {
		return nil, err
	}
	rep.setCPU(rounds)
	rep.Ratios.P50 = rep.RoundTrip.Latency.P50us / rep.RawHop.Latency.P50us
	rep.Ratios.P99 = rep.RoundTrip.Latency.P99us / rep.RawHop.Latency.P99us
	rep.Ratios.ChainP50 = rep.Chain.Latency.P50us / rep.RawHop.Latency.P50us
	rep.Ratios.ChainP99 = rep.Chain.Latency.P99us / rep.RawHop.Latency.P99us
	rep.Ratios.MinimalP50 = rep.MinimalChain.Latency.P50us / rep.RawHop.Latency.P50us
	rep.Ratios.MinimalP99 = rep.MinimalChain.Latency.P99us / rep.RawHop.Latency.P99us
	rep.Ratios.MinimalP50InTurn = rep.MinimalChain.Latency.P50us / rep.ChainHop.P50us
	rep.Ratios.SpecP50 = rep.SpecChain.Latency.P50us / rep.RawHop.Latency.P50us
	rep.Ratios.SpecP99 = rep.SpecChain.Latency.P99us / rep.RawHop.Latency.P99us
	rep.Ratios.SpecP50InTurn = rep.SpecChain.Latency.P50us / rep.ChainHop.P50us
	rep.Ratios.SpecOverMinimalP50 = rep.SpecChain.Latency.P50us / rep.MinimalChain.Latency.P50us
	rep.Ratios.BlocksP50 = rep.SpecInBlocks.Spec.P50us / rep.RawHop.Latency.P50us
	rep.Ratios.BlocksP50InBlocks = rep.SpecInBlocks.Spec.P50us / rep.SpecInBlocks.Hop.P50us
	rep.Ratios.WorkP50 = rep.SpecInBlocks.Work.P50us / rep.RawHop.Latency.P50us
	rep.Ratios.WorkP50InBlocks = rep.SpecInBlocks.Work.P50us / rep.SpecInBlocks.Hop.P50us
	rep.Ratios.OverChainP50 = rep.RoundTrip.Latency.P50us / rep.Chain.Latency.P50us
	rep.Ratios.OverChainP99 = rep.RoundTrip.Latency.P99us / rep.Chain.Latency.P99us
	rep.Ratios.EnvelopedP50 = rep.EnvelopedChain.Latency.P50us / rep.Chain.Latency.P50us
	if rep.Chain.Throughput.CPUPerOpUs > 0 {
		rep.Ratios.OverChainCPU = rep.RoundTrip.Throughput.CPUPerOpUs / rep.Chain.Throughput.CPUPerOpUs
		rep.Ratios.EnvelopedCPU = rep.EnvelopedChain.Throughput.CPUPerOpUs / rep.Chain.Throughput.CPUPerOpUs
	}
	rep.Goals.P50Met = rep.Ratios.P50 <= rep.Goals.P50Max
	rep.Goals.P99Met = rep.Ratios.P99 <= rep.Goals.P99Max
	return rep, nil
}

// setCPU sets the CPU goal's figures from the rounds: the goal's ratio
// (the median of the rounds'), whether it is met, and the bounds.
func (r *roundtripReport) setCPU(rs *cpuRounds) {
	r.Rounds = rs
	r.Floor, r.FloorCPUus = rs.floor(), median(rs.FloorUs)
	r.BareFloor, r.BareFloorCPUus = rs.bareFloor(), median(rs.BareFloorUs)
	r.CPUBound.bound(rs)
	r.Ratios.CPU, r.Ratios.CPUBare = median(rs.Ratio), median(rs.BareRatio)
	r.Goals.CPUMet = r.Ratios.CPU <= r.Goals.CPUMax
}

type measured struct {
	lat  latency
	tput throughput
}

// measure times samples sequential ops, then runs o.Concurrency loops of op
// for o.Duration and counts completions. When count is given, the
// difference of what it reads before and after the throughput run is
// returned per completed op.
func measure(ctx context.Context, o roundtripOptions, op func(ctx context.Context) error, count func() (callCounts, error)) (measured, callCounts, error) {
	lat, err := timeInTurn(ctx, o, op)
	if err != nil {
		return measured{}, callCounts{}, err
	}
	return measureRate(ctx, o, op, count, lat[0])
}

// timeInTurn times o.Samples sequential calls of each op, one of each in
// turn, after a warm-up: ops compared with each other see the same moments
// of a shared machine's load.
func timeInTurn(ctx context.Context, o roundtripOptions, ops ...func(ctx context.Context) error) ([]latency, error) {
	for i := 0; i < o.Samples/10+20; i++ { // warm up connections, consumers, caches
		for _, op := range ops {
			if err := op(ctx); err != nil {
				return nil, err
			}
		}
	}
	lat := make([][]time.Duration, len(ops))
	for i := 0; i < o.Samples; i++ {
		for j, op := range ops {
			t0 := time.Now()
			if err := op(ctx); err != nil {
				return nil, err
			}
			lat[j] = append(lat[j], time.Since(t0))
		}
	}
	out := make([]latency, len(ops))
	for j := range lat {
		out[j] = summarize(lat[j])
	}
	return out, nil
}

// blockCalls is how many calls of one op timeInBlocks makes before the
// next op's.
const blockCalls = 50

// timeInBlocks times o.Samples sequential calls of each op, in blocks of
// blockCalls calls of one op then of the next (and one more before each
// block, not counted, that follows the other op): the ops
// share the moments of a shared machine's load as in timeInTurn, but each
// call follows one of its own, not the tail of another op's (a raw hop
// timed right after a chain waits on what the chain's parties still do).
func timeInBlocks(ctx context.Context, o roundtripOptions, ops ...func(ctx context.Context) error) ([]latency, error) {
	lat := make([][]time.Duration, len(ops))
	for i := 0; i < o.Samples; i += blockCalls {
		for j, op := range ops {
			for k := 0; k < blockCalls+1 && i+k < o.Samples+1; k++ {
				t0 := time.Now()
				if err := op(ctx); err != nil {
					return nil, err
				}
				if k > 0 { // the block's first call follows another op's
					lat[j] = append(lat[j], time.Since(t0))
				}
			}
		}
	}
	out := make([]latency, len(ops))
	for j := range lat {
		out[j] = summarize(lat[j])
	}
	return out, nil
}

// measureRate is measure's throughput run of op, with lat its latency.
func measureRate(ctx context.Context, o roundtripOptions, op func(ctx context.Context) error, count func() (callCounts, error), lat latency) (measured, callCounts, error) {
	m := measured{lat: lat}
	var before callCounts
	if count != nil {
		var err error
		if before, err = count(); err != nil {
			return m, callCounts{}, err
		}
		if o.CPUProfile != "" {
			stop, err := StartCPUProfile(o.CPUProfile)
			if err != nil {
				return m, callCounts{}, err
			}
			defer stop()
		}
		if o.MemProfile != "" {
			if err := writeProfile(o.MemProfile+".base", "allocs"); err != nil {
				return m, callCounts{}, err
			}
		}
	}
	var done atomic.Int64
	var firstErr error
	var once sync.Once
	runCtx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	cpu0 := processCPU()
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < o.Concurrency; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for runCtx.Err() == nil {
				opCtx, opCancel := context.WithTimeout(ctx, 30*time.Second)
				err := op(opCtx)
				opCancel()
				if err != nil {
					once.Do(func() { firstErr = err })
					cancel()
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	cpu := processCPU() - cpu0
	if firstErr != nil {
		return m, callCounts{}, firstErr
	}
	if count != nil && o.MemProfile != "" {
		if err := writeProfile(o.MemProfile, "allocs"); err != nil {
			return m, callCounts{}, err
		}
	}
	m.tput = throughput{PerSecond: float64(done.Load()) / elapsed, Completed: int(done.Load()), Seconds: elapsed, Concurrency: o.Concurrency}
	n := float64(done.Load())
	if n > 0 {
		m.tput.CPUPerOpUs = float64(cpu.Microseconds()) / n
	}
	var per callCounts
	if count != nil && n > 0 {
		after, err := count()
		if err != nil {
			return m, callCounts{}, err
		}
		per = after.minus(before, n)
	}
	return m, per, nil
}

// loadAverage is the machine's load average over the last minute, -1
// where /proc/loadavg cannot say.
func loadAverage() float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	first, _, _ := strings.Cut(string(raw), " ")
	v, err := strconv.ParseFloat(first, 64)
	if err != nil {
		return -1
	}
	return v
}

// processCPU is the user + system CPU time this process has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchRawHop times the raw hop (newHopRig) as measure does.
func benchRawHop(ctx context.Context, url string, o roundtripOptions) (measured, error) {
	hop, stop, err := newHopRig(ctx, url, "BENCH_HOP", make([]byte, 256))
	if err != nil {
		return measured{}, err
	}
	defer stop()
	m, _, err := measure(ctx, o, hop, nil)
	return m, err
}

// benchChains times a chain rig (newChainRig) of each writes as measure
// does the round trip: the same samples one at a time, in turn with each
// other and with a raw hop (hop: so their ratios and differences are not
// the machine's load changing between them), then the same calls in
// flight, one chain after the other. ops are the hop's call, then each
// chain's, for what follows, until stop.
func benchChains(ctx context.Context, url string, o roundtripOptions, payload int, writes ...chainWrites) (hop latency, figures []chainFigures, ops []func(context.Context) error, stop func(), err error) {
	var cleanup rigCleanup
	stop = cleanup.run
	defer func() {
		if err != nil {
			stop()
		}
	}()
	hopOp, stopHop, err := newHopRig(ctx, url, "CHAIN_HOP", make([]byte, 256))
	if err != nil {
		return latency{}, nil, nil, nil, fmt.Errorf("raw hop: %w", err)
	}
	cleanup.add(stopHop)
	ops = []func(context.Context) error{hopOp}
	counts := make([]func() (callCounts, error), len(writes))
	for i, w := range writes {
		op, count, stopChain, err := newChainRig(ctx, url, make([]byte, payload), w, nil)
		if err != nil {
			return latency{}, nil, nil, nil, fmt.Errorf("%s: %w", w.prefix(), err)
		}
		cleanup.add(stopChain)
		ops, counts[i] = append(ops, op), count
	}
	o.CPUProfile, o.MemProfile = "", "" // the profiles are the round trip's
	lat, err := timeInTurn(ctx, o, ops...)
	if err != nil {
		return latency{}, nil, nil, nil, err
	}
	figures = make([]chainFigures, len(writes))
	for i := range writes {
		o := o
		if writes[i] == envelopedWrites {
			o.CPUProfile = o.ChainCPUProfile
		}
		m, perCall, err := measureRate(ctx, o, ops[i+1], counts[i], lat[i+1])
		if err != nil {
			return latency{}, nil, nil, nil, fmt.Errorf("%s: %w", writes[i].prefix(), err)
		}
		figures[i] = chainFigures{Latency: m.lat, Throughput: m.tput, Payload: payload, PerCall: perCall}
	}
	return lat[0], figures, ops, stop, nil
}

// newWorkChain is a chain with SPEC's headers doing the work of a call at
// its place (specWorkWrites, specCallWorkWrites), warmed up as timeInTurn
// warms the others; perCall is what the server counted per chain over the
// warm-up.
func newWorkChain(ctx context.Context, url string, o roundtripOptions, payload int, writes chainWrites, work []workPiece) (op func(context.Context) error, perCall callCounts, stop func(), err error) {
	op, count, stop, err := newChainRig(ctx, url, make([]byte, payload), writes, work)
	if err != nil {
		return nil, callCounts{}, nil, err
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	before, err := count()
	if err != nil {
		return nil, callCounts{}, nil, err
	}
	n := o.Samples/10 + 20
	for range n {
		if err := op(ctx); err != nil {
			return nil, callCounts{}, nil, err
		}
	}
	after, err := count()
	if err != nil {
		return nil, callCounts{}, nil, err
	}
	return op, after.minus(before, float64(n)), stop, nil
}

// benchWork is the work of a call the round trip completed on the server
// at cfg.NATS.URL (callWork).
func benchWork(ctx context.Context, cfg config.Config) ([]workPiece, error) {
	nc, err := nats.Connect(cfg.NATS.URL)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	work, err := callWork(ctx, nc, cfg)
	if err != nil {
		return nil, fmt.Errorf("the work of a call: %w", err)
	}
	return work, nil
}

// newRoundTripRig runs the policy and executor services in services and
// returns op, one demo__echo call submitted through the SDK and waited
// for; count reads what the server counted so far (serverCounts); closeRig
// ends the agent's connection (services.stop the services).
// rigDecider is what decides the round trip's calls: its name, and
// whether it is a fixed allow (no Rego evaluation) rather than the
// configured policy.
type rigDecider struct {
	name  string
	fixed bool
}

func newRoundTripRig(ctx context.Context, services *benchServices, cfg config.Config, o roundtripOptions) (op func(context.Context) error, decider rigDecider, count func() (callCounts, error), closeRig func(), err error) {
	var cleanup rigCleanup
	defer func() {
		if err != nil {
			cleanup.run()
		}
	}()
	stopPolicy, err := services.start("policy", func(d svc.Deps) (svc.Service, error) { return policy.NewFromConfig(ctx, d) })
	if err != nil {
		return nil, rigDecider{}, nil, nil, err
	}
	if _, err := services.start("executor", func(d svc.Deps) (svc.Service, error) { return executor.NewFromConfig(ctx, d) }); err != nil {
		return nil, rigDecider{}, nil, nil, err
	}

	nc, err := nats.Connect(cfg.NATS.URL)
	if err != nil {
		return nil, rigDecider{}, nil, nil, err
	}
	cleanup.add(nc.Close)
	client, op, closeOp, err := roundTripOp(nc, cfg, "bench")
	if err != nil {
		return nil, rigDecider{}, nil, nil, err
	}
	cleanup.add(closeOp)

	decider.name = "the configured policy (default: policies/ Rego)"
	action, err := probeDecision(ctx, nc, client)
	if err != nil {
		return nil, rigDecider{}, nil, nil, err
	}
	if action != subject.Allowed || o.FixedAllow {
		// The policy in force does not auto-allow demo__echo (or the caller
		// asked to leave policy evaluation out): measure the same path with
		// a fixed decision so the figures stay comparable.
		stopPolicy()
		decider = rigDecider{name: fmt.Sprintf("fixed allow (the configured policy answered %s for demo__echo)", action), fixed: true}
		if o.FixedAllow {
			decider.name = "fixed allow (--fixed-allow)"
		}
		if _, err := services.start("policy-fixed", func(d svc.Deps) (svc.Service, error) { return policy.New(d, allowAll{}) }); err != nil {
			return nil, rigDecider{}, nil, nil, err
		}
	}
	admin, err := jetstream.New(nc)
	if err != nil {
		return nil, rigDecider{}, nil, nil, err
	}
	return op, decider, func() (callCounts, error) { return serverCounts(ctx, admin, cfg) }, cleanup.run, nil
}

// benchServices runs services in this process for a bench, each with its
// own connection, until stop.
type benchServices struct {
	ctx    context.Context
	cfg    config.Config
	log    *slog.Logger
	runCtx context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newBenchServices(ctx context.Context, cfg config.Config, log *slog.Logger) *benchServices {
	// A benchmark drives one agent at thousands of calls a second, which the
	// per-agent budget at the policy's intake is there to refuse.
	cfg.Limits.AgentCallsPerMinute, cfg.Limits.AgentRequestBytesPerMinute = math.MaxInt32, math.MaxInt
	runCtx, cancel := context.WithCancel(ctx)
	return &benchServices{ctx: ctx, cfg: cfg, log: log, runCtx: runCtx, cancel: cancel}
}

// start builds a service with mk, runs it until the returned cancel or
// stop is called, and returns once it is ready.
func (b *benchServices) start(name string, mk func(svc.Deps) (svc.Service, error)) (context.CancelFunc, error) {
	deps, err := svc.Connect(b.ctx, b.cfg, b.log, "airlock-bench-"+name, true)
	if err != nil {
		return nil, err
	}
	s, err := mk(deps)
	if err != nil {
		deps.NC.Close()
		return nil, err
	}
	runCtx, cancel := context.WithCancel(b.runCtx)
	ended, err := svc.Start(runCtx, s, time.Minute)
	if err != nil {
		cancel()
		deps.NC.Close()
		return nil, err
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer deps.NC.Close()
		err := <-ended
		if err == nil && runCtx.Err() == nil {
			err = errors.New("stopped on its own while the bench runs")
		}
		if err != nil {
			b.log.Error("service stopped", "service", name, "err", err)
		}
	}()
	return cancel, nil
}

// stop ends every service and waits for them.
func (b *benchServices) stop() {
	b.cancel()
	b.wg.Wait()
}

// serverCounts reads how many messages the intake and events streams have
// stored and the policy and executor consumers have delivered so far.
func serverCounts(ctx context.Context, js jetstream.JetStream, cfg config.Config) (callCounts, error) {
	return countsOf(ctx, js, cfg.Intake.Name, cfg.Stream.Name, policy.Durable, executor.Durable)
}

// countsOf reads what the intake and events streams have stored and what
// the policy's and the executor's durable consumers have delivered.
func countsOf(ctx context.Context, js jetstream.JetStream, intake, events, policyDurable, executorDurable string) (callCounts, error) {
	var c callCounts
	for _, s := range []struct {
		name string
		out  *float64
	}{{intake, &c.IntakeWrites}, {events, &c.EventWrites}} {
		st, err := js.Stream(ctx, s.name)
		if err != nil {
			return c, fmt.Errorf("stream %s: %w", s.name, err)
		}
		*s.out = float64(st.CachedInfo().State.LastSeq)
		if s.name == events {
			c.EventBytes = float64(st.CachedInfo().State.Bytes)
		}
	}
	for _, d := range []struct {
		stream, durable string
		out             *float64
	}{{intake, policyDurable, &c.PolicyDeliveries}, {events, executorDurable, &c.ExecutorDeliveries}} {
		cons, err := js.Consumer(ctx, d.stream, d.durable)
		if err != nil {
			return c, fmt.Errorf("consumer %s: %w", d.durable, err)
		}
		*d.out = float64(cons.CachedInfo().Delivered.Consumer)
	}
	return c, nil
}

// roundTripOp is one auto-allowed round trip as agent: the SDK's fast path
// submits demo__echo and waits for its result.
func roundTripOp(nc *nats.Conn, cfg config.Config, agent string) (*airlock.Client, func(context.Context) error, func(), error) {
	client, err := airlock.New(nc, agent, airlock.WithStream(cfg.Stream.Name))
	if err != nil {
		return nil, nil, nil, err
	}
	w, err := client.Watch()
	if err != nil {
		return nil, nil, nil, err
	}
	args := map[string]any{"text": "hello from the bench"}
	op := func(ctx context.Context) error {
		out, err := w.DoFast(ctx, airlock.Call{Tool: "demo__echo", Args: args})
		if err != nil {
			return err
		}
		if !out.Completed() {
			return fmt.Errorf("call %s ended %s: %s", out.CallID, out.Status, out.Reason)
		}
		return nil
	}
	return client, op, func() { _ = w.Close() }, nil
}

// probeDecision submits one demo__echo call and returns the type of the
// policy's decision event about it.
func probeDecision(ctx context.Context, nc *nats.Conn, client *airlock.Client) (string, error) {
	decisions := make(chan string, 4)
	sub, err := nc.Subscribe(subject.OfAgent("bench"), func(m *nats.Msg) {
		if p, err := subject.Parse(m.Subject); err == nil && p.Call == "bench-probe" {
			switch p.Type {
			case subject.Allowed, subject.Denied, subject.ApprovalRequested, subject.Invalid:
				decisions <- p.Type
			}
		}
	})
	if err != nil {
		return "", err
	}
	defer sub.Unsubscribe()
	if _, err := client.Submit(ctx, airlock.Call{ID: "bench-probe", Tool: "demo__echo", Args: map[string]any{"text": "probe"}}); err != nil {
		return "", err
	}
	select {
	case typ := <-decisions:
		return typ, nil
	case <-time.After(30 * time.Second):
		return "", errors.New("the policy service did not decide a probe call within 30s")
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// allowAll is the bench's fallback decider: it allows every call, bound to
// its arguments' digest like a real decision.
type allowAll struct{}

func (allowAll) Decide(_ context.Context, call *airlockv1.ToolCall) *airlockv1.Decision {
	d, err := canon.Digest(call.GetArguments())
	if err != nil {
		return &airlockv1.Decision{Action: airlockv1.Action_ACTION_DENY, Reason: err.Error()}
	}
	return &airlockv1.Decision{Action: airlockv1.Action_ACTION_ALLOW, Reason: "bench: fixed allow", RuleId: "bench", ArgumentsDigest: d}
}

func printRoundtrip(w io.Writer, r *roundtripReport) {
	ok := func(b bool) string {
		if b {
			return "met"
		}
		return "MISSED"
	}
	fmt.Fprintf(w, "airlock bench roundtrip — %s\ndecider: %s\n\n", r.Setup, r.Decider)
	fmt.Fprintf(w, "%-26s %10s %10s %12s %12s\n", "", "p50", "p99", "per second", "CPU per op")
	fmt.Fprintf(w, "%-26s %8.0fµs %8.0fµs %12.0f %10.0fµs  (%d in flight)\n", "raw JetStream hop", r.RawHop.Latency.P50us, r.RawHop.Latency.P99us, r.RawHop.Throughput.PerSecond, r.RawHop.Throughput.CPUPerOpUs, r.RawHop.Throughput.Concurrency)
	fmt.Fprintf(w, "%-26s %8.0fµs %8.0fµs %12.0f %10.0fµs  (%d in flight)\n", "auto-allowed round trip", r.RoundTrip.Latency.P50us, r.RoundTrip.Latency.P99us, r.RoundTrip.Throughput.PerSecond, r.RoundTrip.Throughput.CPUPerOpUs, r.RoundTrip.Throughput.Concurrency)
	fmt.Fprintf(w, "%-26s %8.0fµs %8.0fµs %12.0f %10.0fµs  (%d in flight)\n", "chain floor", r.Chain.Latency.P50us, r.Chain.Latency.P99us, r.Chain.Throughput.PerSecond, r.Chain.Throughput.CPUPerOpUs, r.Chain.Throughput.Concurrency)
	e := r.EnvelopedChain
	fmt.Fprintf(w, "%-26s %8.0fµs %8.0fµs %12.0f %10.0fµs  (%d in flight)\n", "chain, airlock's headers", e.Latency.P50us, e.Latency.P99us, e.Throughput.PerSecond, e.Throughput.CPUPerOpUs, e.Throughput.Concurrency)
	m := r.MinimalChain
	fmt.Fprintf(w, "%-26s %8.0fµs %8.0fµs %12.0f %10.0fµs  (%d in flight)\n", "minimal exactly-once chain", m.Latency.P50us, m.Latency.P99us, m.Throughput.PerSecond, m.Throughput.CPUPerOpUs, m.Throughput.Concurrency)
	sc := r.SpecChain
	fmt.Fprintf(w, "%-26s %8.0fµs %8.0fµs %12.0f %10.0fµs  (%d in flight)\n", "minimal, SPEC's headers", sc.Latency.P50us, sc.Latency.P99us, sc.Throughput.PerSecond, sc.Throughput.CPUPerOpUs, sc.Throughput.Concurrency)
	scc := r.SpecCallChain
	fmt.Fprintf(w, "%-26s %8.0fµs %8.0fµs %12.0f %10.0fµs  (%d in flight)\n\n", "chain, SPEC's headers", scc.Latency.P50us, scc.Latency.P99us, scc.Throughput.PerSecond, scc.Throughput.CPUPerOpUs, scc.Throughput.Concurrency)
	perChain := func(c callCounts) {
		fmt.Fprintf(w, "  per chain, counted by the server: %.2f intake writes, %.2f event writes, %.2f policy deliveries, %.2f executor deliveries\n",
			c.IntakeWrites, c.EventWrites, c.PolicyDeliveries, c.ExecutorDeliveries)
	}
	fmt.Fprintf(w, "chain floor: the call's JetStream operations in sequence, bare nats.go, %d B messages (request; delivery, append requested, publish decision, ack; delivery, append started, append completed, ack; RePublish to the agent)\n", r.Chain.Payload)
	perChain(r.Chain.PerCall)
	fmt.Fprintf(w, "  chain floor = %.2f× raw hop p50, %.2f× p99: the least a call with these writes in sequence can be\n", r.Ratios.ChainP50, r.Ratios.ChainP99)
	fmt.Fprintf(w, "  round trip  = %.2f× chain floor p50, %.2f× p99, %.2f× its CPU per call: what airlock adds to the writes\n", r.Ratios.OverChainP50, r.Ratios.OverChainP99, r.Ratios.OverChainCPU)
	fmt.Fprintf(w, "chain with airlock's headers: the chain floor with the header airlock's envelope gives each message (CloudEvents attributes, traceparent, message id or expectations; a content type only on protojson; SDK-long call ids), its bytes taken from the body so records stay as large\n")
	perChain(e.PerCall)
	fmt.Fprintf(w, "  = %.2f× chain floor p50 (%+.0fµs), %.2f× its CPU per call (%+.0fµs): what the headers alone cost the writes\n",
		r.Ratios.EnvelopedP50, e.Latency.P50us-r.Chain.Latency.P50us, r.Ratios.EnvelopedCPU, e.Throughput.CPUPerOpUs-r.Chain.Throughput.CPUPerOpUs)
	fmt.Fprintf(w, "minimal exactly-once chain: the writes no design that keeps SPEC's guarantees can do without, bare nats.go, %d B messages (request; delivery, the decision appended as the call's first event — compare-and-append after 0, no separate requested — ack; delivery, append started (the claim), append completed, ack; RePublish to the agent)\n", m.Payload)
	perChain(m.PerCall)
	fmt.Fprintf(w, "  minimal chain = %.2f× raw hop p50, %.2f× p99; %.2f× p50 a raw hop timed in turn with the chains (%.0fµs)\n",
		r.Ratios.MinimalP50, r.Ratios.MinimalP99, r.Ratios.MinimalP50InTurn, r.ChainHop.P50us)
	fmt.Fprintf(w, "minimal chain with SPEC's headers: the minimal chain with the headers SPEC §3 and exactly-once require on each message and no others (ce-id, ce-type, ce-source, ce-time, ce-specversion, traceparent; the two expectation headers on each compare-and-append; SDK-long call ids), its bytes taken from the body: the lower bounds' chain\n")
	perChain(sc.PerCall)
	fmt.Fprintf(w, "  = %.2f× minimal chain p50 (%+.0fµs), %+.0fµs CPU per call: what SPEC's headers cost the minimal writes\n",
		r.Ratios.SpecOverMinimalP50, sc.Latency.P50us-m.Latency.P50us, sc.Throughput.CPUPerOpUs-m.Throughput.CPUPerOpUs)
	fmt.Fprintf(w, "  with SPEC's headers = %.2f× raw hop p50, %.2f× p99; %.2f× p50 the raw hop timed in turn\n",
		r.Ratios.SpecP50, r.Ratios.SpecP99, r.Ratios.SpecP50InTurn)
	fmt.Fprintf(w, "minimal chain with SPEC's headers and the work: the same chain with each party doing the work every call needs (below) at its place — the agent encodes the request and decodes the end, the policy decodes the request, decides with Rego, seals and encodes the decision, the executor decodes it, checks its seal and encodes started and the end — one piece after the other as a call does them\n")
	fmt.Fprintf(w, "  timed in blocks of %d calls in turn with a raw hop, the chain without the work and the round trip, %d calls each, load %.2f at the start on %d CPUs: %s\n",
		blockCalls, r.SpecInBlocks.Work.N, r.SpecInBlocks.Load, runtime.NumCPU(), r.minimalVerdict())
	fmt.Fprintf(w, "chain with SPEC's headers: the chain floor with the same headers (and the decision's message id): today's writes in the CPU bound\n")
	perChain(scc.PerCall)
	fmt.Fprintf(w, "  = %.2f× chain floor p50 (%+.0fµs), %+.0fµs CPU per call\n",
		scc.Latency.P50us/r.Chain.Latency.P50us, scc.Latency.P50us-r.Chain.Latency.P50us, scc.Throughput.CPUPerOpUs-r.Chain.Throughput.CPUPerOpUs)
	b := r.CPUBound
	fmt.Fprintf(w, "CPU lower bound: the work every call does besides its messaging, each piece alone on the events of a call the round trip completed, timed in each round (the medians):\n")
	for _, p := range b.Work {
		fmt.Fprintf(w, "  %-40s %7.1fµs\n", p.Name, p.CPUus)
	}
	fmt.Fprintf(w, "  %-40s %7.1fµs\n\n", "work", b.WorkUs)
	c := r.PerCall
	fmt.Fprintf(w, "per call, counted by the server: %.2f intake writes, %.2f event writes (%.0f B stored), %.2f policy deliveries, %.2f executor deliveries\n",
		c.IntakeWrites, c.EventWrites, c.EventBytes, c.PolicyDeliveries, c.ExecutorDeliveries)
	rs := r.Rounds
	fmt.Fprintf(w, "messaging floor of one call (each operation alone, each message with the headers SPEC §3 requires of the call's message it stands for and no others, %d B messages with them, CPU per op with %d in flight, the median of %d rounds; bare: the same operations without headers):\n", r.Floor.Payload, r.Floor.Concurrency, rs.Rounds)
	fmt.Fprintf(w, "  %-38s %9s %10s %10s\n", "", "per op", "per call", "bare")
	for _, op := range []struct {
		name     string
		count    float64
		op, bare floorOp
	}{
		{"sync publish", r.Mix.SyncPublish, r.Floor.SyncPublish, r.BareFloor.SyncPublish},
		{"compare-and-append publish", r.Mix.CASPublish, r.Floor.CASPublish, r.BareFloor.CASPublish},
		{"pull delivery + ack, work queue", r.Mix.PullDeliverAckWorkQueue, r.Floor.PullDeliverAckWorkQueue, r.BareFloor.PullDeliverAckWorkQueue},
		{"pull delivery + ack", r.Mix.PullDeliverAck, r.Floor.PullDeliverAck, r.BareFloor.PullDeliverAck},
		{"RePublish, nobody subscribed", r.Mix.RePublish, r.Floor.RePublish, r.BareFloor.RePublish},
		{"RePublish to a subscriber", r.Mix.RePublishDelivered, r.Floor.RePublishDelivered, r.BareFloor.RePublishDelivered},
	} {
		if op.count > 0 {
			fmt.Fprintf(w, "  %.0f × %-34s %7.1fµs %8.1fµs %8.1fµs\n", op.count, op.name, op.op.CPUPerOpUs, op.count*op.op.CPUPerOpUs, op.count*op.bare.CPUPerOpUs)
		}
	}
	fmt.Fprintf(w, "  %-38s %20.1fµs %8.1fµs  (the medians of the rounds' floors)\n\n", "floor", r.FloorCPUus, r.BareFloorCPUus)
	fmt.Fprintf(w, "CPU per call in %d rounds, one after the other: in each, %.1fs of the round trip, of the chain and of the minimal chain with SPEC's headers, and of the two with the work done in the chain (%d in flight), then %d of each floor operation, bare then with SPEC's headers; each part counted until %.2fs after its end (its syncs), less the process's background CPU over the whole count (the mean of the windows of %.1fs before and after the round, each with nothing running and the collector off, as in the parts), with no collection within it and charged its allocations' collections:\n",
		rs.Rounds, rs.Seconds, r.RoundTrip.Throughput.Concurrency, rs.FloorOps, rs.SettleSeconds, rs.IdleWindowSeconds)
	row := func(name string, xs []float64, unit string) {
		fmt.Fprintf(w, "  %-30s", name)
		for _, x := range xs {
			if unit == "×" {
				fmt.Fprintf(w, " %6.2f×", x)
			} else {
				fmt.Fprintf(w, " %5.0fµs", x)
			}
		}
		if unit == "×" {
			fmt.Fprintf(w, "   median %.2f×\n", median(xs))
		} else {
			fmt.Fprintf(w, "   median %.0fµs\n", median(xs))
		}
	}
	row("round trip", rs.RoundTripUs, "µs")
	row("chain, SPEC's headers", rs.SpecCallUs, "µs")
	row("minimal, SPEC's headers", rs.SpecChainUs, "µs")
	row("chain, SPEC's headers, work", rs.SpecCallWorkUs, "µs")
	row("minimal, SPEC's headers, work", rs.SpecWorkUs, "µs")
	row("work (alone)", rs.WorkUs, "µs")
	row("messaging floor of the call", rs.FloorUs, "µs")
	row("messaging floor, minimal", rs.MinimalFloorUs, "µs")
	row("floor of the call, bare", rs.BareFloorUs, "µs")
	row("round trip ÷ floor", rs.Ratio, "×")
	row("round trip ÷ bare floor", rs.BareRatio, "×")
	row("  of which collections: round trip", rs.GCRoundTripUs, "µs")
	row("  of which collections: floor", rs.GCFloorUs, "µs")
	row("  collections: chain", rs.GCSpecCallUs, "µs")
	row("  collections: minimal", rs.GCSpecChainUs, "µs")
	row("  collections: chain, work", rs.GCSpecCallWorkUs, "µs")
	row("  collections: minimal, work", rs.GCSpecWorkUs, "µs")
	row("background CPU per second", rs.IdleUsPerSecond, "µs")
	row("  windows, before each and last", rs.IdleWindowsUsPerSecond, "µs")
	fmt.Fprintf(w, "CPU lower bounds (each round's chain doing the work at its place against that round's floor, the floors' messages with SPEC's headers as the chains'; CPU figures the medians of the rounds', ratios the medians of the rounds' ratios, which need not be their quotient):\n")
	fmt.Fprintf(w, "  minimal, SPEC's headers, work: %.0fµs per call, its writes' floor %.0fµs; median of the rounds' ratios %.2f× (%.2f× with the least background), %.2f× to today's floor\n",
		b.MinimalUs, b.MinimalFloorUs, b.MinimalToOwnFloor, b.LeastMinimalToOwnFloor, b.MinimalToFloor)
	fmt.Fprintf(w, "  chain, SPEC's headers, work:   %.0fµs per call, today's floor %.0fµs; median of the rounds' ratios %.2f× (%.2f× with the least background); the round trip %.0fµs, %.2f×\n",
		b.CallUs, r.FloorCPUus, b.CallToFloor, b.LeastCallToFloor, b.RoundTripUs, r.Ratios.CPU)
	fmt.Fprintf(w, "  the same with each chain without the work + the work timed alone: minimal %.0fµs, %.2f× its floor; today's %.0fµs, %.2f× its floor\n",
		b.Alone.MinimalUs, b.Alone.MinimalToOwnFloor, b.Alone.CallUs, b.Alone.CallToFloor)
	fmt.Fprintf(w, "  %s\n\n", r.cpuVerdict())
	fmt.Fprintf(w, "round trip p50 = %.2f× raw hop (goal ≤ %.1f×): %s\n", r.Ratios.P50, r.Goals.P50Max, ok(r.Goals.P50Met))
	fmt.Fprintf(w, "round trip p99 = %.2f× raw hop (goal ≤ %.0f×): %s\n", r.Ratios.P99, r.Goals.P99Max, ok(r.Goals.P99Met))
	fmt.Fprintf(w, "CPU per call = %.2f× the messaging floor with SPEC's headers (goal ≤ %.1f×): %s  (%.2f× the bare floor)\n", r.Ratios.CPU, r.Goals.CPUMax, ok(r.Goals.CPUMet), r.Ratios.CPUBare)
}
