package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/policy/decide"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// The CPU bound (docs/benchmarks.md): the least CPU a call can cost with
// the minimal exactly-once chain's writes, each message with the headers
// SPEC and exactly-once require, is the CPU of that chain with each party
// doing the work no call can skip at its place (specWorkWrites), measured
// in the same rounds as the round trip: the policy's Rego decision, sealing
// the decision and checking its seal, and encoding or decoding each message
// a party writes or reads, on the events a round-trip call really stored.
// The same work is also timed alone, one kind at a time, in each round, as
// a part is counted (partMeter.quiet: timed once right after the chains
// with the collector just back on, one piece's loop took 43.8 µs a call —
// the process's own leftover work, a collection of the chain's garbage),
// and the chain without it plus that is shown beside: where a call does
// it, between a delivery and a publish, the work costs more than in a loop
// of its own.

// minimalMix is what the minimal exactly-once chain does on the bus: the
// agent's request, its delivery from the work queue and ack, the decision,
// `started` and the end each a compare-and-append, the executor's delivery
// and ack, and the RePublish of the three events (to the agent: the end).
var minimalMix = floorMix{SyncPublish: 1, CASPublish: 3, PullDeliverAckWorkQueue: 1, PullDeliverAck: 1, RePublish: 2, RePublishDelivered: 1}

// workPiece is one piece of a call's unavoidable work: do does it once,
// at its place in the call (at).
type workPiece struct {
	name string
	do   func() error
	at   workStage
}

// workStage is where in a call a piece of its work is done, one after the
// other: the chain with the work (specWorkWrites) does each piece there.
type workStage int

const (
	// atSubmit: the agent, before it publishes the request.
	atSubmit workStage = iota
	// atDecide: the policy, between the request's delivery and the
	// decision's append.
	atDecide
	// atClaim: the executor, between the decision's delivery and the
	// claim's append.
	atClaim
	// atEnd: the executor, before it appends the end.
	atEnd
	// atReceive: the agent, once the end reaches it.
	atReceive
)

// workCost is one piece of a call's unavoidable work, measured alone.
type workCost struct {
	Name string `json:"name"`
	// CPUus: CPU per call (a call does each once): this process's user +
	// system time over a loop of workOps.
	CPUus float64 `json:"cpu_us"`
}

// cpuBound is the CPU bar's lower bound.
type cpuBound struct {
	// Work: each piece's median over the rounds, timed alone.
	Work []workCost `json:"work"`
	// WorkUs: the median of the rounds' Σ CPUus.
	WorkUs float64 `json:"work_us_per_call"`
	// MinimalUs: the CPU per call of the minimal chain with SPEC's
	// headers, each party doing the work at its place (specWorkWrites),
	// the least a call with the minimal writes costs; MinimalFloorUs is
	// the messaging floor of those writes (minimalMix), its messages with
	// the same headers.
	MinimalUs      float64 `json:"minimal_us_per_call"`
	MinimalFloorUs float64 `json:"minimal_floor_us_per_call"`
	// CallUs: the same of today's writes with SPEC's headers and the work
	// (specCallWorkWrites), the least a call with today's writes costs.
	CallUs float64 `json:"call_writes_us_per_call"`
	// MinimalToOwnFloor, MinimalToFloor, CallToFloor: the bounds as
	// ratios to the messaging floor of the minimal writes and of today's
	// call (the figure the goal is about), both with SPEC's headers, as
	// the chains carry them: like with like.
	MinimalToOwnFloor float64 `json:"minimal_to_its_floor"`
	MinimalToFloor    float64 `json:"minimal_to_floor"`
	CallToFloor       float64 `json:"call_writes_to_floor"`
	// LeastMinimalToOwnFloor, LeastCallToFloor: the same two bounds, each
	// round's the smaller of its ratios with either window of background
	// subtracted (cpuRounds.Least):
	// a background overestimated raises every ratio, the bounds' too, so
	// the out-of-reach verdict uses these, the least the background can
	// make them; the goal's ratio keeps the mean.
	LeastMinimalToOwnFloor float64 `json:"minimal_to_its_floor_least_background"`
	LeastCallToFloor       float64 `json:"call_writes_to_floor_least_background"`
	// Alone: the same bounds made of each chain without the work plus
	// the work timed alone (WorkUs), as they were made until the chains
	// did the work: shown beside, the difference being what the work costs
	// where a call does it beyond its cost in a loop of its own.
	// The out-of-reach verdict needs both ways above the goal: the
	// difference between them is not yet shown to be one every design
	// pays (a design might charge its work less garbage, or run it on
	// fewer goroutines).
	Alone struct {
		MinimalUs              float64 `json:"minimal_us_per_call"`
		CallUs                 float64 `json:"call_writes_us_per_call"`
		MinimalToOwnFloor      float64 `json:"minimal_to_its_floor"`
		CallToFloor            float64 `json:"call_writes_to_floor"`
		LeastMinimalToOwnFloor float64 `json:"minimal_to_its_floor_least_background"`
		LeastCallToFloor       float64 `json:"call_writes_to_floor_least_background"`
	} `json:"work_timed_alone"`
	// RoundTripUs: the rounds' median CPU per call of the round trip,
	// which does today's writes and the work: a bound above it bounds
	// nothing in that run.
	RoundTripUs float64 `json:"round_trip_us_per_call"`
}

// workOps is how many times each piece of work is done to time it.
const workOps = 2000

// callWork is the work every auto-allowed call does besides its
// messaging, on the events of the newest call agent completed (read back
// from the events stream): encoding and decoding each message, the Rego
// decision (the configured policy, no run-time rules, as the bench's policy
// service), sealing the decision and checking the seal. The bench's agent is
// the only one that completes calls.
func callWork(ctx context.Context, nc *nats.Conn, cfg config.Config) ([]workPiece, error) {
	read := func(subj string) (*airlockv1.Event, error) {
		m, err := bus.LastStored(ctx, nc, cfg.Stream.Name, subj)
		if err != nil {
			return nil, err
		}
		if m == nil {
			return nil, fmt.Errorf("no event stored on %s", subj)
		}
		return envelope.Decode(m.Data, m.Header)
	}
	completed, err := read(subject.OfType(subject.Completed))
	if err != nil {
		return nil, fmt.Errorf("the work of a call: %w", err)
	}
	events := map[string]*airlockv1.Event{subject.Completed: completed}
	for _, typ := range []string{subject.Requested, subject.Allowed, subject.Started} {
		subj, err := subject.Event(completed.GetAgentId(), completed.GetCallId(), typ)
		if err != nil {
			return nil, err
		}
		if events[typ], err = read(subj); err != nil {
			return nil, fmt.Errorf("the work of call %s: %w", completed.GetCallId(), err)
		}
	}
	call := events[subject.Requested].GetRequested().GetCall()
	request := &airlockv1.Event{AgentId: call.GetAgentId(), CallId: call.GetCallId(), Revision: call.GetRevision(), Actor: events[subject.Requested].GetActor(),
		Body: &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: call}}}

	var code *decide.Code
	if cfg.Policy.Dir != "" {
		code, err = decide.CodeFromDir(cfg.Policy.Dir)
	} else {
		code, err = decide.DefaultCode()
	}
	if err != nil {
		return nil, err
	}
	policy, err := decide.NewEvaluator(ctx, code, nil, cfg.Policy.Profiles, decide.WithAskDefaults(decide.AskDefaultsFrom(cfg)))
	if err != nil {
		return nil, err
	}
	key, err := seal.ParseHex(cfg.Security.DecisionKey)
	if err != nil {
		return nil, err
	}
	// The policy decodes the agent's request as the agent encoded it; the
	// executor and the agent the events as the services encode them.
	msgs := map[string]*nats.Msg{}
	if msgs[subject.Requested], err = bus.EncodeRequest(request, "agent/"+call.GetAgentId(), ""); err != nil {
		return nil, err
	}
	for _, typ := range []string{subject.Allowed, subject.Started, subject.Completed} {
		if msgs[typ], err = bus.Encode(events[typ], "airlock/bench", ""); err != nil {
			return nil, err
		}
	}
	encode := func(ev *airlockv1.Event) func() error {
		return func() error { _, err := bus.Encode(ev, "airlock/bench", ""); return err }
	}
	decode := func(typ string) func() error {
		return func() error { _, err := envelope.Decode(msgs[typ].Data, msgs[typ].Header); return err }
	}
	allowed := events[subject.Allowed]
	return []workPiece{
		{"encode the request (agent)", func() error { _, err := bus.EncodeRequest(request, "agent/"+call.GetAgentId(), ""); return err }, atSubmit},
		{"decode the request (policy)", decode(subject.Requested), atDecide},
		{"Rego decision (policy)", func() error { _, err := policy.Evaluate(ctx, call, time.Now()); return err }, atDecide},
		// The seal is computed, not set: the pieces run concurrently on
		// the one event.
		{"seal the decision (policy)", func() error { _, err := key.DecisionSeal(allowed); return err }, atDecide},
		{"encode the decision (policy)", encode(allowed), atDecide},
		{"decode the decision (executor)", decode(subject.Allowed), atClaim},
		{"check the decision's seal (executor)", func() error { _, err := key.VerifyDecision(allowed); return err }, atClaim},
		{"encode started (executor)", encode(events[subject.Started]), atClaim},
		{"encode the end (executor)", encode(completed), atEnd},
		{"decode the end (agent)", decode(subject.Completed), atReceive},
	}, nil
}

// timeWork times each piece alone, as a part is counted (partMeter.quiet:
// after a full collection, the collector off, the background subtracted):
// workOps of it after a warm-up. Each piece's cost is returned; the rounds
// set its background once the round is over and divide by workOps
// (workCosts).
func (pm *partMeter) timeWork(ctx context.Context, pieces []workPiece) ([]partCost, error) {
	costs := make([]partCost, 0, len(pieces))
	for _, p := range pieces {
		for range workOps / 10 { // warm up
			if err := p.do(); err != nil {
				return nil, fmt.Errorf("%s: %w", p.name, err)
			}
		}
		c, err := pm.quiet(ctx, func() error {
			for range workOps {
				if err := p.do(); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		costs = append(costs, c)
	}
	return costs, nil
}

// workCosts are the pieces' figures per call from what timeWork counted.
func workCosts(pieces []workPiece, costs []partCost) []workCost {
	out := make([]workCost, len(costs))
	for i, c := range costs {
		out[i] = workCost{Name: pieces[i].name, CPUus: c.Seconds() * 1e6 / workOps}
	}
	return out
}

// bound sets b from the rounds: the work and the CPU per call of the
// minimal chain and of today's writes, both with SPEC's headers and the
// work done in the chain, against the messaging floors of their writes and
// of today's call with the same headers in the same rounds: each ratio is
// the median of its per-round values, each CPU figure the median of the
// rounds'.
func (b *cpuBound) bound(rs *cpuRounds) {
	b.Work = nil
	if len(rs.work) > 0 {
		for i, piece := range rs.work[0] {
			var us []float64
			for _, r := range rs.work {
				us = append(us, r[i].CPUus)
			}
			b.Work = append(b.Work, workCost{Name: piece.Name, CPUus: median(us)})
		}
	}
	b.WorkUs, b.MinimalUs, b.CallUs, b.MinimalFloorUs = median(rs.WorkUs), median(rs.SpecWorkUs), median(rs.SpecCallWorkUs), median(rs.MinimalFloorUs)
	b.RoundTripUs = median(rs.RoundTripUs)
	b.MinimalToOwnFloor = medianRatio(rs.SpecWorkUs, rs.MinimalFloorUs)
	b.MinimalToFloor = medianRatio(rs.SpecWorkUs, rs.FloorUs)
	b.CallToFloor = medianRatio(rs.SpecCallWorkUs, rs.FloorUs)
	before, after := rs.Least.Before, rs.Least.After
	b.LeastMinimalToOwnFloor = medianLeastRatio(ratios(before.SpecWorkUs, before.MinimalFloorUs), ratios(after.SpecWorkUs, after.MinimalFloorUs))
	b.LeastCallToFloor = medianLeastRatio(ratios(before.SpecCallWorkUs, before.FloorUs), ratios(after.SpecCallWorkUs, after.FloorUs))
	minimalAlone, callAlone := plus(rs.SpecChainUs, rs.WorkUs), plus(rs.SpecCallUs, rs.WorkUs)
	b.Alone.MinimalUs, b.Alone.CallUs = median(minimalAlone), median(callAlone)
	b.Alone.MinimalToOwnFloor, b.Alone.CallToFloor = medianRatio(minimalAlone, rs.MinimalFloorUs), medianRatio(callAlone, rs.FloorUs)
	b.Alone.LeastMinimalToOwnFloor = medianLeastRatio(ratios(plus(before.SpecChainUs, before.WorkUs), before.MinimalFloorUs),
		ratios(plus(after.SpecChainUs, after.WorkUs), after.MinimalFloorUs))
	b.Alone.LeastCallToFloor = medianLeastRatio(ratios(plus(before.SpecCallUs, before.WorkUs), before.FloorUs),
		ratios(plus(after.SpecCallUs, after.WorkUs), after.FloorUs))
}

// plus is each round's chain + work.
func plus(chain, work []float64) []float64 {
	out := make([]float64, min(len(chain), len(work)))
	for i := range out {
		out[i] = chain[i] + work[i]
	}
	return out
}

// ratios are the rounds' us ÷ floor, each round's own; 0 for a round
// that measured either at or below 0 (its background, subtracted, was
// more than a loaded machine left it).
func ratios(us, floor []float64) []float64 {
	out := make([]float64, min(len(us), len(floor)))
	for i := range out {
		if us[i] > 0 && floor[i] > 0 {
			out[i] = us[i] / floor[i]
		}
	}
	return out
}

// medianLeastRatio is the median over the rounds of the smaller of a
// round's two ratios (rounds without one left out).
func medianLeastRatio(a, b []float64) float64 {
	var least []float64
	for i := range min(len(a), len(b)) {
		if a[i] > 0 && b[i] > 0 {
			least = append(least, min(a[i], b[i]))
		}
	}
	return median(least)
}

// medianRatio is the median over the rounds of us ÷ floor, each round's
// own; rounds without a floor left out.
func medianRatio(us, floor []float64) float64 {
	var rs []float64
	for _, r := range ratios(us, floor) {
		if r > 0 {
			rs = append(rs, r)
		}
	}
	return median(rs)
}
