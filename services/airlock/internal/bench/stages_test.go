package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/trace"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// BenchmarkRoundTripStages times b.N sequential auto-allowed round trips as
// `airlock bench roundtrip` does (the real policy and executor services,
// the Go SDK's DoFast, one embedded server), each in turn with a raw hop,
// and splits each call at the moments the server stored its events (the
// stream's own timestamps, on the same clock): submit → requested stored
// → allowed stored → started stored → completed stored → the agent has
// the result. Each stage's p50 is reported beside the raw hop's, to show
// where the round trip's p50 goes beyond its writes.
//
//	go test -run '^$' -bench RoundTripStages -benchtime 2000x ./services/airlock/internal/bench/
//
// AIRLOCK_STAGES_TRACE=FILE writes a runtime/trace of the timed calls,
// each call a region named "call" (go tool trace FILE).
func BenchmarkRoundTripStages(b *testing.B) {
	ctx := context.Background()
	cfg := config.Default()
	dir, url, stop, err := startBenchServer(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	cfg.NATS.URL, cfg.Dev.DataDir = url, dir
	cfg.Executor.ToolsFile, cfg.Executor.Sandbox = "", ""
	cfg.Security.DecisionKey, cfg.Security.FrontendKey = seal.NewKey().Hex(), seal.NewKey().Hex()
	services := newBenchServices(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer services.stop()
	_, decider, _, closeRig, err := newRoundTripRig(ctx, services, cfg, roundtripOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer closeRig()
	hop, stopHop, err := newHopRig(ctx, url, "STAGES_HOP", make([]byte, 256))
	if err != nil {
		b.Fatal(err)
	}
	defer stopHop()

	nc, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	const agent = "stages"
	client, err := airlock.New(nc, agent, airlock.WithStream(cfg.Stream.Name))
	if err != nil {
		b.Fatal(err)
	}
	w, err := client.Watch()
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = w.Close() }()
	args := map[string]any{"text": "hello from the bench"}
	call := func(id string) error {
		out, err := w.DoFast(ctx, airlock.Call{ID: id, Tool: "demo__echo", Args: args})
		if err == nil && !out.Completed() {
			err = fmt.Errorf("call %s ended %s: %s", id, out.Status, out.Reason)
		}
		return err
	}
	for i := range 200 { // warm up connections, consumers, caches
		if err := call(fmt.Sprintf("warm-%d", i)); err != nil {
			b.Fatal(err)
		}
		if err := hop(ctx); err != nil {
			b.Fatal(err)
		}
	}

	type timed struct{ start, end time.Time }
	calls := make(map[string]timed, b.N)
	hops := make([]time.Duration, 0, b.N)
	if f := os.Getenv("AIRLOCK_STAGES_TRACE"); f != "" {
		out, err := os.Create(f)
		if err != nil {
			b.Fatal(err)
		}
		defer out.Close()
		if err := trace.Start(out); err != nil {
			b.Fatal(err)
		}
		defer trace.Stop()
	}
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("stage-%d", i)
		t0 := time.Now()
		region := trace.StartRegion(ctx, "call")
		if err := call(id); err != nil {
			b.Fatal(err)
		}
		region.End()
		calls[id] = timed{t0, time.Now()}
		t0 = time.Now()
		if err := hop(ctx); err != nil {
			b.Fatal(err)
		}
		hops = append(hops, time.Since(t0))
	}
	b.StopTimer()

	stored, err := storedAt(ctx, nc, cfg.Stream.Name, agent)
	if err != nil {
		b.Fatal(err)
	}
	steps := []string{subject.Requested, subject.Allowed, subject.Started, subject.Completed}
	stages := make([][]time.Duration, len(steps)+2)
	for id, c := range calls {
		at := stored[id]
		prev := c.start
		for i, typ := range steps {
			t, ok := at[typ]
			if !ok {
				b.Fatalf("call %s: no %s event stored (decider: %s)", id, typ, decider.name)
			}
			stages[i] = append(stages[i], t.Sub(prev))
			prev = t
		}
		stages[len(steps)] = append(stages[len(steps)], c.end.Sub(prev))
		stages[len(steps)+1] = append(stages[len(steps)+1], c.end.Sub(c.start))
	}
	names := []string{"submit→requested", "requested→allowed", "allowed→started", "started→completed", "completed→agent", "round-trip"}
	for i, name := range names {
		b.ReportMetric(summarize(stages[i]).P50us, name+"-p50-µs")
	}
	b.ReportMetric(summarize(hops).P50us, "raw-hop-p50-µs")
}

// storedAt reads every event of agent's calls in stream and returns, per
// call and event type, when the server stored it.
func storedAt(ctx context.Context, nc *nats.Conn, stream, agent string) (map[string]map[string]time.Time, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject.OfAgent(agent)}})
	if err != nil {
		return nil, err
	}
	pending := cons.CachedInfo().NumPending
	at := map[string]map[string]time.Time{}
	for n := uint64(0); n < pending; {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, err
		}
		for m := range batch.Messages() {
			n++
			p, err := subject.Parse(m.Subject())
			if err != nil {
				return nil, err
			}
			meta, err := m.Metadata()
			if err != nil {
				return nil, err
			}
			if at[p.Call] == nil {
				at[p.Call] = map[string]time.Time{}
			}
			at[p.Call][p.Type] = meta.Timestamp
		}
		if batch.Error() != nil {
			return nil, batch.Error()
		}
	}
	return at, nil
}
