package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The CPU goal's rounds (docs/benchmarks.md): the round trip's CPU per
// call and the messaging floor it is compared with are measured in the
// same rounds, one after the other, so that the machine's drift over the
// run touches both alike: each round runs the round trip and the chains
// of the CPU bounds (today's writes and the minimal ones, both with SPEC's
// headers) for a share of --duration,
// then a share of --floor-ops of each operation of the floor's mixes. The
// goal's ratio and the CPU bounds are the medians of their per-round
// values. Before each part a full GC collects what the previous part left
// and the file store's sync interval passes, neither counted: each part
// pays for its own garbage and syncs, not its predecessor's.

// cpuRounds are the figures of the rounds, one entry per round.
type cpuRounds struct {
	Rounds int `json:"rounds"`
	// Seconds: how long each round's run of the round trip and of each
	// chain lasts; FloorOps: operations of each floor operation a round.
	Seconds  float64 `json:"seconds_per_run"`
	FloorOps int     `json:"floor_ops_per_round"`
	// SettleSeconds: the uncounted wait before each part (the file
	// store's sync interval; 0 when it fsyncs every write or more than 2 s
	// apart).
	SettleSeconds float64 `json:"settle_seconds"`
	// RoundTripUs, SpecCallUs, SpecChainUs: CPU per call of the round
	// trip, of the chain of today's writes and of the minimal chain, both
	// with SPEC's headers.
	RoundTripUs []float64 `json:"round_trip_cpu_us_per_call"`
	SpecCallUs  []float64 `json:"spec_call_chain_cpu_us_per_call"`
	SpecChainUs []float64 `json:"spec_chain_cpu_us_per_call"`
	// FloorUs, MinimalFloorUs: the messaging floor of today's call
	// (callMix) and of the minimal writes (minimalMix).
	FloorUs        []float64 `json:"floor_cpu_us_per_call"`
	MinimalFloorUs []float64 `json:"minimal_floor_cpu_us_per_call"`
	// Ratio: RoundTripUs ÷ FloorUs, the CPU goal's ratio in each round.
	Ratio []float64 `json:"cpu_per_call_to_floor"`
	// floors: each round's operations, for their medians.
	floors []*messagingFloor
}

// roundLoads are what the rounds run for a share of --duration: one call
// of each (the round trip; today's writes and the minimal ones, both with
// SPEC's headers).
type roundLoads struct {
	roundTrip, specCall, specChain func(context.Context) error
}

// roundFloorOp is one operation of the floor's mixes as the rounds measure
// it: its rig, and where its figures go in a round's messagingFloor.
type roundFloorOp struct {
	name string
	out  func(*messagingFloor) *floorOp
	rig  floorRig
}

// runCPURounds measures the rounds against the server at url, the floor's
// messages payload bytes, settle the uncounted wait before each part.
func runCPURounds(ctx context.Context, url string, o roundtripOptions, payload int, settle time.Duration, loads roundLoads) (*cpuRounds, error) {
	if o.Rounds < 1 {
		return nil, errors.New("--rounds must be at least 1")
	}
	nc, js, err := floorConn(url, "airlock-bench-floor-rounds")
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	rs := &cpuRounds{Rounds: o.Rounds, Seconds: (o.Duration / time.Duration(o.Rounds)).Seconds(), FloorOps: max(o.FloorOps/o.Rounds, 1), SettleSeconds: settle.Seconds()}
	fo := floorOptions{Concurrency: o.Concurrency, Payload: payload, Ops: rs.FloorOps}
	fo.defaults()
	data := make([]byte, payload)
	// The RePublishes come right after the sync publish, whose CPU their
	// figures are the difference from: the nearer, the less drift in it.
	ops := []roundFloorOp{
		{"compare-and-append publish", func(f *messagingFloor) *floorOp { return &f.CASPublish }, floorCASPublishRig(ctx, js, fo, data)},
		{"pull delivery and ack from a work queue", func(f *messagingFloor) *floorOp { return &f.PullDeliverAckWorkQueue },
			floorPullRig(ctx, js, fo, data, jetstream.WorkQueuePolicy)},
		{"pull delivery and ack", func(f *messagingFloor) *floorOp { return &f.PullDeliverAck }, floorPullRig(ctx, js, fo, data, jetstream.LimitsPolicy)},
		{"sync publish", func(f *messagingFloor) *floorOp { return &f.SyncPublish }, floorSyncPublishRig(ctx, js, fo, data)},
		{"republish", func(f *messagingFloor) *floorOp { return &f.RePublish }, floorRePublishRig(ctx, url, js, fo, data, false)},
		{"republish to a subscriber", func(f *messagingFloor) *floorOp { return &f.RePublishDelivered }, floorRePublishRig(ctx, url, js, fo, data, true)},
	}
	for _, op := range ops {
		if op.rig.err == nil {
			defer op.rig.stop()
		}
	}
	for _, op := range ops {
		if op.rig.err != nil {
			return nil, fmt.Errorf("messaging floor, %s: %w", op.name, op.rig.err)
		}
	}
	run := o
	run.Duration = time.Duration(rs.Seconds * float64(time.Second))
	run.CPUProfile, run.MemProfile = "", "" // the profiles are the round trip's own run
	for range o.Rounds {
		for _, l := range []struct {
			name string
			op   func(context.Context) error
			out  *[]float64
		}{{"round trip", loads.roundTrip, &rs.RoundTripUs}, {"chain with SPEC's headers", loads.specCall, &rs.SpecCallUs}, {"minimal chain with SPEC's headers", loads.specChain, &rs.SpecChainUs}} {
			if err := settleFor(ctx, settle); err != nil {
				return nil, err
			}
			m, _, err := measureRate(ctx, run, l.op, nil, latency{})
			if err != nil {
				return nil, fmt.Errorf("rounds, %s: %w", l.name, err)
			}
			*l.out = append(*l.out, m.tput.CPUPerOpUs)
		}
		f := &messagingFloor{Concurrency: fo.Concurrency, Payload: payload}
		for _, op := range ops {
			if op.rig.prepare != nil {
				if err := op.rig.prepare(rs.FloorOps); err != nil {
					return nil, fmt.Errorf("messaging floor, %s: %w", op.name, err)
				}
			}
			if err := settleFor(ctx, settle); err != nil {
				return nil, err
			}
			cpu0, t0 := processCPU(), time.Now()
			if err := op.rig.run(rs.FloorOps); err != nil {
				return nil, fmt.Errorf("messaging floor, %s: %w", op.name, err)
			}
			*op.out(f) = floorOp{CPUPerOpUs: cpuPerOp(processCPU()-cpu0, rs.FloorOps), PerSecond: float64(rs.FloorOps) / time.Since(t0).Seconds()}
		}
		// RePublish's figures are what it adds to a sync publish of the same round.
		for _, rp := range []*floorOp{&f.RePublish, &f.RePublishDelivered} {
			rp.CPUPerOpUs = max(0, rp.CPUPerOpUs-f.SyncPublish.CPUPerOpUs)
		}
		rs.floors = append(rs.floors, f)
		rs.FloorUs = append(rs.FloorUs, f.CPUus(callMix))
		rs.MinimalFloorUs = append(rs.MinimalFloorUs, f.CPUus(minimalMix))
		rs.Ratio = append(rs.Ratio, rs.RoundTripUs[len(rs.RoundTripUs)-1]/f.CPUus(callMix))
	}
	return rs, nil
}

// floor is the median of each operation's figures over the rounds.
func (rs *cpuRounds) floor() *messagingFloor {
	if len(rs.floors) == 0 {
		return &messagingFloor{}
	}
	f := &messagingFloor{Concurrency: rs.floors[0].Concurrency, Payload: rs.floors[0].Payload}
	for _, op := range []func(*messagingFloor) *floorOp{
		func(f *messagingFloor) *floorOp { return &f.SyncPublish }, func(f *messagingFloor) *floorOp { return &f.CASPublish },
		func(f *messagingFloor) *floorOp { return &f.PullDeliverAckWorkQueue }, func(f *messagingFloor) *floorOp { return &f.PullDeliverAck },
		func(f *messagingFloor) *floorOp { return &f.RePublish }, func(f *messagingFloor) *floorOp { return &f.RePublishDelivered },
	} {
		var cpu, rate []float64
		for _, r := range rs.floors {
			cpu, rate = append(cpu, op(r).CPUPerOpUs), append(rate, op(r).PerSecond)
		}
		*op(f) = floorOp{CPUPerOpUs: median(cpu), PerSecond: median(rate)}
	}
	return f
}

// settleFor lets the previous part's background work end outside any
// count: a full GC collects the garbage it left, and waiting the file
// store's sync interval (wait) lets every stream it wrote sync.
func settleFor(ctx context.Context, wait time.Duration) error {
	runtime.GC()
	if wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
	}
	return ctx.Err()
}

// settleWait is how long settleFor waits on a server that fsyncs as sync
// says (dev.sync, parsed): one sync interval and a little, so that every
// stream's sync timer has fired; none when every write is synced as it is
// made (0) or syncs are more than 2 s apart (a wait per part would make
// the run minutes long, and such rare syncs weigh little on a part).
func settleWait(sync time.Duration) time.Duration {
	if sync <= 0 || sync > 2*time.Second {
		return 0
	}
	return sync + 50*time.Millisecond
}

// median of xs (the mean of the two middle values of an even count); 0
// for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}
