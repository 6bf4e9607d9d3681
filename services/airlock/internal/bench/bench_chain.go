package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The chain floor: the JetStream operations an auto-allowed call performs
// one after another (callMix, ARCHITECTURE.md "Exactly once"), done with
// bare nats.go and no airlock code, in the same shape as the services that
// do them: an agent, a "policy" and an "executor", each on a connection of
// its own, the two services with as many workers as their defaults.
//
//  1. agent: sync publish of the request into a work-queue stream;
//  2. policy: delivery of it from a durable pull consumer; compare-and-append
//     of `requested` on the call's subjects (expected sequence 0, as for a
//     new call); sync publish of the decision (with its message id); ack;
//  3. executor: delivery of the decision from a durable pull consumer on the
//     events stream; compare-and-append of `started` (the claim, expected
//     sequence 0 on the call's ledger), then of `completed` after it; ack;
//  4. the events stream republishes every event; the agent, subscribed to
//     the end type only, receives `completed`.
//
// It is what any design that keeps these writes in sequence pays for a
// call before doing any work of its own: the round trip's latency against
// it is what airlock adds; its latency against the raw hop is the least a
// call with these writes can be.
//
// The minimal exactly-once chain (minimalWrites) is the same with the
// writes no design that keeps SPEC's guarantees can do without: the
// agent's durable request, the decision appended as the call's first event
// (compare-and-append after sequence 0: it records the call once, however
// often the request is delivered, so no separate `requested`), the
// executor's claim (`started`) and its end. Its latency against the raw hop
// is the least any such design can reach.

// chainWrites is which writes a chain rig does.
type chainWrites int

const (
	// callWrites: an auto-allowed call's writes today (single server):
	// `requested`, then the decision.
	callWrites chainWrites = iota
	// minimalWrites: the decision alone, as the call's first event.
	minimalWrites
)

// prefix names the rig's subjects ("<prefix>.req.*", "<prefix>.evt.>",
// "<prefix>.out.>") and, upper-cased, its streams.
func (w chainWrites) prefix() string {
	if w == minimalWrites {
		return "minchain"
	}
	return "chain"
}

// chainWorkers is how many handlers each service of the chain runs: the
// policy's and the executor's default workers (config: policy.workers,
// executor.workers).
const chainWorkers = 32

// newChainRig sets up the two streams and the two relays of a chain that
// does writes on the server at url; op does one call's chain and returns
// when the agent has received `completed`; count reads what the server
// stored and delivered so far (as serverCounts for the services). Every
// message carries payload.
func newChainRig(ctx context.Context, url string, payload []byte, writes chainWrites) (op func(context.Context) error, count func() (callCounts, error), stop func(), err error) {
	var cleanup rigCleanup
	stop = cleanup.run
	defer func() {
		if err != nil {
			stop()
		}
	}()
	p := writes.prefix()
	names := strings.ToUpper(p)
	conn := func(name string) (*nats.Conn, jetstream.JetStream, error) {
		nc, err := nats.Connect(url, nats.Name("airlock-bench-"+p+"-"+name))
		if err != nil {
			return nil, nil, err
		}
		cleanup.add(nc.Close)
		js, err := jetstream.New(nc)
		return nc, js, err
	}
	agent, ajs, err := conn("agent")
	if err != nil {
		return nil, nil, nil, err
	}
	_, pjs, err := conn("policy")
	if err != nil {
		return nil, nil, nil, err
	}
	_, xjs, err := conn("executor")
	if err != nil {
		return nil, nil, nil, err
	}
	intake, done, err := floorStream(ctx, ajs, jetstream.StreamConfig{Name: names + "_REQ", Subjects: []string{p + ".req.*"}, Retention: jetstream.WorkQueuePolicy})
	if err != nil {
		return nil, nil, nil, err
	}
	cleanup.add(done)
	events, done, err := floorStream(ctx, ajs, jetstream.StreamConfig{Name: names + "_EVT", Subjects: []string{p + ".evt.>"},
		RePublish: &jetstream.RePublish{Source: p + ".evt.>", Destination: p + ".out.>"}})
	if err != nil {
		return nil, nil, nil, err
	}
	cleanup.add(done)

	policy := func(m jetstream.Msg) error {
		id := m.Subject()[len(p+".req."):]
		call := p + ".evt." + id + "."
		first := jetstream.WithExpectLastSequenceForSubject(0, call+">") // the call's first event
		if writes == minimalWrites {
			if _, err := pjs.Publish(ctx, call+"allowed", payload, first); err != nil {
				return fmt.Errorf("append the decision: %w", err)
			}
			return m.Ack()
		}
		if _, err := pjs.Publish(ctx, call+"requested", payload, first); err != nil {
			return fmt.Errorf("append requested: %w", err)
		}
		if _, err := pjs.Publish(ctx, call+"allowed", payload, jetstream.WithMsgID(id+".allowed")); err != nil {
			return fmt.Errorf("publish the decision: %w", err)
		}
		return m.Ack()
	}
	executor := func(m jetstream.Msg) error {
		subj := m.Subject()
		ledger := subj[:len(subj)-len("allowed")] + "exec."
		started, err := xjs.Publish(ctx, ledger+"started", payload, jetstream.WithExpectLastSequenceForSubject(0, ledger+"*"))
		if err != nil {
			return fmt.Errorf("append started: %w", err)
		}
		if _, err := xjs.Publish(ctx, ledger+"completed", payload, jetstream.WithExpectLastSequenceForSubject(started.Sequence, ledger+"*")); err != nil {
			return fmt.Errorf("append completed: %w", err)
		}
		return m.Ack()
	}
	var relayErr atomic.Pointer[error]
	for _, r := range []struct {
		stream  jetstream.Stream
		durable string
		filter  string
		handle  func(jetstream.Msg) error
	}{{intake, "policy", p + ".req.*", policy}, {events, "executor", p + ".evt.*.allowed", executor}} {
		stopRelay, err := relay(ctx, r.stream, r.durable, r.filter, chainWorkers, func(m jetstream.Msg) {
			if err := r.handle(m); err != nil {
				relayErr.CompareAndSwap(nil, &err)
			}
		})
		if err != nil {
			return nil, nil, nil, err
		}
		cleanup.add(stopRelay)
	}

	replies := newReplyWaiters()
	sub, err := agent.Subscribe(p+".out.*.exec.completed", func(m *nats.Msg) {
		replies.arrived(m.Subject[len(p+".out.") : len(m.Subject)-len(".exec.completed")])
	})
	if err != nil {
		return nil, nil, nil, err
	}
	cleanup.add(func() { _ = sub.Unsubscribe() })
	_ = sub.SetPendingLimits(-1, -1)
	if err := agent.Flush(); err != nil {
		return nil, nil, nil, err
	}
	var seq atomic.Int64
	op = func(ctx context.Context) error {
		id := "c" + strconv.FormatInt(seq.Add(1), 10)
		reply := replies.expect(id)
		if _, err := ajs.Publish(ctx, p+".req."+id, payload); err != nil {
			return fmt.Errorf("publish the request: %w", err)
		}
		err := waitReply(ctx, reply, p+" "+id)
		if relay := relayErr.Load(); errors.Is(err, errNoReply) && relay != nil {
			return fmt.Errorf("chain %s: %w", id, *relay)
		}
		return err
	}
	count = func() (callCounts, error) {
		return countsOf(ctx, ajs, names+"_REQ", names+"_EVT", "policy", "executor")
	}
	return op, count, stop, nil
}

// relay consumes filter of stream with a durable pull consumer and workers
// handlers, as a service does (consume.Run: explicit ack, 1,000 pending at
// most, pulls of 256).
func relay(ctx context.Context, stream jetstream.Stream, durable, filter string, workers int, handle func(jetstream.Msg)) (stop func(), err error) {
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: durable, AckPolicy: jetstream.AckExplicitPolicy,
		FilterSubject: filter, MaxAckPending: 1000, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", durable, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(256))
	if err != nil {
		return nil, fmt.Errorf("consume %s: %w", durable, err)
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				m, err := it.Next()
				if err != nil {
					return
				}
				handle(m)
			}
		}()
	}
	return func() { it.Stop(); wg.Wait() }, nil
}
