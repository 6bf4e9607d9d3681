package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/embedded"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// The messaging floor (docs/benchmarks.md): what each JetStream operation an airlock
// call is made of costs alone, measured against the same embedded server
// in the same run, so that a call's CPU and latency can be read as a ratio
// to the operations it needs.

// newFloorCmd prints the messaging floor on its own; `airlock bench
// roundtrip` measures the same in its run to compare a call against it.
func newFloorCmd(env Env) *cobra.Command {
	var (
		asJSON bool
		o      floorOptions
	)
	cmd := &cobra.Command{
		Use:   "floor",
		Short: "What each JetStream operation costs alone (CPU per op, latency) on an embedded server",
		Long: `Starts an embedded NATS server (file store in a temp dir, fsync as dev.sync)
and measures, one kind at a time in this process: sync publish, async publish
(acks batched), compare-and-append publish (Nats-Expected-Last-Subject-Sequence
with a wildcard -Subject), KV create, KV update, Direct Get of a subject's last
message, pull-consumer delivery + ack (from a limits stream and from a work
queue), core publish → subscriber, and a raw
hop (publish → consumer → re-publish → receive). Latency is one operation at a
time; CPU per operation is the process's user + system time (client and
embedded server together) with --concurrency operations in flight.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var setup string
			return benchRun(cmd, env, "", asJSON, func(ctx context.Context, cfg config.Config) (*messagingFloor, error) {
				_, url, stop, err := startBenchServer(cfg)
				if err != nil {
					return nil, err
				}
				defer stop()
				setup = "embedded NATS, file store, fsync " + config.SyncText(cfg.Dev.Sync)
				return measureFloor(ctx, url, o)
			}, func(w io.Writer, f *messagingFloor) { printFloor(w, f, setup) })
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&asJSON, "json", false, "print one JSON object with every figure")
	fl.IntVar(&o.Samples, "samples", 2000, "operations timed one at a time for each latency")
	fl.IntVar(&o.Ops, "ops", 20000, "operations counted for each CPU figure")
	fl.IntVar(&o.Concurrency, "concurrency", 64, "operations in flight while CPU is counted")
	fl.IntVar(&o.Payload, "payload", 256, "bytes per message")
	return cmd
}

// startBenchServer starts an embedded NATS server on a free port with a
// file store under a temporary directory (dir, which the bench may use for
// its other files too), fsync as cfg.Dev.Sync says; stop ends the server
// and removes dir.
func startBenchServer(cfg config.Config) (dir, url string, stop func(), err error) {
	dir, err = os.MkdirTemp("", "airlock-bench-")
	if err != nil {
		return "", "", nil, err
	}
	interval, _ := config.ParseSync(cfg.Dev.Sync)
	ns, err := embedded.Start(embedded.Options{Port: -1, StoreDir: filepath.Join(dir, "nats"), SyncAlways: interval == 0, SyncInterval: interval})
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", "", nil, err
	}
	return dir, ns.URL(), func() { ns.Stop(); _ = os.RemoveAll(dir) }, nil
}

func printFloor(w io.Writer, f *messagingFloor, setup string) {
	fmt.Fprintf(w, "messaging floor — %s; %d B messages; CPU with %d in flight\n\n", setup, f.Payload, f.Concurrency)
	fmt.Fprintf(w, "%-44s %10s %10s %12s %12s\n", "operation", "p50", "p99", "CPU per op", "per second")
	for _, r := range []struct {
		name string
		op   floorOp
	}{
		{"sync publish", f.SyncPublish},
		{"async publish (acks batched)", f.AsyncPublish},
		{"compare-and-append publish (wildcard)", f.CASPublish},
		{"atomic batch of two, compare-and-append first", f.BatchAppend2},
		{"KV create", f.KVCreate},
		{"KV update", f.KVUpdate},
		{"Direct Get, last by subject", f.DirectGet},
		{"pull delivery + ack", f.PullDeliverAck},
		{"pull delivery + ack, work queue", f.PullDeliverAckWorkQueue},
		{"core publish → subscriber", f.CorePubSub},
		{"RePublish, nobody subscribed (extra CPU)", f.RePublish},
		{"RePublish to a subscriber (extra CPU)", f.RePublishDelivered},
		{"raw hop (publish→consume→re-publish→recv)", f.RawHop},
	} {
		fmt.Fprintf(w, "%-44s %8.1fµs %8.1fµs %10.1fµs %12.0f\n", r.name, r.op.Latency.P50us, r.op.Latency.P99us, r.op.CPUPerOpUs, r.op.PerSecond)
	}
}

// floorOptions tune measureFloor.
type floorOptions struct {
	// Samples: operations timed one at a time for each latency (default 2,000).
	Samples int
	// Ops: operations counted for each CPU figure (default 20,000).
	Ops int
	// Concurrency: operations in flight while CPU is counted (default 64),
	// as in the round trip's throughput run.
	Concurrency int
	// Payload bytes of every message (default 256).
	Payload int
}

func (o *floorOptions) defaults() {
	if o.Samples <= 0 {
		o.Samples = 2000
	}
	if o.Ops <= 0 {
		o.Ops = 20000
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 64
	}
	if o.Payload <= 0 {
		o.Payload = 256
	}
}

// floorOp is one JetStream operation measured alone.
type floorOp struct {
	// Latency of one operation, one at a time.
	Latency latency `json:"latency"`
	// CPUPerOpUs is the process's CPU time (user + system: the client and the
	// embedded server, which share the process) per operation, with
	// Concurrency operations in flight.
	CPUPerOpUs float64 `json:"cpu_us_per_op"`
	PerSecond  float64 `json:"per_second"`
}

// messagingFloor holds every operation's figures. Multiply by what a call
// does (floorMix) to get the call's messaging floor.
type messagingFloor struct {
	Concurrency int `json:"concurrency"`
	Payload     int `json:"payload_bytes"`
	// SyncPublish: publish and wait for the PubAck.
	SyncPublish floorOp `json:"sync_publish"`
	// AsyncPublish: publishes in flight with acks batched; its latency is
	// from publish to PubAck with Concurrency publishes in flight.
	AsyncPublish floorOp `json:"async_publish"`
	// CASPublish: a publish with Nats-Expected-Last-Subject-Sequence and
	// Nats-Expected-Last-Subject-Sequence-Subject (a wildcard): a
	// compare-and-append on a stream subject, waiting for its PubAck.
	CASPublish floorOp `json:"cas_publish"`
	// BatchAppend2: two messages stored as one atomic batch (bus.AppendBatch),
	// the first a compare-and-append; one PubAck for both.
	BatchAppend2 floorOp `json:"batch_append_2"`
	KVCreate     floorOp `json:"kv_create"`
	KVUpdate     floorOp `json:"kv_update"`
	// DirectGet: the last message of a subject ($JS.API.DIRECT.GET).
	DirectGet floorOp `json:"direct_get_last"`
	// PullDeliverAck: a pull consumer's delivery of a stored message and its
	// ack; latency from a stored publish to its delivery.
	PullDeliverAck floorOp `json:"pull_deliver_ack"`
	// PullDeliverAckWorkQueue: the same from a work-queue stream, where the
	// ack also removes the message (the intake stream).
	PullDeliverAckWorkQueue floorOp `json:"pull_deliver_ack_work_queue"`
	// CorePubSub: a core NATS publish delivered to a subscriber.
	CorePubSub floorOp `json:"core_publish_deliver"`
	// RePublish, RePublishDelivered: what the stream's RePublish adds to a
	// stored message (the events stream republishes every event on
	// airlock.out.>), with nobody subscribed and with a subscriber that
	// receives it. CPUPerOpUs is the extra over a sync publish into a stream
	// without RePublish, measured in the same run (never below 0); the
	// latency is of the whole operation (publish to PubAck, or to the
	// subscriber's receipt).
	RePublish          floorOp `json:"republish"`
	RePublishDelivered floorOp `json:"republish_delivered"`
	// RawHop: publish to a stream → pull consumer → re-publish → receive,
	// the latency floor of a round trip.
	RawHop floorOp `json:"raw_hop"`
}

// floorMix counts the operations of one call, for messagingFloor.CPUus.
type floorMix struct {
	SyncPublish, AsyncPublish, CASPublish, BatchAppend2, KVCreate, KVUpdate, DirectGet, PullDeliverAck, PullDeliverAckWorkQueue, CorePubSub float64
	RePublish, RePublishDelivered                                                                                                           float64
}

// CPUus is the CPU floor of mix: Σ count × CPU per operation.
func (f *messagingFloor) CPUus(mix floorMix) float64 {
	return mix.SyncPublish*f.SyncPublish.CPUPerOpUs + mix.AsyncPublish*f.AsyncPublish.CPUPerOpUs +
		mix.CASPublish*f.CASPublish.CPUPerOpUs + mix.BatchAppend2*f.BatchAppend2.CPUPerOpUs + mix.KVCreate*f.KVCreate.CPUPerOpUs + mix.KVUpdate*f.KVUpdate.CPUPerOpUs +
		mix.DirectGet*f.DirectGet.CPUPerOpUs + mix.PullDeliverAck*f.PullDeliverAck.CPUPerOpUs +
		mix.PullDeliverAckWorkQueue*f.PullDeliverAckWorkQueue.CPUPerOpUs + mix.CorePubSub*f.CorePubSub.CPUPerOpUs +
		mix.RePublish*f.RePublish.CPUPerOpUs + mix.RePublishDelivered*f.RePublishDelivered.CPUPerOpUs
}

// measureFloor measures every operation against the NATS server at url
// (start it embedded, with the settings the measured calls use), each in
// its own stream or bucket (names starting FLOOR_), which it deletes after.
func measureFloor(ctx context.Context, url string, o floorOptions) (*messagingFloor, error) {
	o.defaults()
	nc, js, err := floorConn(url, "airlock-bench-floor")
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	f := &messagingFloor{Concurrency: o.Concurrency, Payload: o.Payload}
	payload := make([]byte, o.Payload)
	bare := bareFloorMsgs(payload)
	steps := []struct {
		name string
		out  *floorOp
		run  func() (floorOp, error)
	}{
		{"sync publish", &f.SyncPublish, func() (floorOp, error) { return measureRig(o, floorSyncPublishRig(ctx, js, o, bare)) }},
		{"async publish", &f.AsyncPublish, func() (floorOp, error) { return floorAsyncPublish(ctx, js, o, payload) }},
		{"compare-and-append publish", &f.CASPublish, func() (floorOp, error) { return measureRig(o, floorCASPublishRig(ctx, js, o, bare)) }},
		{"atomic batch of two", &f.BatchAppend2, func() (floorOp, error) { return floorBatchAppend(ctx, js, o, payload) }},
		{"KV create", &f.KVCreate, func() (floorOp, error) { return floorKV(ctx, js, o, payload, false) }},
		{"KV update", &f.KVUpdate, func() (floorOp, error) { return floorKV(ctx, js, o, payload, true) }},
		{"direct get", &f.DirectGet, func() (floorOp, error) { return floorDirectGet(ctx, js, o, payload) }},
		{"pull delivery and ack", &f.PullDeliverAck, func() (floorOp, error) {
			return measureRig(o, floorPullRig(ctx, js, o, bare, jetstream.LimitsPolicy))
		}},
		{"pull delivery and ack from a work queue", &f.PullDeliverAckWorkQueue, func() (floorOp, error) {
			return measureRig(o, floorPullRig(ctx, js, o, bare, jetstream.WorkQueuePolicy))
		}},
		{"core publish and delivery", &f.CorePubSub, func() (floorOp, error) { return floorCore(ctx, url, o, payload) }},
		{"republish", &f.RePublish, func() (floorOp, error) {
			return overPublish(measureRig(o, floorRePublishRig(ctx, url, js, o, bare, false)))(f.SyncPublish)
		}},
		{"republish to a subscriber", &f.RePublishDelivered, func() (floorOp, error) {
			return overPublish(measureRig(o, floorRePublishRig(ctx, url, js, o, bare, true)))(f.SyncPublish)
		}},
		{"raw hop", &f.RawHop, func() (floorOp, error) { return floorHop(ctx, url, o, payload) }},
	}
	for _, s := range steps {
		op, err := s.run()
		if err != nil {
			return nil, fmt.Errorf("messaging floor, %s: %w", s.name, err)
		}
		*s.out = op
	}
	return f, nil
}

// floorConn connects to url as name, for the floor's operations (async
// publishes up to 4,096 unacknowledged).
func floorConn(url, name string) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(url, nats.Name(name))
	if err != nil {
		return nil, nil, fmt.Errorf("connect to %s: %w", url, err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// timed measures op one at a time (as worker Concurrency) for the latency,
// and with Concurrency workers for the CPU.
func timed(o floorOptions, op func(w, k int) error) (floorOp, error) {
	var f floorOp
	var err error
	if f.Latency, err = timeEach(o.Samples, func(i int) error { return op(o.Concurrency, i) }); err != nil {
		return f, err
	}
	f.CPUPerOpUs, f.PerSecond, err = cpuOf(o.Ops, o.Concurrency, op)
	return f, err
}

// jsErrStreamCreate is JetStream's "error creating stream" (nats.go names
// no constant for it).
const jsErrStreamCreate jetstream.ErrorCode = 10049

// retryStore runs create again when the server could not create the
// stream's store: on a loaded machine its file store can fail to start once
// (JetStream error 10049), which says nothing about the costs measured.
func retryStore(ctx context.Context, create func() error) error {
	var err error
	for attempt := range 3 {
		var apiErr *jetstream.APIError
		if err = create(); err == nil || !errors.As(err, &apiErr) || apiErr.ErrorCode != jsErrStreamCreate {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt+1) * 200 * time.Millisecond):
		}
	}
	return err
}

// floorStream creates a stream of its own for one measurement and returns
// a cleanup that deletes it.
func floorStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, func(), error) {
	cfg.Storage = jetstream.FileStorage
	var s jetstream.Stream
	err := retryStore(ctx, func() (err error) {
		s, err = js.CreateStream(ctx, cfg)
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("create stream %s: %w", cfg.Name, err)
	}
	return s, func() { _ = js.DeleteStream(context.WithoutCancel(ctx), cfg.Name) }, nil
}

// timeEach times n calls of op, one at a time, after a warm-up.
func timeEach(n int, op func(i int) error) (latency, error) {
	for i := range max(n/10, 10) {
		if err := op(-1 - i); err != nil {
			return latency{}, err
		}
	}
	lat := make([]time.Duration, n)
	for i := range lat {
		t0 := time.Now()
		if err := op(i); err != nil {
			return latency{}, err
		}
		lat[i] = time.Since(t0)
	}
	return summarize(lat), nil
}

func summarize(lat []time.Duration) latency {
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) / 1e3 }
	return latency{P50us: pct(0.50), P99us: pct(0.99), N: len(lat)}
}

// cpuOf runs total operations spread over workers goroutines (worker w
// runs op(w, k) for its k-th operation) and returns the process CPU per
// operation and the rate.
func cpuOf(total, workers int, op func(w, k int) error) (float64, float64, error) {
	cpu0, t0 := processCPU(), time.Now()
	if err := spread(total, workers, op); err != nil {
		return 0, 0, err
	}
	return cpuPerOp(processCPU()-cpu0, total), float64(total) / time.Since(t0).Seconds(), nil
}

// spread runs total operations over workers goroutines, worker w running
// op(w, k) for its k-th operation, and returns the first error.
func spread(total, workers int, op func(w, k int) error) error {
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				if next.Add(1) > int64(total) {
					return
				}
				if err := op(w, k); err != nil {
					once.Do(func() { firstErr = err })
					next.Store(int64(total))
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// floorRig is one operation of the messaging floor set up on a server, to
// be measured once (measureRig) or in rounds: latency times n operations
// one at a time; prepare, when set, readies n operations that run then
// does (a backlog to deliver), outside any count; run does n operations
// with the floor's concurrency in flight. stop removes what it set up. err
// is the setup's: the rig is usable only without it.
type floorRig struct {
	latency func(n int) (latency, error)
	prepare func(n int) error
	run     func(n int) error
	stop    func()
	err     error
}

// floorMsgs are what the messages of a floor operation carry: payload's
// bytes and no header (the bare floor, bareFloorMsgs), or the headers SPEC
// §3 requires of the call's message the operation stands for
// (specFloorMsgs) with the header's bytes taken from the body, so that
// the stored records stay as large as the call's (as the chains' do).
type floorMsgs struct {
	// tag keeps a rig's streams and subjects apart from the other
	// variant's ("" for the bare floor), so the rounds can keep both.
	tag     string
	payload []byte
	// request: the agent's request (the work queue's delivery; a sync
	// publish in turn with the decision); decision: the decision, stored
	// by sync publish with its message id (floorPublishes gives each its
	// own); appended: an event compare-and-appended, the rig writing its
	// two expectations in. nil: no header.
	request, decision, appended nats.Header
}

func bareFloorMsgs(payload []byte) floorMsgs { return floorMsgs{payload: payload} }

// specFloorMsgs are the call's messages with exactly the headers SPEC §3
// and exactly-once require (ce-id, ce-type, ce-source, ce-time,
// ce-specversion, traceparent; the decision its Nats-Msg-Id, as the
// policy publishes it; an append its expectations), each with the value
// airlock's envelope gives it (call ids as long as the SDK's): the
// agent's request, the decision and `started`, appended, with its two
// expectations.
func specFloorMsgs(payload []byte) (floorMsgs, error) {
	hs, err := newEnvelopeHeaders("floor.spec", specHeaders)
	if err != nil {
		return floorMsgs{}, err
	}
	ledger := "floor.spec.evt." + placeholderCall + ".exec.*"
	return floorMsgs{tag: "spec", payload: payload,
		request:  hs.of(subject.Requested, placeholderCall, "", 0, false),
		decision: hs.of(subject.Allowed, placeholderCall, "", 0, true),
		appended: hs.of(subject.Started, placeholderCall, ledger, 0, false),
	}, nil
}

// floorPublishes gives the messages a rig stores by sync publish for the
// call's: the decision, with a message id of its own each time (the
// policy publishes each call's decision with its event id as its
// Nats-Msg-Id, so the server records and checks one per call); in turn
// with the agent's request when both (the call's two sync publishes,
// callMix: the request carries no message id). Worker w's header is
// reused for its next message once its publish returned.
type floorPublishes struct {
	fm        floorMsgs
	both      bool
	n         atomic.Uint64
	decisions []nats.Header
	// pre, post: the decision's message id around its call id.
	pre, post               string
	requestBody, decideBody []byte
}

func (fm floorMsgs) publishes(workers int, both bool) *floorPublishes {
	p := &floorPublishes{fm: fm, both: both, requestBody: fm.body(fm.request), decideBody: fm.body(fm.decision)}
	if fm.decision == nil {
		return p
	}
	p.pre, p.post, _ = strings.Cut(envelope.HeaderValue(fm.decision, envelope.HeaderMsgID), placeholderCall)
	p.decisions = make([]nats.Header, workers+1)
	for w := range p.decisions {
		p.decisions[w] = maps.Clone(fm.decision)
	}
	return p
}

// next is worker w's next message: its header and body.
func (p *floorPublishes) next(w int) (nats.Header, []byte) {
	n := p.n.Add(1)
	if p.fm.decision == nil {
		return nil, p.fm.payload
	}
	if p.both && n%2 == 1 {
		return p.fm.request, p.requestBody
	}
	id := strconv.FormatUint(n, 10)
	h := p.decisions[w]
	h[envelope.HeaderMsgID] = []string{p.pre + placeholderCall[:len(placeholderCall)-len(id)] + id + p.post}
	return h, p.decideBody
}

// names are a rig's stream and subject prefix ("floor.x.") for fm.
func (fm floorMsgs) names(stream, prefix string) (string, string) {
	if fm.tag == "" {
		return stream, prefix
	}
	return stream + "_" + strings.ToUpper(fm.tag), "floor." + fm.tag + "." + strings.TrimPrefix(prefix, "floor.")
}

// body is what a message with header h carries as its body: payload less
// the header's bytes.
func (fm floorMsgs) body(h nats.Header) []byte {
	if h == nil {
		return fm.payload
	}
	return fm.payload[:max(0, len(fm.payload)-headerSize(h))]
}

// parallelRig is a rig of op (worker w's k-th operation: op(w, k)) run
// one at a time (as worker o.Concurrency) for its latency and by
// o.Concurrency workers for its CPU.
func parallelRig(o floorOptions, op func(w, k int) error, stop func()) floorRig {
	return floorRig{
		latency: func(n int) (latency, error) { return timeEach(n, func(i int) error { return op(o.Concurrency, i) }) },
		run:     func(n int) error { return spread(n, o.Concurrency, op) },
		stop:    stop,
	}
}

// measureRig measures r once: o.Samples operations one at a time, then
// the CPU per operation and the rate of o.Ops.
func measureRig(o floorOptions, r floorRig) (floorOp, error) {
	if r.err != nil {
		return floorOp{}, r.err
	}
	defer r.stop()
	var f floorOp
	var err error
	if f.Latency, err = r.latency(o.Samples); err != nil {
		return f, err
	}
	if r.prepare != nil {
		if err := r.prepare(o.Ops); err != nil {
			return f, err
		}
	}
	cpu0, t0 := processCPU(), time.Now()
	if err := r.run(o.Ops); err != nil {
		return f, err
	}
	f.CPUPerOpUs, f.PerSecond = cpuPerOp(processCPU()-cpu0, o.Ops), float64(o.Ops)/time.Since(t0).Seconds()
	return f, nil
}

// overPublish makes a RePublish's figures what RePublish adds to a sync
// publish (base, measured in the same run): its CPU per op is the
// difference, never below 0.
func overPublish(op floorOp, err error) func(base floorOp) (floorOp, error) {
	return func(base floorOp) (floorOp, error) {
		op.CPUPerOpUs = max(0, op.CPUPerOpUs-base.CPUPerOpUs)
		return op, err
	}
}

func cpuPerOp(cpu time.Duration, n int) float64 { return float64(cpu.Nanoseconds()) / 1e3 / float64(n) }

func floorSyncPublishRig(ctx context.Context, js jetstream.JetStream, o floorOptions, fm floorMsgs) floorRig {
	name, prefix := fm.names("FLOOR_SYNC", "floor.sync.")
	_, done, err := floorStream(ctx, js, jetstream.StreamConfig{Name: name, Subjects: []string{prefix + ">"}})
	if err != nil {
		return floorRig{err: err}
	}
	msgs := fm.publishes(o.Concurrency, true)
	return parallelRig(o, func(w, _ int) error {
		h, body := msgs.next(w)
		_, err := js.PublishMsg(ctx, &nats.Msg{Subject: prefix + "x", Header: h, Data: body})
		return err
	}, done)
}

func floorAsyncPublish(ctx context.Context, js jetstream.JetStream, o floorOptions, payload []byte) (floorOp, error) {
	_, done, err := floorStream(ctx, js, jetstream.StreamConfig{Name: "FLOOR_ASYNC", Subjects: []string{"floor.async.>"}})
	if err != nil {
		return floorOp{}, err
	}
	defer done()
	// run publishes n messages with at most window unacknowledged, and
	// records each one's time from publish to PubAck when lat is given.
	run := func(n, window int, lat []time.Duration) error {
		type inflight struct {
			ack jetstream.PubAckFuture
			t0  time.Time
		}
		queue := make([]inflight, 0, window)
		settle := func(f inflight, i int) error {
			select {
			case <-f.ack.Ok():
				if lat != nil {
					lat[i] = time.Since(f.t0)
				}
				return nil
			case err := <-f.ack.Err():
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		done := 0
		for range n {
			if len(queue) == window {
				if err := settle(queue[0], done); err != nil {
					return err
				}
				queue, done = queue[1:], done+1
			}
			t0 := time.Now()
			a, err := js.PublishAsync("floor.async.x", payload, jetstream.WithStallWait(30*time.Second))
			if err != nil {
				return err
			}
			queue = append(queue, inflight{a, t0})
		}
		for _, f := range queue {
			if err := settle(f, done); err != nil {
				return err
			}
			done++
		}
		return nil
	}
	if err := run(min(o.Ops/10, 4096), 4096, nil); err != nil { // warm-up
		return floorOp{}, err
	}
	// Latency with Concurrency publishes in flight; CPU with acks batched
	// as deep as the client allows.
	lat := make([]time.Duration, o.Samples)
	if err := run(o.Samples, o.Concurrency, lat); err != nil {
		return floorOp{}, err
	}
	op := floorOp{Latency: summarize(lat)}
	cpu0, t0 := processCPU(), time.Now()
	if err := run(o.Ops, 4096, nil); err != nil {
		return floorOp{}, err
	}
	op.CPUPerOpUs, op.PerSecond = cpuPerOp(processCPU()-cpu0, o.Ops), float64(o.Ops)/time.Since(t0).Seconds()
	return op, nil
}

// floorCASPublishRig: each worker appends to its own subject under
// floor.cas.<worker>.*, expecting the last sequence it saw on that filter.
func floorCASPublishRig(ctx context.Context, js jetstream.JetStream, o floorOptions, fm floorMsgs) floorRig {
	name, prefix := fm.names("FLOOR_CAS", "floor.cas.")
	_, done, err := floorStream(ctx, js, jetstream.StreamConfig{Name: name, Subjects: []string{prefix + ">"}})
	if err != nil {
		return floorRig{err: err}
	}
	// Each worker keeps its own header, the expectations written into it
	// before each append (as jetstream's WithExpectLastSequenceForSubject
	// writes them into a bare message's).
	last, headers := make([]uint64, o.Concurrency+1), make([]nats.Header, o.Concurrency+1)
	for w := range headers {
		headers[w] = maps.Clone(fm.appended)
		if headers[w] == nil {
			headers[w] = nats.Header{}
		}
	}
	// The body is the payload less the header as sent: the worker's
	// expectation subject, set once, and the sequence's digits.
	rest := make([]int, o.Concurrency+1)
	for w, h := range headers {
		h[jetstream.ExpectedLastSubjSeqSubjHeader] = []string{prefix + strconv.Itoa(w) + ".*"}
		h[jetstream.ExpectedLastSubjSeqHeader] = []string{""}
		rest[w] = len(fm.payload) - headerSize(h)
	}
	cas := func(w int) error {
		h, seq := headers[w], strconv.FormatUint(last[w], 10)
		h[jetstream.ExpectedLastSubjSeqHeader] = []string{seq}
		body := fm.payload
		if fm.appended != nil {
			body = fm.payload[:max(0, rest[w]-len(seq))]
		}
		ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: prefix + strconv.Itoa(w) + ".x", Header: h, Data: body})
		if err != nil {
			return err
		}
		last[w] = ack.Sequence
		return nil
	}
	return parallelRig(o, func(w, _ int) error { return cas(w) }, done)
}

// floorBatchAppend: each worker appends a batch of two to its own subjects
// under floor.batch.<worker>.*, the first expecting the last sequence it saw.
func floorBatchAppend(ctx context.Context, js jetstream.JetStream, o floorOptions, payload []byte) (floorOp, error) {
	_, done, err := floorStream(ctx, js, jetstream.StreamConfig{Name: "FLOOR_BATCH", Subjects: []string{"floor.batch.>"}, AllowAtomicPublish: true})
	if err != nil {
		return floorOp{}, err
	}
	defer done()
	last := make([]uint64, o.Concurrency+1)
	batch := func(w int) error {
		prefix := "floor.batch." + strconv.Itoa(w) + "."
		first := &nats.Msg{Subject: prefix + "a", Data: payload, Header: nats.Header{}}
		first.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(last[w], 10))
		first.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, prefix+"*")
		ack, err := bus.AppendBatch(ctx, js, []*nats.Msg{first, {Subject: prefix + "b", Data: payload}})
		if err != nil {
			return err
		}
		last[w] = ack.Sequence
		return nil
	}
	return timed(o, func(w, _ int) error { return batch(w) })
}

// floorKV: creates of fresh keys, or updates of one key per worker at its
// current revision.
func floorKV(ctx context.Context, js jetstream.JetStream, o floorOptions, payload []byte, update bool) (floorOp, error) {
	bucket := "FLOOR_KV_CREATE"
	if update {
		bucket = "FLOOR_KV_UPDATE"
	}
	var kv jetstream.KeyValue
	err := retryStore(ctx, func() (err error) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, Storage: jetstream.FileStorage})
		return err
	})
	if err != nil {
		return floorOp{}, fmt.Errorf("create bucket %s: %w", bucket, err)
	}
	defer func() { _ = js.DeleteKeyValue(context.WithoutCancel(ctx), bucket) }()
	rev := make([]uint64, o.Concurrency+1)
	var seq atomic.Int64
	do := func(w int) error {
		if !update {
			_, err := kv.Create(ctx, "k"+strconv.FormatInt(seq.Add(1), 10), payload)
			return err
		}
		key := "w" + strconv.Itoa(w)
		var r uint64
		var err error
		if rev[w] == 0 {
			r, err = kv.Create(ctx, key, payload)
		} else {
			r, err = kv.Update(ctx, key, payload, rev[w])
		}
		rev[w] = r
		return err
	}
	return timed(o, func(w, _ int) error { return do(w) })
}

func floorDirectGet(ctx context.Context, js jetstream.JetStream, o floorOptions, payload []byte) (floorOp, error) {
	s, done, err := floorStream(ctx, js, jetstream.StreamConfig{Name: "FLOOR_DIRECT", Subjects: []string{"floor.direct.>"}, AllowDirect: true})
	if err != nil {
		return floorOp{}, err
	}
	defer done()
	const subjects = 64
	for i := range subjects {
		if _, err := js.Publish(ctx, "floor.direct."+strconv.Itoa(i), payload); err != nil {
			return floorOp{}, err
		}
	}
	get := func(i int) error {
		_, err := s.GetLastMsgForSubject(ctx, "floor.direct."+strconv.Itoa((i%subjects+subjects)%subjects))
		return err
	}
	return timed(o, func(w, k int) error { return get(w + k) })
}

// floorPullRig: latency from a stored publish to its delivery at a
// waiting pull consumer; CPU of delivering and acking a stored backlog
// (prepare publishes it, each time on a subject of its own, before the
// count starts; run creates a durable consumer of it and receives every
// message). retention is the stream's: on a work queue the ack also
// removes the message.
func floorPullRig(ctx context.Context, js jetstream.JetStream, o floorOptions, fm floorMsgs, retention jetstream.RetentionPolicy) floorRig {
	// The work queue delivers the agent's request (the intake), the limits
	// stream the decision (the events stream).
	name, prefix := "FLOOR_PULL", "floor.pull."
	// Each message its header and body: the decision each with a message
	// id of its own, the request as it is.
	decisions := fm.publishes(0, false)
	next := func() (nats.Header, []byte) { return decisions.next(0) }
	if retention == jetstream.WorkQueuePolicy { // a stream of its own subjects: the rounds keep both
		name, prefix = "FLOOR_PULL_WQ", "floor.pullwq."
		body := fm.body(fm.request)
		next = func() (nats.Header, []byte) { return fm.request, body }
	}
	name, prefix = fm.names(name, prefix)
	s, done, err := floorStream(ctx, js, jetstream.StreamConfig{Name: name, Subjects: []string{prefix + ">"}, Retention: retention})
	if err != nil {
		return floorRig{err: err}
	}
	backlogs, backlog := 0, ""
	return floorRig{
		latency: func(n int) (latency, error) {
			live, stop, err := consumeAcking(ctx, s, "live", prefix+"live")
			if err != nil {
				return latency{}, err
			}
			defer stop()
			return timeEach(n, func(int) error {
				header, body := next()
				if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: prefix + "live", Header: header, Data: body}); err != nil {
					return err
				}
				return receive(ctx, live, 1)
			})
		},
		prepare: func(n int) error {
			backlogs++
			backlog = prefix + "backlog." + strconv.Itoa(backlogs)
			for range n {
				header, body := next()
				header = maps.Clone(header) // kept by the client until acked
				if _, err := js.PublishMsgAsync(&nats.Msg{Subject: backlog, Header: header, Data: body}, jetstream.WithStallWait(30*time.Second)); err != nil {
					return err
				}
			}
			select {
			case <-js.PublishAsyncComplete():
			case <-ctx.Done():
				return ctx.Err()
			}
			// The consumer is created here, uncounted: a call creates none.
			_, err := s.CreateOrUpdateConsumer(ctx, relayConsumer("backlog"+strconv.Itoa(backlogs), backlog))
			return err
		},
		run: func(n int) error {
			acked, stop, err := consumeAcking(ctx, s, "backlog"+strconv.Itoa(backlogs), backlog)
			if err != nil {
				return err
			}
			defer stop()
			return receive(ctx, acked, n)
		},
		stop: done,
	}
}

// consumeAcking runs a durable pull consumer on filter with as many workers
// as the raw hop's relay; each acked message is signalled on the channel.
func consumeAcking(ctx context.Context, s jetstream.Stream, name, filter string) (<-chan struct{}, func(), error) {
	acked := make(chan struct{}, 1024)
	stop, err := relay(ctx, s, name, filter, 8, func(m jetstream.Msg) {
		if m.Ack() == nil {
			select {
			case acked <- struct{}{}:
			case <-ctx.Done():
			}
		}
	})
	return acked, stop, err
}

// receive waits for n signals on ch.
func receive(ctx context.Context, ch <-chan struct{}, n int) error {
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for range n {
		select {
		case <-ch:
		case <-timeout.C:
			return errors.New("a message was not delivered within 30s")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func floorCore(ctx context.Context, url string, o floorOptions, payload []byte) (floorOp, error) {
	pubc, err := nats.Connect(url)
	if err != nil {
		return floorOp{}, err
	}
	defer pubc.Close()
	subc, err := nats.Connect(url)
	if err != nil {
		return floorOp{}, err
	}
	defer subc.Close()
	got := make(chan struct{}, o.Ops+o.Samples)
	sub, err := subc.Subscribe("floor.core", func(*nats.Msg) { got <- struct{}{} })
	if err != nil {
		return floorOp{}, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	_ = sub.SetPendingLimits(-1, -1)
	if err := subc.Flush(); err != nil {
		return floorOp{}, err
	}
	var op floorOp
	if op.Latency, err = timeEach(o.Samples, func(int) error {
		if err := pubc.Publish("floor.core", payload); err != nil {
			return err
		}
		return receive(ctx, got, 1)
	}); err != nil {
		return op, err
	}
	cpu0, t0 := processCPU(), time.Now()
	for range o.Ops {
		if err := pubc.Publish("floor.core", payload); err != nil {
			return op, err
		}
	}
	if err := receive(ctx, got, o.Ops); err != nil {
		return op, err
	}
	op.CPUPerOpUs, op.PerSecond = cpuPerOp(processCPU()-cpu0, o.Ops), float64(o.Ops)/time.Since(t0).Seconds()
	return op, nil
}

// floorRePublishRig: sync publishes into a stream that republishes every
// stored message, with (deliver) or without a subscriber receiving the
// copies (overPublish makes its CPU what that adds to a sync publish).
func floorRePublishRig(ctx context.Context, url string, js jetstream.JetStream, o floorOptions, fm floorMsgs, deliver bool) (rig floorRig) {
	name, prefix := "FLOOR_REPUB", "floor.repub."
	if deliver {
		name, prefix = "FLOOR_REPUB_SUB", "floor.repubsub."
	}
	name, prefix = fm.names(name, prefix)
	msgs := fm.publishes(o.Concurrency, true) // as the sync publish it is compared with
	var cleanup rigCleanup
	defer func() {
		if rig.err != nil {
			cleanup.run()
		}
	}()
	_, done, err := floorStream(ctx, js, jetstream.StreamConfig{Name: name, Subjects: []string{prefix + ">"},
		RePublish: &jetstream.RePublish{Source: prefix + ">", Destination: "floor.out." + prefix + ">"}})
	if err != nil {
		return floorRig{err: err}
	}
	cleanup.add(done)
	got := make([]chan struct{}, o.Concurrency+1)
	for i := range got {
		got[i] = make(chan struct{}, 1)
	}
	if deliver {
		subc, err := nats.Connect(url)
		if err != nil {
			return floorRig{err: err}
		}
		cleanup.add(subc.Close)
		sub, err := subc.Subscribe("floor.out."+prefix+">", func(m *nats.Msg) {
			if w, err := strconv.Atoi(m.Subject[len("floor.out."+prefix):]); err == nil && w >= 0 && w < len(got) {
				got[w] <- struct{}{}
			}
		})
		if err != nil {
			return floorRig{err: err}
		}
		_ = sub.SetPendingLimits(-1, -1)
		if err := subc.Flush(); err != nil {
			return floorRig{err: err}
		}
	}
	return parallelRig(o, func(w, _ int) error {
		h, body := msgs.next(w)
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: prefix + strconv.Itoa(w), Header: h, Data: body}); err != nil {
			return err
		}
		if !deliver {
			return nil
		}
		return receive(ctx, got[w], 1)
	}, cleanup.run)
}

// floorHop: the raw hop, one at a time and with Concurrency in flight.
func floorHop(ctx context.Context, url string, o floorOptions, payload []byte) (floorOp, error) {
	hop, stop, err := newHopRig(ctx, url, "FLOOR_HOP", payload)
	if err != nil {
		return floorOp{}, err
	}
	defer stop()
	return timed(o, func(int, int) error { return hop(ctx) })
}

// newHopRig sets up a raw JetStream hop in stream: the client publishes to
// it; a durable pull consumer on its own connection (as a service) with as
// many workers as a service runs re-publishes each message to the stream
// and acks it; the client receives the re-published message. hop does one.
func newHopRig(ctx context.Context, url, stream string, payload []byte) (hop func(context.Context) error, stop func(), err error) {
	var cleanup rigCleanup
	stop = cleanup.run
	defer func() {
		if err != nil {
			stop()
		}
	}()
	client, err := nats.Connect(url)
	if err != nil {
		return nil, nil, err
	}
	cleanup.add(client.Close)
	relayConn, err := nats.Connect(url)
	if err != nil {
		return nil, nil, err
	}
	cleanup.add(relayConn.Close)
	cjs, _ := jetstream.New(client)
	rjs, _ := jetstream.New(relayConn)
	s, done, err := floorStream(ctx, cjs, jetstream.StreamConfig{Name: stream, Subjects: []string{"bench.hop.>"}})
	if err != nil {
		return nil, nil, err
	}
	cleanup.add(done)
	stopRelay, err := relay(ctx, s, "relay", "bench.hop.req.*", 8, func(m jetstream.Msg) {
		id := m.Subject()[len("bench.hop.req."):]
		if _, err := rjs.Publish(ctx, "bench.hop.rep."+id, m.Data()); err == nil {
			_ = m.Ack()
		}
	})
	if err != nil {
		return nil, nil, err
	}
	cleanup.add(stopRelay)
	replies := newReplyWaiters()
	sub, err := client.Subscribe("bench.hop.rep.*", func(m *nats.Msg) { replies.arrived(m.Subject[len("bench.hop.rep."):]) })
	if err != nil {
		return nil, nil, err
	}
	cleanup.add(func() { _ = sub.Unsubscribe() })
	_ = sub.SetPendingLimits(-1, -1)
	var seq atomic.Int64
	hop = func(ctx context.Context) error {
		id := strconv.FormatInt(seq.Add(1), 10)
		reply := replies.expect(id)
		if _, err := cjs.Publish(ctx, "bench.hop.req."+id, payload, jetstream.WithMsgID("hop-"+id)); err != nil {
			return err
		}
		return waitReply(ctx, reply, nil, "hop "+id)
	}
	return hop, stop, nil
}

// rigCleanup undoes what a rig set up, newest first.
type rigCleanup []func()

func (c *rigCleanup) add(f func()) { *c = append(*c, f) }

func (c *rigCleanup) run() {
	for i := len(*c) - 1; i >= 0; i-- {
		(*c)[i]()
	}
}

// replyWaiters hands each reply a rig's client receives to the operation
// waiting for its id.
type replyWaiters struct {
	mu      sync.Mutex
	waiting map[string]chan struct{}
}

func newReplyWaiters() *replyWaiters { return &replyWaiters{waiting: map[string]chan struct{}{}} }

// expect registers id before its request is sent; the returned channel is
// closed when its reply arrives.
func (w *replyWaiters) expect(id string) <-chan struct{} {
	ch := make(chan struct{})
	w.mu.Lock()
	w.waiting[id] = ch
	w.mu.Unlock()
	return ch
}

func (w *replyWaiters) arrived(id string) {
	w.mu.Lock()
	ch := w.waiting[id]
	delete(w.waiting, id)
	w.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// errNoReply: a rig's reply did not come within 30 s.
var errNoReply = errors.New("no reply within 30s")

// waitReply waits at most 30 s for reply, or until failed is closed (a
// rig's party failed: the caller says how); what names the operation in the
// error.
func waitReply(ctx context.Context, reply, failed <-chan struct{}, what string) error {
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	select {
	case <-reply:
		return nil
	case <-failed:
		return fmt.Errorf("%s: a party of the rig failed", what)
	case <-timeout.C:
		return fmt.Errorf("%s: %w", what, errNoReply)
	case <-ctx.Done():
		return fmt.Errorf("no reply for %s: %w", what, ctx.Err())
	}
}
