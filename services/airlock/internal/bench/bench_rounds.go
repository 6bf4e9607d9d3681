package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
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
// then a share of --floor-ops of each operation of the floor's mixes, each
// with the headers SPEC requires of the call's message it stands for (the
// goal's floor) and bare (shown beside). The
// goal's ratio and the CPU bounds are the medians of their per-round
// values. Each part pays for what it causes and nothing else (partMeter):
// its own syncs (it is counted until one file-store sync interval after
// its last operation, less the process's background CPU over its whole
// count) and its own garbage (no collection runs within it; it is charged
// what its allocations cost at a steady heap), never its predecessor's.

// cpuRounds are the figures of the rounds, one entry per round.
type cpuRounds struct {
	Rounds int `json:"rounds"`
	// Seconds: how long each round's run of the round trip and of each
	// chain lasts; FloorOps: operations of each floor operation a round.
	Seconds  float64 `json:"seconds_per_run"`
	FloorOps int     `json:"floor_ops_per_round"`
	// SettleSeconds: the tail counted after each part, and the uncounted
	// wait after a floor operation's preparation (the file store's sync
	// interval; 0 when it fsyncs every write or more than 2 s apart).
	SettleSeconds float64 `json:"settle_seconds"`
	// IdleWindowsUsPerSecond: the process's background CPU measured before
	// the first round and after each, over IdleWindowSeconds with nothing
	// running and the collector off as in the parts
	// (partMeter.measureIdle); IdleUsPerSecond: each round's, the mean of
	// the windows before and after it, subtracted over each of its parts'
	// whole count and each piece of its work's loop (each of the two for
	// Least).
	IdleWindowsUsPerSecond []float64 `json:"idle_windows_cpu_us_per_second"`
	IdleUsPerSecond        []float64 `json:"idle_cpu_us_per_second"`
	IdleWindowSeconds      float64   `json:"idle_window_seconds"`
	// GCUs: what each part was charged for the collections its
	// allocations would cause, per call or operation (round trip, the two
	// chains, the floor of the call), each round: shown so the charge can
	// be weighed.
	GCRoundTripUs []float64 `json:"gc_round_trip_us_per_call"`
	GCFloorUs     []float64 `json:"gc_floor_us_per_call"`
	// GCSpecCallUs, GCSpecChainUs, GCSpecCallWorkUs, GCSpecWorkUs: the
	// same of the chains with SPEC's headers, without the work and doing
	// it (the work alone is timed with none: its loops are charged
	// nothing).
	GCSpecCallUs     []float64 `json:"gc_spec_call_chain_us_per_call"`
	GCSpecChainUs    []float64 `json:"gc_spec_chain_us_per_call"`
	GCSpecCallWorkUs []float64 `json:"gc_spec_call_chain_with_work_us_per_call"`
	GCSpecWorkUs     []float64 `json:"gc_spec_chain_with_work_us_per_call"`
	// WorkUs: the work every call does besides its messaging (callWork),
	// each piece alone, summed; work: each piece's figure, each round.
	WorkUs []float64 `json:"work_us_per_call"`
	work   [][]workCost
	// RoundTripUs, SpecCallUs, SpecChainUs: CPU per call of the round
	// trip, of the chain of today's writes and of the minimal chain, both
	// with SPEC's headers.
	RoundTripUs []float64 `json:"round_trip_cpu_us_per_call"`
	SpecCallUs  []float64 `json:"spec_call_chain_cpu_us_per_call"`
	SpecChainUs []float64 `json:"spec_chain_cpu_us_per_call"`
	// SpecCallWorkUs, SpecWorkUs: CPU per call of the same two chains with
	// each party doing the work at its place (specCallWorkWrites,
	// specWorkWrites): the CPU bounds.
	SpecCallWorkUs []float64 `json:"spec_call_chain_with_work_cpu_us_per_call"`
	SpecWorkUs     []float64 `json:"spec_chain_with_work_cpu_us_per_call"`
	// FloorUs, MinimalFloorUs: the messaging floor of today's call
	// (callMix) and of the minimal writes (minimalMix), each operation's
	// messages with SPEC's headers: the goal's and the bounds' floors.
	FloorUs        []float64 `json:"floor_cpu_us_per_call"`
	MinimalFloorUs []float64 `json:"minimal_floor_cpu_us_per_call"`
	// BareFloorUs: the floor of today's call with bare messages, the
	// goal's floor until issue 27's review, shown beside.
	BareFloorUs []float64 `json:"floor_without_headers_cpu_us_per_call"`
	// Ratio: RoundTripUs ÷ FloorUs, the CPU goal's ratio in each round;
	// BareRatio: RoundTripUs ÷ BareFloorUs.
	Ratio     []float64 `json:"cpu_per_call_to_floor"`
	BareRatio []float64 `json:"cpu_per_call_to_floor_without_headers"`
	// floors, bareFloors: each round's operations, for their medians.
	floors, bareFloors []*messagingFloor
	// Least: the figures of the CPU bounds with each of a round's two
	// windows of background (IdleWindowsUsPerSecond, the one before the
	// round and the one after) subtracted instead of their mean; the
	// out-of-reach verdict alone takes, round by round, the smaller ratio
	// of each bound (cpuBound.bound): the least the background can make it,
	// whichever way the chains and the floor respond to it.
	Least struct {
		Before boundFigures `json:"window_before"`
		After  boundFigures `json:"window_after"`
	} `json:"least_background"`
}

// boundFigures are the rounds' figures of the CPU bounds with one
// background subtracted.
type boundFigures struct {
	SpecCallWorkUs []float64 `json:"spec_call_chain_with_work_cpu_us_per_call"`
	SpecWorkUs     []float64 `json:"spec_chain_with_work_cpu_us_per_call"`
	SpecCallUs     []float64 `json:"spec_call_chain_cpu_us_per_call"`
	SpecChainUs    []float64 `json:"spec_chain_cpu_us_per_call"`
	WorkUs         []float64 `json:"work_us_per_call"`
	FloorUs        []float64 `json:"floor_cpu_us_per_call"`
	MinimalFloorUs []float64 `json:"minimal_floor_cpu_us_per_call"`
}

// add appends a round's figures.
func (b *boundFigures) add(f *roundFigures) {
	b.SpecCallUs, b.SpecChainUs = append(b.SpecCallUs, f.specCall), append(b.SpecChainUs, f.specChain)
	b.SpecCallWorkUs, b.SpecWorkUs = append(b.SpecCallWorkUs, f.specCallWork), append(b.SpecWorkUs, f.specWork)
	b.WorkUs = append(b.WorkUs, f.workUs())
	b.FloorUs, b.MinimalFloorUs = append(b.FloorUs, f.floor.CPUus(callMix)), append(b.MinimalFloorUs, f.floor.CPUus(minimalMix))
}

// roundFigures are one round's figures, with one background subtracted:
// CPU per call of the round trip and of the four chains, the collections
// charged to each (gc), the work's pieces, and the floors.
type roundFigures struct {
	roundTrip, specCall, specChain float64
	specCallWork, specWork         float64
	gc                             struct{ roundTrip, specCall, specChain, specCallWork, specWork float64 }
	work                           []workCost
	floor, bare, floorGC           messagingFloor
}

// workUs is the round's work of a call: the sum of its pieces.
func (f *roundFigures) workUs() float64 {
	var us float64
	for _, w := range f.work {
		us += w.CPUus
	}
	return us
}

// roundLoads are what the rounds run for a share of --duration: one call
// of each (the round trip; today's writes and the minimal ones, both with
// SPEC's headers, without the work and with it done in the chain); and
// work, the work of a call, timed alone in each round.
type roundLoads struct {
	roundTrip, specCall, specChain func(context.Context) error
	specCallWork, specWork         func(context.Context) error
	work                           []workPiece
}

// roundFloorOp is one operation of the floor's mixes as the rounds measure
// it: its rig, and where its figures go in a round's messagingFloor (the
// bare floor's when bare).
type roundFloorOp struct {
	name string
	bare bool
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
	spec, err := specFloorMsgs(data)
	if err != nil {
		return nil, fmt.Errorf("messaging floor with SPEC's headers: %w", err)
	}
	// Each operation with SPEC's headers right after the bare one, the
	// RePublishes right after the sync publish of their kind, whose CPU
	// their figures are the difference from: the nearer, the less drift.
	var ops []roundFloorOp
	for _, pair := range [][]struct {
		name string
		out  func(*messagingFloor) *floorOp
		rig  func(floorMsgs) floorRig
	}{
		{{"compare-and-append publish", func(f *messagingFloor) *floorOp { return &f.CASPublish }, func(fm floorMsgs) floorRig { return floorCASPublishRig(ctx, js, fo, fm) }}},
		{{"pull delivery and ack from a work queue", func(f *messagingFloor) *floorOp { return &f.PullDeliverAckWorkQueue },
			func(fm floorMsgs) floorRig { return floorPullRig(ctx, js, fo, fm, jetstream.WorkQueuePolicy) }}},
		{{"pull delivery and ack", func(f *messagingFloor) *floorOp { return &f.PullDeliverAck },
			func(fm floorMsgs) floorRig { return floorPullRig(ctx, js, fo, fm, jetstream.LimitsPolicy) }}},
		{
			{"sync publish", func(f *messagingFloor) *floorOp { return &f.SyncPublish }, func(fm floorMsgs) floorRig { return floorSyncPublishRig(ctx, js, fo, fm) }},
			{"republish", func(f *messagingFloor) *floorOp { return &f.RePublish }, func(fm floorMsgs) floorRig { return floorRePublishRig(ctx, url, js, fo, fm, false) }},
			{"republish to a subscriber", func(f *messagingFloor) *floorOp { return &f.RePublishDelivered },
				func(fm floorMsgs) floorRig { return floorRePublishRig(ctx, url, js, fo, fm, true) }},
		},
	} {
		for _, fm := range []floorMsgs{bareFloorMsgs(data), spec} {
			for _, op := range pair {
				name := op.name
				if fm.tag != "" {
					name += " with SPEC's headers"
				}
				ops = append(ops, roundFloorOp{name: name, bare: fm.tag == "", out: op.out, rig: op.rig(fm)})
			}
		}
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
	rs.IdleWindowSeconds = idleWindow(settle).Seconds()
	// The background is measured before the first round and after each,
	// and a round's parts are relieved of the mean of the windows before
	// and after it: their figures are set once the round is over (finish).
	pm := partMeter{tail: settle}
	if err := pm.measureIdle(ctx); err != nil {
		return nil, err
	}
	rs.IdleWindowsUsPerSecond = append(rs.IdleWindowsUsPerSecond, pm.idle*1e6)
	for range o.Rounds {
		var costs []*partCost
		var finish []func(*roundFigures)
		for _, l := range []struct {
			name    string
			op      func(context.Context) error
			out, gc func(*roundFigures) *float64
		}{
			{"round trip", loads.roundTrip, func(f *roundFigures) *float64 { return &f.roundTrip }, func(f *roundFigures) *float64 { return &f.gc.roundTrip }},
			{"chain with SPEC's headers", loads.specCall, func(f *roundFigures) *float64 { return &f.specCall }, func(f *roundFigures) *float64 { return &f.gc.specCall }},
			{"minimal chain with SPEC's headers", loads.specChain, func(f *roundFigures) *float64 { return &f.specChain }, func(f *roundFigures) *float64 { return &f.gc.specChain }},
			{"chain with SPEC's headers and the work", loads.specCallWork, func(f *roundFigures) *float64 { return &f.specCallWork },
				func(f *roundFigures) *float64 { return &f.gc.specCallWork }},
			{"minimal chain with SPEC's headers and the work", loads.specWork, func(f *roundFigures) *float64 { return &f.specWork },
				func(f *roundFigures) *float64 { return &f.gc.specWork }},
		} {
			var calls int
			c, err := pm.part(ctx, nil, func() error {
				m, _, err := measureRate(ctx, run, l.op, nil, latency{})
				calls = m.tput.Completed
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("rounds, %s: %w", l.name, err)
			}
			if calls == 0 {
				return nil, fmt.Errorf("rounds, %s: no call completed in %.1fs", l.name, rs.Seconds)
			}
			costs = append(costs, &c)
			finish = append(finish, func(f *roundFigures) {
				*l.out(f) = c.Seconds() * 1e6 / float64(calls)
				*l.gc(f) = c.ChargeSeconds * 1e6 / float64(calls)
			})
		}
		// The work right after the chains: timed as a part is
		// (partMeter.quiet), so the chain's garbage is collected before
		// it, uncounted, not in one of its pieces.
		work, err := pm.timeWork(ctx, loads.work)
		if err != nil {
			return nil, fmt.Errorf("rounds, the work of a call: %w", err)
		}
		for i := range work {
			costs = append(costs, &work[i])
		}
		finish = append(finish, func(f *roundFigures) { f.work = workCosts(loads.work, work) })
		for _, op := range ops {
			var prepare func() error
			if op.rig.prepare != nil {
				prepare = func() error { return op.rig.prepare(rs.FloorOps) }
			}
			var elapsed time.Duration
			c, err := pm.part(ctx, prepare, func() error {
				t0 := time.Now()
				err := op.rig.run(rs.FloorOps)
				elapsed = time.Since(t0)
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("messaging floor, %s: %w", op.name, err)
			}
			costs = append(costs, &c)
			finish = append(finish, func(f *roundFigures) {
				figures := floorOp{CPUPerOpUs: c.Seconds() * 1e6 / float64(rs.FloorOps), PerSecond: float64(rs.FloorOps) / elapsed.Seconds()}
				if op.bare {
					*op.out(&f.bare) = figures
					return
				}
				*op.out(&f.floor) = figures
				op.out(&f.floorGC).CPUPerOpUs = c.ChargeSeconds * 1e6 / float64(rs.FloorOps)
			})
		}
		before := pm.idle
		if err := pm.measureIdle(ctx); err != nil {
			return nil, err
		}
		rs.IdleWindowsUsPerSecond = append(rs.IdleWindowsUsPerSecond, pm.idle*1e6)
		// The round's figures with the mean of its windows; the bounds'
		// again with each window, for the out-of-reach verdict alone.
		figures := func(idle float64) *roundFigures {
			for _, c := range costs {
				c.IdleSeconds = idle * c.SpanSeconds
			}
			f := &roundFigures{floor: messagingFloor{Concurrency: fo.Concurrency, Payload: payload}, bare: messagingFloor{Concurrency: fo.Concurrency, Payload: payload}}
			for _, set := range finish {
				set(f)
			}
			// RePublish's figures are what it adds to a sync publish of the
			// same round, kept signed here (a round's noise either way) so
			// the median is not lifted by cutting one side off.
			for _, fl := range []*messagingFloor{&f.floor, &f.bare, &f.floorGC} {
				for _, rp := range []*floorOp{&fl.RePublish, &fl.RePublishDelivered} {
					rp.CPUPerOpUs -= fl.SyncPublish.CPUPerOpUs
				}
			}
			return f
		}
		rs.Least.Before.add(figures(before))
		rs.Least.After.add(figures(pm.idle))
		idle := (before + pm.idle) / 2
		rs.IdleUsPerSecond = append(rs.IdleUsPerSecond, idle*1e6)
		f := figures(idle)
		rs.RoundTripUs, rs.SpecCallUs, rs.SpecChainUs = append(rs.RoundTripUs, f.roundTrip), append(rs.SpecCallUs, f.specCall), append(rs.SpecChainUs, f.specChain)
		rs.SpecCallWorkUs, rs.SpecWorkUs = append(rs.SpecCallWorkUs, f.specCallWork), append(rs.SpecWorkUs, f.specWork)
		rs.work, rs.WorkUs = append(rs.work, f.work), append(rs.WorkUs, f.workUs())
		rs.floors, rs.bareFloors = append(rs.floors, &f.floor), append(rs.bareFloors, &f.bare)
		rs.FloorUs, rs.BareFloorUs = append(rs.FloorUs, f.floor.CPUus(callMix)), append(rs.BareFloorUs, f.bare.CPUus(callMix))
		rs.MinimalFloorUs = append(rs.MinimalFloorUs, f.floor.CPUus(minimalMix))
		rs.Ratio, rs.BareRatio = append(rs.Ratio, f.roundTrip/f.floor.CPUus(callMix)), append(rs.BareRatio, f.roundTrip/f.bare.CPUus(callMix))
		rs.GCRoundTripUs = append(rs.GCRoundTripUs, f.gc.roundTrip)
		rs.GCSpecCallUs, rs.GCSpecChainUs = append(rs.GCSpecCallUs, f.gc.specCall), append(rs.GCSpecChainUs, f.gc.specChain)
		rs.GCSpecCallWorkUs, rs.GCSpecWorkUs = append(rs.GCSpecCallWorkUs, f.gc.specCallWork), append(rs.GCSpecWorkUs, f.gc.specWork)
		rs.GCFloorUs = append(rs.GCFloorUs, f.floorGC.CPUus(callMix))
	}
	return rs, nil
}

// floor is the median of each operation's figures with SPEC's headers
// over the rounds; bareFloor the same of the bare operations.
func (rs *cpuRounds) floor() *messagingFloor { return medianFloor(rs.floors) }

func (rs *cpuRounds) bareFloor() *messagingFloor { return medianFloor(rs.bareFloors) }

// medianFloor is the median of each operation's figures over floors.
func medianFloor(floors []*messagingFloor) *messagingFloor {
	if len(floors) == 0 {
		return &messagingFloor{}
	}
	f := &messagingFloor{Concurrency: floors[0].Concurrency, Payload: floors[0].Payload}
	for _, op := range []func(*messagingFloor) *floorOp{
		func(f *messagingFloor) *floorOp { return &f.SyncPublish }, func(f *messagingFloor) *floorOp { return &f.CASPublish },
		func(f *messagingFloor) *floorOp { return &f.PullDeliverAckWorkQueue }, func(f *messagingFloor) *floorOp { return &f.PullDeliverAck },
		func(f *messagingFloor) *floorOp { return &f.RePublish }, func(f *messagingFloor) *floorOp { return &f.RePublishDelivered },
	} {
		var cpu, rate []float64
		for _, r := range floors {
			cpu, rate = append(cpu, op(r).CPUPerOpUs), append(rate, op(r).PerSecond)
		}
		*op(f) = floorOp{CPUPerOpUs: median(cpu), PerSecond: median(rate)}
	}
	return f
}

// partMeter measures the parts of one round. A part pays for what it
// causes and nothing else:
//   - its syncs: it is counted from its first operation until tail (one
//     file-store sync interval) after its last, so every stream it wrote
//     has synced within its count — the store's timer also writes out
//     pending records and compacts blocks that acks emptied, work that
//     used to land on whichever part ran next;
//   - not the process's background: what runs with nothing to do (every
//     stream's sync timer, the idle consumers' pull renewals and
//     heartbeats, the clients' and the runtime's timers) runs through
//     the whole count, not only its tail, so idle × (run + tail) is
//     subtracted; idle is measured before and after each round
//     (measureIdle; runCPURounds takes the mean) as the parts run: after a
//     full collection and with the collector off. With it on,
//     the runtime's scavenger returned to the OS, in the idle window only,
//     the heap the parts had grown with the collector off (it is paused
//     while the collector is: its goal follows the heap goal): up to 34 ms
//     a second in a round's first windows, against 5–8 with it off;
//   - its garbage: a full collection before it, uncounted, removes what
//     earlier parts left, and no collection runs within it (the collector
//     is off while it runs); instead it is charged what its allocations
//     cost at a steady heap: a collection every GOGC% of the live heap
//     allocated, each costing what the collection before it cost (process
//     CPU, timed). Left on, the collector ran in no part at all: at the
//     services' GOGC of 400 and the bench's live heap, a part never
//     allocates enough to start one, so the full collection before each
//     part took all of it, uncounted.
type partMeter struct {
	tail time.Duration
	idle float64 // process CPU seconds per second with nothing running
}

// partCost is what one part cost, in seconds of process CPU.
type partCost struct {
	// CPUSeconds: the process's CPU from the part's start to the end of
	// its tail, SpanSeconds: how long that took; IdleSeconds: the
	// background's share of it subtracted (idle × SpanSeconds);
	// ChargeSeconds: its allocations' collections.
	CPUSeconds, SpanSeconds, IdleSeconds, ChargeSeconds float64
	// Allocated: bytes allocated within the count; Collections:
	// collections within it (none: the collector is off).
	Allocated, Collections uint64
}

// Seconds is the part's cost: CPU − idle + the collections' charge.
func (c partCost) Seconds() float64 { return c.CPUSeconds - c.IdleSeconds + c.ChargeSeconds }

// idleWindow is how long measureIdle counts: three sync intervals (each
// stream's sync timer and the consumers' one-second heartbeats fire
// several times in it, wherever the window falls), at least a second.
func idleWindow(tail time.Duration) time.Duration { return max(3*tail, time.Second) }

// measureIdle measures the process's CPU with nothing running as a part
// runs: after a full collection and one tail of quiet for the syncs of
// what ran before, with the collector off, over idleWindow.
func (pm *partMeter) measureIdle(ctx context.Context) error {
	runtime.GC()
	percent := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(percent)
	if err := sleepCtx(ctx, pm.tail); err != nil {
		return err
	}
	cpu0, t0 := processCPU(), time.Now()
	if err := sleepCtx(ctx, idleWindow(pm.tail)); err != nil {
		return err
	}
	pm.idle = (processCPU() - cpu0).Seconds() / time.Since(t0).Seconds()
	return nil
}

// part runs prepare (if any; uncounted, followed by one tail of quiet for
// its syncs), then run, and returns what run cost as partMeter says.
func (pm *partMeter) part(ctx context.Context, prepare, run func() error) (partCost, error) {
	if prepare != nil {
		if err := prepare(); err != nil {
			return partCost{}, err
		}
	}
	cpu0 := processCPU()
	runtime.GC()
	cycle := processCPU() - cpu0
	live := readGCMetric("/gc/heap/live:bytes")
	// Off before the settle: a collection started in it would sweep inside
	// the count, uncounted.
	percent := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(percent)
	if prepare != nil {
		if err := sleepCtx(ctx, pm.tail); err != nil {
			return partCost{}, err
		}
	}
	c, err := pm.count(ctx, pm.tail, run)
	if err != nil {
		return partCost{}, err
	}
	if percent > 0 && live > 0 {
		c.ChargeSeconds = cycle.Seconds() * float64(c.Allocated) / (float64(percent) / 100 * float64(live))
	}
	return c, nil
}

// quiet runs run as a part's count is taken: after a full collection
// (uncounted) of what ran before, with the collector off (its setting
// restored after), counted as count says with no tail; no charge for its
// allocations. The work of a call is timed so (timeWork): without it, a
// collection of the garbage of the part before (the collector just back
// on, the part's garbage on the heap) landed in one piece's loop.
func (pm *partMeter) quiet(ctx context.Context, run func() error) (partCost, error) {
	runtime.GC()
	percent := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(percent)
	return pm.count(ctx, 0, run)
}

// count counts run, the collector off, until tail after its end: the
// process's CPU, how long it took, the background's share of it
// (pm.idle × span; the rounds set it again once the round is over), what
// it allocated and the collections that ran within it (any, forced or
// not: there should be none).
func (pm *partMeter) count(ctx context.Context, tail time.Duration, run func() error) (partCost, error) {
	alloc0, cycles0 := readGCMetric("/gc/heap/allocs:bytes"), readGCMetric("/gc/cycles/total:gc-cycles")
	cpu0, t0 := processCPU(), time.Now()
	if err := run(); err != nil {
		return partCost{}, err
	}
	if err := sleepCtx(ctx, tail); err != nil {
		return partCost{}, err
	}
	span := time.Since(t0).Seconds()
	return partCost{
		CPUSeconds:  (processCPU() - cpu0).Seconds(),
		SpanSeconds: span,
		IdleSeconds: pm.idle * span,
		Allocated:   readGCMetric("/gc/heap/allocs:bytes") - alloc0,
		Collections: readGCMetric("/gc/cycles/total:gc-cycles") - cycles0,
	}, nil
}

// readGCMetric reads one runtime/metrics counter or gauge of kind uint64.
func readGCMetric(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return ctx.Err()
}

// settleWait is how long a part's tail lasts on a server that fsyncs as sync
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
