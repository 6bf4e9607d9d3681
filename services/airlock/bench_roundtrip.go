package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"io"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/executor"
	"github.com/airlock-gate/airlock/services/policy"
	"github.com/airlock-gate/airlock/services/shared/canon"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/embedded"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// roundtripOptions tune `airlock bench roundtrip`.
type roundtripOptions struct {
	JSON        bool
	Samples     int
	Duration    time.Duration
	Concurrency int
	Publishes   int
	CPUProfile  string
	FixedAllow  bool
	// LatencyOnly skips the sustained-throughput runs (bench gateway needs
	// only the round trip's p50).
	LatencyOnly bool
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
	RawHop  struct {
		Latency    latency    `json:"latency"`
		Throughput throughput `json:"throughput"`
	} `json:"raw_hop"`
	RoundTrip struct {
		Latency    latency    `json:"latency"`
		Throughput throughput `json:"throughput"`
	} `json:"round_trip"`
	AsyncPublishPerSecond float64 `json:"async_publish_per_second"`
	// AsyncPublishCPUus is the process's CPU time per async publish.
	AsyncPublishCPUus float64 `json:"async_publish_cpu_us_per_msg"`
	Ratios            struct {
		P50        float64 `json:"p50"`
		P99        float64 `json:"p99"`
		Throughput float64 `json:"calls_per_async_publish"`
	} `json:"ratios"`
	Goals struct {
		P50Max        float64 `json:"p50_max"`
		P99Max        float64 `json:"p99_max"`
		ThroughputMin float64 `json:"calls_per_async_publish_min"`
		P50Met        bool    `json:"p50_met"`
		P99Met        bool    `json:"p99_met"`
		ThroughputMet bool    `json:"throughput_met"`
	} `json:"goals"`
}

func newBenchRoundtripCmd(g *globals) *cobra.Command {
	o := roundtripOptions{}
	cmd := &cobra.Command{
		Use:   "roundtrip",
		Short: "Auto-allowed call round trip vs a raw JetStream hop and async publish rate (SPEC §8)",
		Long: `Starts an embedded NATS server (file store in a temp dir, fsync as dev.sync)
and, in this one process, measures:
  (a) a raw JetStream hop: publish to a stream, a durable consumer re-publishes,
      the reply is received — latency p50/p99 and sustained hops/s;
  (b) an auto-allowed round trip: the Go SDK submits demo__echo, the policy
      service allows it, the executor runs it, the SDK receives the result —
      latency p50/p99 and sustained calls/s;
  (c) the raw JetStream async publish rate;
and prints the ratios against SPEC §8's goals: round trip p50 ≤ 4× and
p99 ≤ 6× the raw hop; calls/s ≥ 0.10 × async publishes/s.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return benchRun(cmd, g, o.CPUProfile, o.JSON, func(ctx context.Context, cfg config.Config) (*roundtripReport, error) {
				return runRoundtripBench(ctx, cfg, o)
			}, printRoundtrip)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.JSON, "json", false, "print one JSON object with every figure")
	f.IntVar(&o.Samples, "samples", 2000, "sequential calls timed for the latency figures")
	f.DurationVar(&o.Duration, "duration", 3*time.Second, "how long each sustained-throughput run lasts")
	f.IntVar(&o.Concurrency, "concurrency", 64, "calls in flight during the throughput runs")
	f.IntVar(&o.Publishes, "publishes", 200000, "messages in the async publish run")
	f.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	f.BoolVar(&o.FixedAllow, "fixed-allow", false, "decide with a fixed allow instead of the configured policy (leaves Rego evaluation out of the figures)")
	return cmd
}

func runRoundtripBench(ctx context.Context, cfg config.Config, o roundtripOptions) (*roundtripReport, error) {
	if o.Samples < 10 || o.Concurrency < 1 || o.Duration <= 0 || o.Publishes < 1 {
		return nil, errors.New("--samples must be at least 10, --concurrency and --publishes at least 1, --duration positive")
	}
	dir, err := os.MkdirTemp("", "airlock-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	interval, _ := config.ParseSync(cfg.Dev.Sync)
	ns, err := embedded.Start(embedded.Options{Port: -1, StoreDir: dir, SyncAlways: interval == 0, SyncInterval: interval})
	if err != nil {
		return nil, err
	}
	defer ns.Stop()
	cfg.NATS.URL = ns.URL()
	cfg.Dev.DataDir = dir
	cfg.Executor.ToolsFile = "" // demo tools only
	cfg.Executor.Sandbox = ""
	cfg.Security.DecisionKey, cfg.Security.FrontendKey = seal.NewKey().Hex(), seal.NewKey().Hex()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	rep := &roundtripReport{Setup: fmt.Sprintf("embedded NATS, file store, fsync %s; policy and executor in-process; Go SDK as the agent", syncText(cfg.Dev.Sync))}
	rep.Goals.P50Max, rep.Goals.P99Max, rep.Goals.ThroughputMin = 4, 6, 0.10

	raw, err := benchRawHop(ctx, ns.URL(), o)
	if err != nil {
		return nil, fmt.Errorf("raw hop: %w", err)
	}
	rep.RawHop.Latency, rep.RawHop.Throughput = raw.lat, raw.tput

	rt, decider, err := benchRoundTrip(ctx, cfg, log, o)
	if err != nil {
		return nil, fmt.Errorf("round trip: %w", err)
	}
	rep.Decider = decider
	rep.RoundTrip.Latency, rep.RoundTrip.Throughput = rt.lat, rt.tput

	if rep.AsyncPublishPerSecond, rep.AsyncPublishCPUus, err = benchAsyncPublish(ctx, ns.URL(), o.Publishes); err != nil {
		return nil, fmt.Errorf("async publish: %w", err)
	}
	rep.Ratios.P50 = rep.RoundTrip.Latency.P50us / rep.RawHop.Latency.P50us
	rep.Ratios.P99 = rep.RoundTrip.Latency.P99us / rep.RawHop.Latency.P99us
	rep.Ratios.Throughput = rep.RoundTrip.Throughput.PerSecond / rep.AsyncPublishPerSecond
	rep.Goals.P50Met = rep.Ratios.P50 <= rep.Goals.P50Max
	rep.Goals.P99Met = rep.Ratios.P99 <= rep.Goals.P99Max
	rep.Goals.ThroughputMet = rep.Ratios.Throughput >= rep.Goals.ThroughputMin
	return rep, nil
}

type measured struct {
	lat  latency
	tput throughput
}

// measure times samples sequential ops, then runs o.Concurrency loops of op
// for o.Duration and counts completions.
func measure(ctx context.Context, o roundtripOptions, op func(ctx context.Context) error) (measured, error) {
	var m measured
	for i := 0; i < o.Samples/10+20; i++ { // warm up connections, consumers, caches
		if err := op(ctx); err != nil {
			return m, err
		}
	}
	lat := make([]time.Duration, 0, o.Samples)
	for i := 0; i < o.Samples; i++ {
		t0 := time.Now()
		if err := op(ctx); err != nil {
			return m, err
		}
		lat = append(lat, time.Since(t0))
	}
	m.lat = summarize(lat)
	if o.LatencyOnly {
		return m, nil
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
		return m, firstErr
	}
	m.tput = throughput{PerSecond: float64(done.Load()) / elapsed, Completed: int(done.Load()), Seconds: elapsed, Concurrency: o.Concurrency}
	if n := done.Load(); n > 0 {
		m.tput.CPUPerOpUs = float64(cpu.Microseconds()) / float64(n)
	}
	return m, nil
}

// summarize sorts lat and returns its p50 and p99.
func summarize(lat []time.Duration) latency {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) / 1e3 }
	return latency{P50us: pct(0.50), P99us: pct(0.99), N: len(lat)}
}

// processCPU is the user + system CPU time this process has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchRawHop: the client publishes to a stream; a durable pull consumer (on
// its own connection, as a service would be) re-publishes each message to the
// stream and acks it; the client receives the re-published message.
func benchRawHop(ctx context.Context, url string, o roundtripOptions) (measured, error) {
	client, err := nats.Connect(url)
	if err != nil {
		return measured{}, err
	}
	defer client.Close()
	server, err := nats.Connect(url)
	if err != nil {
		return measured{}, err
	}
	defer server.Close()
	cjs, _ := jetstream.New(client)
	sjs, _ := jetstream.New(server)
	if _, err := cjs.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCH_HOP", Subjects: []string{"bench.hop.>"}, Storage: jetstream.FileStorage}); err != nil {
		return measured{}, err
	}
	cons, err := sjs.CreateOrUpdateConsumer(ctx, "BENCH_HOP", jetstream.ConsumerConfig{
		Durable: "relay", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "bench.hop.req.*", MaxAckPending: 1000,
	})
	if err != nil {
		return measured{}, err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(256))
	if err != nil {
		return measured{}, err
	}
	defer it.Stop()
	// Relay with as many workers as the services use, so both sides have the same concurrency.
	for w := 0; w < 8; w++ {
		go func() {
			for {
				m, err := it.Next()
				if err != nil {
					return
				}
				id := m.Subject()[len("bench.hop.req."):]
				if _, err := sjs.Publish(ctx, "bench.hop.rep."+id, m.Data()); err == nil {
					_ = m.Ack()
				}
			}
		}()
	}
	var mu sync.Mutex
	waiters := map[string]chan struct{}{}
	sub, err := client.Subscribe("bench.hop.rep.*", func(m *nats.Msg) {
		id := m.Subject[len("bench.hop.rep."):]
		mu.Lock()
		ch := waiters[id]
		delete(waiters, id)
		mu.Unlock()
		if ch != nil {
			close(ch)
		}
	})
	if err != nil {
		return measured{}, err
	}
	defer sub.Unsubscribe()
	_ = sub.SetPendingLimits(-1, -1)
	payload := make([]byte, 256)
	var seq atomic.Int64
	return measure(ctx, o, func(ctx context.Context) error {
		id := strconv.FormatInt(seq.Add(1), 10)
		ch := make(chan struct{})
		mu.Lock()
		waiters[id] = ch
		mu.Unlock()
		if _, err := cjs.Publish(ctx, "bench.hop.req."+id, payload, jetstream.WithMsgID("hop-"+id)); err != nil {
			return err
		}
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("no reply for hop %s: %w", id, ctx.Err())
		}
	})
}

// benchRoundTrip runs the policy and executor services in-process and times
// demo__echo calls submitted through the SDK.
func benchRoundTrip(ctx context.Context, cfg config.Config, log *slog.Logger, o roundtripOptions) (measured, string, error) {
	svcCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	start := func(name string, mk func(svc.Deps) (svc.Service, error)) (context.CancelFunc, error) {
		deps, err := connectDeps(ctx, cfg, log, "airlock-bench-"+name)
		if err != nil {
			return nil, err
		}
		s, err := mk(deps)
		if err != nil {
			deps.NC.Close()
			return nil, err
		}
		runCtx, cancel := context.WithCancel(svcCtx)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer deps.NC.Close()
			if err := s.Run(runCtx); err != nil {
				log.Error("service stopped", "service", name, "err", err)
			}
		}()
		return cancel, nil
	}
	stopPolicy, err := start("policy", func(d svc.Deps) (svc.Service, error) { return policy.NewFromConfig(ctx, d) })
	if err != nil {
		return measured{}, "", err
	}
	if _, err := start("executor", func(d svc.Deps) (svc.Service, error) { return executor.NewFromConfig(ctx, d) }); err != nil {
		return measured{}, "", err
	}

	nc, err := nats.Connect(cfg.NATS.URL)
	if err != nil {
		return measured{}, "", err
	}
	defer nc.Close()
	client, op, closeOp, err := roundTripOp(nc, cfg, "bench")
	if err != nil {
		return measured{}, "", err
	}
	defer closeOp()

	decider := "the configured policy (default: policies/ Rego)"
	action, err := probeDecision(ctx, nc, client)
	if err != nil {
		return measured{}, "", err
	}
	if action != subject.Allowed || o.FixedAllow {
		// The policy in force does not auto-allow demo__echo (or the caller
		// asked to leave policy evaluation out): measure the same path with
		// a fixed decision so the figures stay comparable.
		stopPolicy()
		decider = fmt.Sprintf("fixed allow (the configured policy answered %s for demo__echo)", action)
		if o.FixedAllow {
			decider = "fixed allow (--fixed-allow)"
		}
		if _, err := start("policy-fixed", func(d svc.Deps) (svc.Service, error) { return policy.New(d, allowAll{}) }); err != nil {
			return measured{}, "", err
		}
	}
	m, err := measure(ctx, o, op)
	return m, decider, err
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

// benchAsyncPublish publishes n 256-byte messages with PublishAsync and
// returns messages acknowledged per second and the process's CPU µs per message.
func benchAsyncPublish(ctx context.Context, url string, n int) (float64, float64, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return 0, 0, err
	}
	defer nc.Close()
	js, _ := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCH_ASYNC", Subjects: []string{"bench.async"}, Storage: jetstream.FileStorage}); err != nil {
		return 0, 0, err
	}
	payload := make([]byte, 256)
	cpu0 := processCPU()
	start := time.Now()
	for i := 0; i < n; i++ {
		if _, err := js.PublishAsync("bench.async", payload, jetstream.WithStallWait(10*time.Second)); err != nil {
			return 0, 0, err
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(2 * time.Minute):
		return 0, 0, errors.New("async publishes not acknowledged within 2 minutes")
	}
	rate := float64(n) / time.Since(start).Seconds()
	return rate, float64((processCPU() - cpu0).Microseconds()) / float64(n), nil
}

func printRoundtrip(w io.Writer, r *roundtripReport) {
	ok := func(b bool) string {
		if b {
			return "met"
		}
		return "MISSED"
	}
	fmt.Fprintf(w, "airlock bench roundtrip — %s\ndecider: %s\n\n", r.Setup, r.Decider)
	fmt.Fprintf(w, "%-26s %10s %10s %12s\n", "", "p50", "p99", "per second")
	fmt.Fprintf(w, "%-26s %8.0fµs %8.0fµs %12.0f  (%d in flight)\n", "raw JetStream hop", r.RawHop.Latency.P50us, r.RawHop.Latency.P99us, r.RawHop.Throughput.PerSecond, r.RawHop.Throughput.Concurrency)
	fmt.Fprintf(w, "%-26s %8.0fµs %8.0fµs %12.0f  (%d in flight)\n", "auto-allowed round trip", r.RoundTrip.Latency.P50us, r.RoundTrip.Latency.P99us, r.RoundTrip.Throughput.PerSecond, r.RoundTrip.Throughput.Concurrency)
	fmt.Fprintf(w, "%-26s %10s %10s %12.0f\n", "raw async publish", "", "", r.AsyncPublishPerSecond)
	fmt.Fprintf(w, "process CPU per operation: raw hop %.0fµs, round trip %.0fµs, async publish %.1fµs\n\n",
		r.RawHop.Throughput.CPUPerOpUs, r.RoundTrip.Throughput.CPUPerOpUs, r.AsyncPublishCPUus)
	fmt.Fprintf(w, "round trip p50 = %.2f× raw hop (goal ≤ %.0f×): %s\n", r.Ratios.P50, r.Goals.P50Max, ok(r.Goals.P50Met))
	fmt.Fprintf(w, "round trip p99 = %.2f× raw hop (goal ≤ %.0f×): %s\n", r.Ratios.P99, r.Goals.P99Max, ok(r.Goals.P99Met))
	fmt.Fprintf(w, "calls/s = %.3f× async publishes/s (goal ≥ %.2f×): %s\n", r.Ratios.Throughput, r.Goals.ThroughputMin, ok(r.Goals.ThroughputMet))
}
