package bench

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/policy"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/consume"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/ids"
	"github.com/airlock-gate/airlock/services/shared/subject"
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
// executor's claim (`started`) and its end. The minimal chain with SPEC's
// headers (specWrites) does the same writes, each message carrying what
// SPEC §3 and exactly-once require of it: the CloudEvents attributes and
// traceparent, and a compare-and-append's two expectation headers. Its
// latency against the raw hop, and its CPU plus the work every call does,
// are the least any such design can reach.

// chainWrites is which writes a chain rig does.
type chainWrites int

const (
	// callWrites: an auto-allowed call's writes today (single server):
	// `requested`, then the decision.
	callWrites chainWrites = iota
	// minimalWrites: the decision alone, as the call's first event.
	minimalWrites
	// envelopedWrites: callWrites with every message carrying the header
	// airlock's envelope gives it (CloudEvents attributes, traceparent, then
	// the message id or the two expectations; a content type only on
	// protojson, which the chains do not send) and a call
	// id as long as the SDK's: what the header alone costs the chain.
	envelopedWrites
	// specWrites: minimalWrites with every message carrying the headers
	// SPEC §3 and exactly-once require and nothing else: ce-id, ce-type,
	// ce-source, ce-time, ce-specversion and traceparent, and each
	// compare-and-append's two expectation headers (no Content-Type: SPEC
	// needs it only on protojson; no message id: every event is a
	// compare-and-append, and airlock gives a request none); call ids as
	// long as the SDK's.
	specWrites
	// specCallWrites: callWrites with the headers of specWrites (and the
	// decision's message id, which its write needs): today's writes with
	// what SPEC requires of each message and nothing else.
	specCallWrites
	// specWorkWrites: specWrites with each party doing the work every call
	// needs (callWork) at its place in the chain, one piece after the
	// other as a call does it: the least any design with SPEC's guarantees
	// can take for a call, its writes and its own unavoidable work
	// together — the p50 verdict's chain and the minimal CPU bound's.
	specWorkWrites
	// specCallWorkWrites: specCallWrites with the same work, the policy's
	// before both its writes (today's policy decides after appending
	// `requested`: the order changes the latency, not the CPU): today's
	// writes and the work together, in the CPU bound.
	specCallWorkWrites
)

// minimal: the writes are the minimal chain's (the decision as the call's
// first event, no separate `requested`).
func (w chainWrites) minimal() bool {
	return w == minimalWrites || w == specWrites || w == specWorkWrites
}

// prefix names the rig's subjects ("<prefix>.req.*", "<prefix>.evt.>",
// "<prefix>.out.>") and, upper-cased, its streams.
func (w chainWrites) prefix() string {
	switch w {
	case minimalWrites:
		return "minchain"
	case envelopedWrites:
		return "envchain"
	case specWrites:
		return "specchain"
	case specCallWrites:
		return "speccall"
	case specWorkWrites:
		return "specwork"
	case specCallWorkWrites:
		return "speccallwork"
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
// message carries payload (with a header: header and body together).
// Each piece of work is done at its place (workPiece.at) by the party
// that does it there; only specWorkWrites and specCallWorkWrites are given
// any.
func newChainRig(ctx context.Context, url string, payload []byte, writes chainWrites, work []workPiece) (op func(context.Context) error, count func() (callCounts, error), stop func(), err error) {
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

	var headers envelopeHeaders // nil: bare messages
	switch writes {
	case envelopedWrites:
		headers, err = newEnvelopeHeaders(p, nil)
	case specWrites, specCallWrites, specWorkWrites, specCallWorkWrites:
		headers, err = newEnvelopeHeaders(p, specHeaders)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	// doWork does the work of stage, each piece in turn.
	doWork := func(stage workStage) error {
		for _, w := range work {
			if w.at != stage {
				continue
			}
			if err := w.do(); err != nil {
				return fmt.Errorf("%s: %w", w.name, err)
			}
		}
		return nil
	}
	// publish writes payload to subj as the event typ of the call: a
	// compare-and-append after seq on expect when expect is set, else with
	// msgID as its message id when set; with the header of the writes
	// (envelopedWrites, specWrites, specCallWrites) when they have one.
	publish := func(js jetstream.JetStream, subj, typ, call, expect string, seq uint64, msgID string) (*jetstream.PubAck, error) {
		if headers == nil {
			var opts []jetstream.PublishOpt
			if expect != "" {
				opts = append(opts, jetstream.WithExpectLastSequenceForSubject(seq, expect))
			} else if msgID != "" {
				opts = append(opts, jetstream.WithMsgID(msgID))
			}
			return js.Publish(ctx, subj, payload, opts...)
		}
		hdr := headers.of(typ, call, expect, seq, msgID != "")
		// The header takes its bytes from the body: payload is as large as
		// a call's event, header included, and the records stay so.
		return js.PublishMsg(ctx, &nats.Msg{Subject: subj, Header: hdr, Data: payload[:max(0, len(payload)-headerSize(hdr))]})
	}
	// The policy acks the intake as the policy service does: the last
	// request's ack held back until the next's (consume.Acker), so calls
	// one at a time do not empty the work queue's block on every call.
	intakeAcks := consume.NewAcker(policy.IntakeAckHold(config.Default().Intake), slog.New(slog.DiscardHandler))
	cleanup.add(intakeAcks.Flush)
	decide := func(m jetstream.Msg) error {
		id := m.Subject()[len(p+".req."):]
		call := p + ".evt." + id + "."
		if err := doWork(atDecide); err != nil {
			return err
		}
		if writes.minimal() {
			if _, err := publish(pjs, call+"allowed", subject.Allowed, id, call+">", 0, ""); err != nil { // the call's first event
				return fmt.Errorf("append the decision: %w", err)
			}
			intakeAcks.Ack(m)
			return nil
		}
		if _, err := publish(pjs, call+"requested", subject.Requested, id, call+">", 0, ""); err != nil { // the call's first event
			return fmt.Errorf("append requested: %w", err)
		}
		if _, err := publish(pjs, call+"allowed", subject.Allowed, id, "", 0, id+".allowed"); err != nil {
			return fmt.Errorf("publish the decision: %w", err)
		}
		intakeAcks.Ack(m)
		return nil
	}
	executor := func(m jetstream.Msg) error {
		subj := m.Subject()
		ledger := subj[:len(subj)-len("allowed")] + "exec."
		id := subj[len(p+".evt.") : len(subj)-len(".allowed")]
		if err := doWork(atClaim); err != nil {
			return err
		}
		started, err := publish(xjs, ledger+"started", subject.Started, id, ledger+"*", 0, "")
		if err != nil {
			return fmt.Errorf("append started: %w", err)
		}
		if err := doWork(atEnd); err != nil {
			return err
		}
		if _, err := publish(xjs, ledger+"completed", subject.Completed, id, ledger+"*", started.Sequence, ""); err != nil {
			return fmt.Errorf("append completed: %w", err)
		}
		return m.Ack()
	}
	// A party's failure breaks the rig, not one call: the first is kept and
	// fails the call waiting and every one after it (a bench must not go on
	// measuring a chain that skipped a write), and failed ends the waits at once.
	var relayErr atomic.Pointer[error]
	failed := make(chan struct{})
	fail := func(err error) {
		if relayErr.CompareAndSwap(nil, &err) {
			close(failed)
		}
	}
	for _, r := range []struct {
		stream  jetstream.Stream
		durable string
		filter  string
		handle  func(jetstream.Msg) error
	}{{intake, "policy", p + ".req.*", decide}, {events, "executor", p + ".evt.*.allowed", executor}} {
		stopRelay, err := relay(ctx, r.stream, r.durable, r.filter, chainWorkers, func(m jetstream.Msg) {
			if err := r.handle(m); err != nil {
				fail(err)
			}
		})
		if err != nil {
			return nil, nil, nil, err
		}
		cleanup.add(stopRelay)
	}

	replies := newReplyWaiters()
	sub, err := agent.Subscribe(p+".out.*.exec.completed", func(m *nats.Msg) {
		if err := doWork(atReceive); err != nil {
			fail(err)
		}
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
		if headers != nil {
			id = ids.New("call") // as long as the SDK's
		}
		reply := replies.expect(id)
		if err := doWork(atSubmit); err != nil {
			return err
		}
		if _, err := publish(ajs, p+".req."+id, subject.Requested, id, "", 0, ""); err != nil {
			return fmt.Errorf("publish the request: %w", err)
		}
		err := waitReply(ctx, reply, failed, p+" "+id)
		if relay := relayErr.Load(); relay != nil {
			return fmt.Errorf("chain %s: %w", id, *relay)
		}
		return err
	}
	count = func() (callCounts, error) {
		return countsOf(ctx, ajs, names+"_REQ", names+"_EVT", "policy", "executor")
	}
	return op, count, stop, nil
}

// envelopeHeaders are the headers airlock's envelope gives a call's
// messages (agent "bench", revision 1, event ids as the services choose
// them), encoded once for a placeholder call with the chain's subjects:
// of gives them for a call, so that the chain carries airlock's headers
// without doing airlock's encoding, and without much work of the rig's own
// (a value without the call in it is shared, not copied: the chains' CPU is
// a bound's, and the headers' encoding is in the work).
type envelopeHeaders map[headerKind]nats.Header

// headerKind is which of a call's messages a header is for: its event
// type, whether it is a compare-and-append, whether it carries a message id.
type headerKind struct {
	typ          string
	after, msgID bool
}

// specHeaders are the headers SPEC §3 and exactly-once require of a
// call's messages: the CloudEvents attributes, traceparent, and a message
// id or a compare-and-append's expectations where the write needs them.
var specHeaders = []string{envelope.HeaderCEID, envelope.HeaderCEType, envelope.HeaderCESource, envelope.HeaderCETime, envelope.HeaderCESpec,
	envelope.HeaderTraceparent, envelope.HeaderMsgID, envelope.HeaderExpectedLastSubjSeq, envelope.HeaderExpectedLastSubjSeqSubject}

// placeholderCall is a call id as long as the SDK's (ids.New("call")).
const placeholderCall = "call_000000000000000000000000"

// newEnvelopeHeaders encodes the headers of each kind of message of a
// chain with prefix's subjects; only those named in keep when keep is
// given.
func newEnvelopeHeaders(prefix string, keep []string) (envelopeHeaders, error) {
	hs := envelopeHeaders{}
	call := prefix + ".evt." + placeholderCall + "."
	for _, w := range []struct {
		typ, expect string
		msgID       bool
	}{{subject.Requested, "", false}, {subject.Requested, call + ">", false}, {subject.Allowed, "", true}, {subject.Allowed, call + ">", false},
		{subject.Started, call + "exec.*", false}, {subject.Completed, call + "exec.*", false}} {
		h, err := envelopeHeader(w.typ, placeholderCall, w.expect, 0, w.msgID)
		if err != nil {
			return nil, fmt.Errorf("encode a %s event: %w", w.typ, err)
		}
		if keep != nil {
			for k := range h {
				if !slices.Contains(keep, k) {
					delete(h, k)
				}
			}
		}
		hs[headerKind{w.typ, w.expect != "", w.msgID}] = h
	}
	return hs, nil
}

// of is the header of the message typ of call: a compare-and-append after
// seq on expect when expect is set, else with its message id when msgID,
// else an agent's request.
func (hs envelopeHeaders) of(typ, call, expect string, seq uint64, msgID bool) nats.Header {
	t := hs[headerKind{typ, expect != "", msgID}]
	h := make(nats.Header, len(t)+2)
	for k, v := range t {
		if strings.Contains(v[0], placeholderCall) {
			h[k] = []string{strings.ReplaceAll(v[0], placeholderCall, call)}
		} else {
			h[k] = v // read only, by nats.go's encoding of the message
		}
	}
	if expect != "" {
		h[envelope.HeaderExpectedLastSubjSeq] = []string{strconv.FormatUint(seq, 10)}
		h[envelope.HeaderExpectedLastSubjSeqSubject] = []string{expect}
	}
	return h
}

// envelopeHeader is the header envelope encodes for the event typ of call:
// an agent's request when there is neither expect nor msgID, a
// compare-and-append after seq on expect when expect is set, else an event
// with its message id.
func envelopeHeader(typ, call, expect string, seq uint64, msgID bool) (nats.Header, error) {
	ev := &airlockv1.Event{AgentId: "bench", CallId: call, Revision: 1}
	ev.EventId = callref.Ref{Agent: "bench", Call: call, Rev: 1}.EventID(typ)
	switch typ {
	case subject.Requested:
		ev.Body = &airlockv1.Event_Requested{Requested: &airlockv1.Requested{}}
	case subject.Allowed:
		ev.Body = &airlockv1.Event_Allowed{Allowed: &airlockv1.Allowed{}}
		ev.EventId = callref.Ref{Agent: "bench", Call: call, Rev: 1}.EventID("decision") // as policy.DecisionEvent
	case subject.Started:
		ev.Body = &airlockv1.Event_Started{Started: &airlockv1.Started{}}
		ev.EventId += ".1" // the attempt
	default:
		ev.Body = &airlockv1.Event_Completed{Completed: &airlockv1.Completed{}}
		ev.EventId = callref.Ref{Agent: "bench", Call: call, Rev: 1}.EventID("result")
	}
	source := "airlock/policy"
	if subject.IsExec(typ) {
		source = "airlock/executor"
	}
	var m envelope.Message
	var err error
	switch {
	case expect != "":
		m, err = envelope.EncodeAfter(ev, source, "", expect, seq)
	case msgID:
		m, err = envelope.Encode(ev, source, "")
	default:
		ev.EventId = ""
		m, err = envelope.EncodeRequest(ev, "agent/bench", "")
	}
	return nats.Header(m.Header), err
}

// headerSize is how many bytes h takes in a message ("NATS/1.0\r\n", a
// "key: value\r\n" line per value, "\r\n"), as the server stores it.
func headerSize(h nats.Header) int {
	n := len("NATS/1.0\r\n\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(": ") + len(v) + len("\r\n")
		}
	}
	return n
}

// relay consumes filter of stream with a durable pull consumer and workers
// handlers, as a service does (consume.Run: explicit ack, 1,000 pending at
// most, pulls of 256).
// relayConsumer is the durable consumer relay reads (created ahead by a
// rig whose count must not include creating it).
func relayConsumer(durable, filter string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{Durable: durable, AckPolicy: jetstream.AckExplicitPolicy,
		FilterSubject: filter, MaxAckPending: 1000, DeliverPolicy: jetstream.DeliverAllPolicy}
}

func relay(ctx context.Context, stream jetstream.Stream, durable, filter string, workers int, handle func(jetstream.Msg)) (stop func(), err error) {
	cons, err := stream.CreateOrUpdateConsumer(ctx, relayConsumer(durable, filter))
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
