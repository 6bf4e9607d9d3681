package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/audit"
	"github.com/airlock-gate/airlock/services/audit/local"
	"github.com/airlock-gate/airlock/services/audit/record"
	"github.com/airlock-gate/airlock/services/audit/store"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/canon"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/embedded"
	"github.com/airlock-gate/airlock/services/shared/obs"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// auditBenchResult is what `airlock bench audit --json` prints.
type auditBenchResult struct {
	Events        int `json:"events"`
	BatchSize     int `json:"batch_size"`
	AvgEventBytes int `json:"avg_event_bytes"`
	Rounds        int `json:"rounds"`
	// FloorPerSec is the pipeline floor: the sink's own fetch and insert
	// with rows built beforehand (best round); SinkPerSec the full sink
	// (best round); Ratio = SinkPerSec / FloorPerSec, the goal's figure.
	FloorPerSec float64 `json:"floor_events_per_sec"`
	SinkPerSec  float64 `json:"sink_events_per_sec"`
	Ratio       float64 `json:"ratio"`
	Goal        float64 `json:"goal_ratio"`
	MeetsGoal   bool    `json:"meets_goal"`
	// CPU spent per event by this process (embedded NATS, client, sink or
	// floor) and the private clickhouse-server (not counted with
	// --clickhouse), lowest round of each, and FloorCPU/SinkCPU: the
	// throughput ratio where CPU is what limits, as on a busy machine.
	FloorCPUus float64 `json:"floor_cpu_us_per_event"`
	SinkCPUus  float64 `json:"sink_cpu_us_per_event"`
	// The same, clickhouse-server's part alone (in the round counted above):
	// what the database spends on the rows, which the sink cannot avoid.
	FloorServerCPUus float64 `json:"floor_clickhouse_cpu_us_per_event"`
	SinkServerCPUus  float64 `json:"sink_clickhouse_cpu_us_per_event"`
	// Of clickhouse-server's part, what it spent merging the part's rows
	// after the part's window ended, until its merges settled (counted in
	// the CPU figures above, not in the events/s): without it the part
	// that drained faster left more merges behind, cancelled when its
	// table was emptied, and its CPU per event read that much lower.
	FloorMergeAfterUs float64 `json:"floor_clickhouse_merging_after_us_per_event"`
	SinkMergeAfterUs  float64 `json:"sink_clickhouse_merging_after_us_per_event"`
	CPURatio          float64 `json:"cpu_ratio"`
	// FloorCPURounds is the floor's CPU per event in each round.
	FloorCPURounds []float64 `json:"floor_cpu_rounds_us_per_event"`
	// What only the sink does, each piece alone on one thread with the
	// collector off and every cache warm, the least of aloneTries timings
	// (leastCPU), per event: building
	// the rows as the sink does (into an arena a batch) and the keyed hash
	// of the chain (record.Sealer). RoomUs is what the goal leaves the sink
	// beyond the floor where CPU is the limit, from the dearest round of
	// the floor (the most room): floor × (1/goal − 1). OutOfReach: the goal
	// is missed and the keyed hash alone costs more than that room, so no
	// sink sealing rows with this chain meets it on this CPU.
	BuildAloneUs float64 `json:"build_alone_cpu_us_per_event"`
	SealAloneUs  float64 `json:"seal_alone_cpu_us_per_event"`
	RoomUs       float64 `json:"room_cpu_us_per_event"`
	OutOfReach   bool    `json:"out_of_reach"`
	// Order is each round's order of the two parts ("floor,sink").
	Order         []string  `json:"round_order"`
	FloorRounds   []float64 `json:"floor_rounds_events_per_sec"`
	SinkRounds    []float64 `json:"sink_rounds_events_per_sec"`
	PublishPerSec float64   `json:"publish_events_per_sec"`
	ChainVerified bool      `json:"chain_verified"`
	VerifyPerSec  float64   `json:"verify_rows_per_sec"`
	ClickHouse    string    `json:"clickhouse"`
}

func newAuditCmd(env Env) *cobra.Command {
	var (
		events, batch, rounds  int
		dsn                    string
		asJSON                 bool
		cpuProfile, memProfile string
		partProfiles           string
	)
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Audit ingest: the sink's events/s against the pipeline floor of the same run (goal ≥ 0.9×)",
		Long: `Publishes --events realistic lifecycle events (the six events of an
approve → execute flow, repeated) into an embedded NATS server, then drains
them into ClickHouse twice per round, alternating:
  floor  the sink's own pipeline (stream fetch, batch insert, ack) with the
         rows built and sealed beforehand: nothing else;
  sink   the real audit sink: decode, redact, payload, keyed hash chain,
         batch insert, ack.
Rounds alternate which goes first (the last round ends with the sink), and
each part starts with its table emptied and no merge running in ClickHouse.
It prints the best round of each and their ratio (goal: sink ≥ 0.9× floor),
then verifies the chain the sink wrote. Uses --clickhouse or a private
clickhouse-server started in a temp dir.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The profiles cover the drains alone (benchAudit), not the setup.
			return benchRun(cmd, env, "", asJSON, func(ctx context.Context, _ config.Config) (auditBenchResult, error) {
				return benchAudit(ctx, env, dsn, events, batch, rounds, auditProfiles{cpu: cpuProfile, mem: memProfile, parts: partProfiles})
			}, printAuditBench)
		},
	}
	cmd.Flags().IntVar(&events, "events", 200_000, "events to publish and drain")
	cmd.Flags().IntVar(&batch, "batch", 0, "sink batch size (default audit.batch_size)")
	cmd.Flags().IntVar(&rounds, "rounds", 5, "floor and sink runs, alternating; the best of each counts")
	cmd.Flags().StringVar(&dsn, "clickhouse", "", "ClickHouse DSN to write to (a database named airlock_bench is best); default: a private clickhouse-server")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the floor and sink rounds to this file (their samples carry the label audit_bench=floor|sink: go tool pprof -tagfocus audit_bench=sink)")
	cmd.Flags().StringVar(&partProfiles, "cpuprofile-parts", "", "write a CPU profile of the whole process for each part of each round, to PREFIX.floor.N.pprof and PREFIX.sink.N.pprof: the garbage collector's workers, the NATS client's reader and the embedded server counted for the part they worked in (go tool pprof BINARY PREFIX.sink.*.pprof)")
	cmd.MarkFlagsMutuallyExclusive("cpuprofile", "cpuprofile-parts") // one CPU profile at a time
	cmd.Flags().StringVar(&memProfile, "memprofile", "", "write an allocation profile to this file after the rounds (it includes the setup; go tool pprof -sample_index alloc_space)")
	return cmd
}

// auditProfiles are the files `bench audit` profiles the rounds into ("": none);
// parts is the prefix of the per-part CPU profiles.
type auditProfiles struct{ cpu, mem, parts string }

func printAuditBench(w io.Writer, res auditBenchResult) {
	fmt.Fprintf(w, `audit ingest (%d events of ~%d B, batches of %d, %d rounds alternating which goes first, ClickHouse %s)
  floor: fetch + insert of pre-built rows  %8.0f events/s  (rounds %s)
  sink:  the audit service                 %8.0f events/s  (rounds %s)
  ratio sink / floor                       %8.2f         (goal ≥ %.2f: %s)
  CPU per event: floor %.1f µs, sink %.1f µs   (floor/sink %.2f: the ratio where CPU is the limit)
    of which clickhouse-server: floor %.1f µs, sink %.1f µs (merging the part's rows after its window: floor %.2f µs, sink %.2f µs)
  publish into the stream                  %8.0f events/s
  verify (keyed chain + stream)            %8.0f rows/s    (chain OK: %v)
  what only the sink does, alone (one thread, no collection, least of 5): build %.2f µs, keyed hash (HMAC-SHA256 of the row) %.2f µs an event
`, res.Events, res.AvgEventBytes, res.BatchSize, res.Rounds, res.ClickHouse, res.FloorPerSec, rates(res.FloorRounds), res.SinkPerSec, rates(res.SinkRounds),
		res.Ratio, res.Goal, yesNo(res.MeetsGoal), res.FloorCPUus, res.SinkCPUus, res.CPURatio, res.FloorServerCPUus, res.SinkServerCPUus, res.FloorMergeAfterUs, res.SinkMergeAfterUs, res.PublishPerSec, res.VerifyPerSec, res.ChainVerified,
		res.BuildAloneUs, res.SealAloneUs)
	fmt.Fprintf(w, "  room the goal leaves the sink beyond the floor where CPU is the limit: %.2f µs an event (the floor's dearest round, %.1f µs, × (1/%.2f − 1))\n",
		res.RoomUs, slices.Max(append([]float64{0}, res.FloorCPURounds...)), res.Goal)
	switch {
	case res.MeetsGoal:
	case res.OutOfReach:
		fmt.Fprintf(w, "  goal OUT OF REACH for this chain on this CPU: its keyed hash alone costs %.2f µs an event, more than the %.2f µs of room, before the sink reads a byte\n", res.SealAloneUs, res.RoomUs)
	default:
		fmt.Fprintf(w, "  goal missed, not out of reach as far as this run shows: the keyed hash alone (%.2f µs) fits the room (%.2f µs), leaving %.2f µs for the rest\n", res.SealAloneUs, res.RoomUs, res.RoomUs-res.SealAloneUs)
	}
}

// Missed names each goal the run missed: the sink's throughput against
// the floor, and a chain that verifies.
func (res auditBenchResult) Missed() []string {
	var missed []string
	if !res.MeetsGoal {
		said := fmt.Sprintf("sink %.2f× the floor, goal ≥ %.2f×", res.Ratio, res.Goal)
		if res.OutOfReach {
			said += fmt.Sprintf(" (out of reach for this chain on this CPU: its keyed hash alone is %.2f µs an event, the goal's room %.2f µs)", res.SealAloneUs, res.RoomUs)
		}
		missed = append(missed, said)
	}
	if !res.ChainVerified {
		missed = append(missed, "the chain the sink wrote did not verify")
	}
	return missed
}

func rates(rs []float64) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, fmt.Sprintf("%.0f", r))
	}
	return strings.Join(parts, ", ")
}

func yesNo(b bool) string {
	if b {
		return "met"
	}
	return "NOT met"
}

func benchAudit(ctx context.Context, env Env, dsn string, n, batch, rounds int, prof auditProfiles) (auditBenchResult, error) {
	res := auditBenchResult{Events: n, Goal: 0.9, Rounds: max(rounds, 1)}
	cfg, err := env.Load()
	if err != nil {
		return res, err
	}
	if batch > 0 {
		cfg.Audit.BatchSize = batch
	}
	res.BatchSize = cfg.Audit.BatchSize
	tmp, err := os.MkdirTemp("", "airlock-bench-audit-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(tmp)
	serverCPU := func() time.Duration { return 0 }
	if dsn == "" {
		srv, err := local.New(filepath.Join(tmp, "clickhouse"), 0)
		if err != nil {
			return res, fmt.Errorf("start a private ClickHouse for the benchmark: %w (or pass --clickhouse DSN)", err)
		}
		if err := srv.Start(ctx, 60*time.Second); err != nil {
			return res, fmt.Errorf("start a private ClickHouse for the benchmark: %w (or pass --clickhouse DSN)", err)
		}
		defer srv.Stop()
		dsn, serverCPU = srv.DSN("airlock_bench"), srv.CPU
		res.ClickHouse = "private clickhouse-server"
	} else {
		res.ClickHouse = "given DSN"
	}
	ns, err := embedded.Start(embedded.Options{Port: -1, StoreDir: filepath.Join(tmp, "nats")})
	if err != nil {
		return res, err
	}
	defer ns.Stop()
	cfg.NATS.URL = ns.URL()
	if !env.LogLevelSet() {
		cfg.Log.Level = "error" // the figures, not the services' logs (--log-level debug shows each batch)
	}
	log, err := obs.NewLogger(cfg.Log, os.Stderr)
	if err != nil {
		return res, err
	}
	deps, err := svc.Connect(ctx, cfg, log, "airlock-bench-audit", true)
	if err != nil {
		return res, err
	}
	defer deps.NC.Close()
	key, _, err := record.GenerateKey()
	if err != nil {
		return res, err
	}

	// 1. Publish the backlog.
	msgs, bytes := benchAuditEvents(n)
	res.AvgEventBytes = bytes / n
	start := time.Now()
	for i, m := range msgs {
		if i%2000 == 1999 { // keep under the client's cap on outstanding async publishes
			select {
			case <-deps.JS.PublishAsyncComplete():
			case <-time.After(time.Minute):
				return res, fmt.Errorf("publishes not acknowledged within a minute")
			}
		}
		if _, err := deps.JS.PublishMsgAsync(m); err != nil {
			return res, fmt.Errorf("publish event %d: %w", i, err)
		}
	}
	select {
	case <-deps.JS.PublishAsyncComplete():
	case <-time.After(2 * time.Minute):
		return res, fmt.Errorf("publishes not acknowledged within 2 minutes")
	}
	res.PublishPerSec = float64(n) / time.Since(start).Seconds()

	// 2. The floor's rows: exactly what the sink will write, built from
	// the stored messages as the sink reads them (their sequences, store
	// times and headers) and sealed before the clock starts. Until
	// 2026-11-29 they were built from the published messages with one
	// time for all, so every floor row had the same ts and ts_ms where the
	// sink's rows carry the times the stream stored them at.
	st, err := store.OpenWriter(ctx, dsn)
	if err != nil {
		return res, err
	}
	defer st.Close()
	sealer := key.Sealer()
	msgs = nil
	stored := make([]record.Msg, 0, n)
	if err := store.ReadRange(ctx, deps.JS, cfg.Stream.Name, 1, uint64(n), func(m record.Msg) error {
		stored = append(stored, m)
		return nil
	}); err != nil {
		return res, fmt.Errorf("read the published events back: %w", err)
	}
	if len(stored) != n {
		return res, fmt.Errorf("read %d of the %d published events back from the stream", len(stored), n)
	}
	recordMsg := func(i int) record.Msg { return stored[i] }
	// The build alone, as the sink builds: into an arena a batch.
	built, err := leastCPU(aloneTries, func() {
		var arena record.Arena
		batch := make([]record.Row, res.BatchSize)
		for i := range stored {
			if j := i % len(batch); j == 0 {
				arena.Reset()
				clear(batch)
			}
			arena.BuildInto(&batch[i%len(batch)], recordMsg(i))
		}
	})
	if err != nil {
		return res, err
	}
	rows := make([]record.Row, 0, n)
	for i := range stored {
		rows = append(rows, record.Build(recordMsg(i)))
	}
	// The keyed hash alone, on the rows the floor will write.
	sealed, err := leastCPU(aloneTries, func() { sealer.Chain(rows, record.GenesisHash) })
	if err != nil {
		return res, err
	}
	res.BuildAloneUs, res.SealAloneUs = float64(built.Nanoseconds())/1e3/float64(n), float64(sealed.Nanoseconds())/1e3/float64(n)
	stored = nil
	if err := st.Conn().Exec(ctx, "CREATE TABLE IF NOT EXISTS floor_events AS events"); err != nil {
		return res, fmt.Errorf("create the floor's table: %w", err)
	}
	defer func() { _ = st.Conn().Exec(context.Background(), "DROP TABLE IF EXISTS floor_events") }()
	runtime.GC()

	// 3. Floor and sink, alternating; each round drains the whole stream
	// with a consumer of its own into an emptied table.
	opt := audit.Options{DSN: dsn, Stream: cfg.Stream.Name, BatchSize: cfg.Audit.BatchSize, FlushInterval: cfg.Audit.FlushInterval, Key: key}
	drain := func(name, kind string, run func(context.Context, audit.Options) error) (perSec, cpuUs, serverUs float64, err error) {
		o := opt
		o.Durable = name
		done := make(chan struct{})
		var once sync.Once
		o.Committed = func(last uint64) {
			if last >= uint64(n) {
				once.Do(func() { close(done) })
			}
		}
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		errc := make(chan error, 1)
		if prof.parts != "" {
			stop, err := StartCPUProfile(fmt.Sprintf("%s.%s.pprof", prof.parts, strings.ReplaceAll(strings.TrimPrefix(name, "bench_"), "_", ".")))
			if err != nil {
				return 0, 0, 0, err
			}
			defer stop()
		}
		start, cpu, server := time.Now(), processCPU(), serverCPU()
		// The label splits a CPU profile into the floor's and the sink's
		// samples (the embedded server's goroutines carry none).
		go pprof.Do(rctx, pprof.Labels("audit_bench", kind), func(c context.Context) { errc <- run(c, o) })
		select {
		case <-done:
		case err := <-errc:
			return 0, 0, 0, fmt.Errorf("%s stopped early: %v", name, err)
		case <-time.After(5 * time.Minute):
			return 0, 0, 0, fmt.Errorf("%s did not drain %d events in 5 minutes", name, n)
		}
		took, server := time.Since(start), serverCPU()-server
		used := processCPU() - cpu + server
		if prof.parts != "" {
			pprof.StopCPUProfile() // the window alone (stop is then a no-op but for the file)
		}
		cancel()
		if err := <-errc; err != nil {
			return 0, 0, 0, err
		}
		if err := deps.JS.DeleteConsumer(ctx, cfg.Stream.Name, name); err != nil {
			return 0, 0, 0, fmt.Errorf("delete the %s consumer: %w", name, err)
		}
		runtime.GC()
		perEvent := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n) }
		return float64(n) / took.Seconds(), perEvent(used), perEvent(server), nil
	}
	stopCPU := func() {}
	if prof.cpu != "" {
		if stopCPU, err = StartCPUProfile(prof.cpu); err != nil {
			return res, err
		}
		defer func() { stopCPU() }() // when a round fails
	}
	// empty truncates a table and waits until ClickHouse runs no merge in
	// the database: a part's window then holds no merge of rows written
	// before it (TRUNCATE cancels the table's merges; the wait confirms it).
	empty := func(table string) error {
		if err := st.Conn().Exec(ctx, "TRUNCATE TABLE "+table); err != nil {
			return fmt.Errorf("empty the benchmark's table %s: %w", table, err)
		}
		return waitNoMerges(ctx, st)
	}
	for _, t := range []string{"floor_events", "events"} {
		if err := empty(t); err != nil {
			return res, err
		}
	}
	parts := map[string]func(c context.Context, o audit.Options) error{
		"floor": func(c context.Context, o audit.Options) error {
			return audit.RunFloor(c, deps, o, "floor_events", rows)
		},
		"sink": func(c context.Context, o audit.Options) error {
			s, err := audit.New(deps, o)
			if err != nil {
				return err
			}
			return s.Run(c)
		},
	}
	tables := map[string]string{"floor": "floor_events", "sink": "events"}
	for round := 1; round <= res.Rounds; round++ {
		order := auditRoundOrder(round, res.Rounds)
		res.Order = append(res.Order, order[0]+","+order[1])
		for i, kind := range order {
			perSec, cpuUs, serverUs, err := drain(fmt.Sprintf("bench_%s_%d", kind, round), kind, parts[kind])
			if err != nil {
				return res, err
			}
			// ClickHouse goes on merging the part's inserts after its last
			// one; emptying the table would cancel what is left. That work is
			// the part's own: counted in its CPU, not in its events/s.
			s0 := serverCPU()
			if err := waitMergesSettled(ctx, st); err != nil {
				return res, err
			}
			after := float64((serverCPU() - s0).Microseconds()) / float64(n)
			cpuUs, serverUs = cpuUs+after, serverUs+after
			if kind == "floor" {
				res.FloorRounds, res.FloorCPURounds = append(res.FloorRounds, perSec), append(res.FloorCPURounds, cpuUs)
				res.FloorPerSec = max(res.FloorPerSec, perSec)
				if round == 1 || cpuUs < res.FloorCPUus {
					res.FloorCPUus, res.FloorServerCPUus, res.FloorMergeAfterUs = cpuUs, serverUs, after
				}
			} else {
				res.SinkRounds = append(res.SinkRounds, perSec)
				res.SinkPerSec = max(res.SinkPerSec, perSec)
				if round == 1 || cpuUs < res.SinkCPUus {
					res.SinkCPUus, res.SinkServerCPUus, res.SinkMergeAfterUs = cpuUs, serverUs, after
				}
			}
			// The run's last part is the sink's, whose rows are verified below.
			if last := round == res.Rounds && i == len(order)-1; !last {
				if err := empty(tables[kind]); err != nil {
					return res, err
				}
			}
		}
	}
	stopCPU()
	stopCPU = func() {}
	if prof.mem != "" {
		if err := writeProfile(prof.mem, "allocs"); err != nil {
			return res, err
		}
	}
	res.Ratio = res.SinkPerSec / res.FloorPerSec
	res.CPURatio = res.FloorCPUus / res.SinkCPUus
	res.MeetsGoal = res.Ratio >= res.Goal
	res.RoomUs = slices.Max(res.FloorCPURounds) * (1/res.Goal - 1)
	res.OutOfReach = !res.MeetsGoal && res.SealAloneUs > res.RoomUs

	start = time.Now()
	v, err := st.Verify(ctx, store.VerifyOptions{Key: key, JS: deps.JS, Stream: cfg.Stream.Name})
	if err != nil {
		return res, err
	}
	res.VerifyPerSec = float64(v.Count) / time.Since(start).Seconds()
	res.ChainVerified = v.OK && v.Count == uint64(n)
	return res, nil
}

// aloneTries is how often each piece of the sink's work is timed alone:
// the least of them counts, since other work on the machine (another
// process on the same core's other hardware thread) only ever stretches
// a thread's CPU time, and a bound must not be made of that.
const aloneTries = 5

// leastCPU is the least aloneCPU of run in tries tries.
func leastCPU(tries int, run func()) (time.Duration, error) {
	least := time.Duration(-1)
	for range tries {
		d, err := aloneCPU(run)
		if err != nil {
			return 0, err
		}
		if least < 0 || d < least {
			least = d
		}
	}
	return least, nil
}

// aloneCPU is the CPU time run takes on this goroutine's own thread, the
// collector off after a full collection: what a piece of the sink's work
// costs with nothing else of the process counted in it and every cache
// warm for it (in the pipeline it costs more, not less).
func aloneCPU(run func()) (time.Duration, error) {
	runtime.GC()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := threadCPU()
	if err != nil {
		return 0, err
	}
	run()
	after, err := threadCPU()
	return after - before, err
}

// threadCPU is the CPU time the calling thread has used. It is the
// thread's CPU clock, not getrusage(RUSAGE_THREAD): that reads a running
// thread's time as of its last scheduler tick, so a piece of work shorter
// than a few ticks read anything from 0 to twice its cost (a CI run's
// 3,000-event seal read 0).
func threadCPU() (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, fmt.Errorf("read this thread's CPU time: %w", err)
	}
	return time.Duration(ts.Nano()), nil
}

// auditRoundOrder is which part runs first in a round of `bench audit`:
// they alternate, so neither is always the one that follows the other,
// and the last round runs the floor first, so the run ends with the sink
// (whose rows are verified).
func auditRoundOrder(round, rounds int) [2]string {
	if (rounds-round)%2 == 1 {
		return [2]string{"sink", "floor"}
	}
	return [2]string{"floor", "sink"}
}

// waitNoMerges waits until ClickHouse runs no merge in the connection's
// database (at most 30 s).
func waitNoMerges(ctx context.Context, st *store.ClickHouse) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var running uint64
		if err := st.Conn().QueryRow(ctx, "SELECT count() FROM system.merges WHERE database = currentDatabase()").Scan(&running); err != nil {
			return fmt.Errorf("ask ClickHouse for its running merges: %w", err)
		}
		if running == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ClickHouse still runs %d merges in the benchmark's database after 30 s; run the benchmark again when it is idle", running)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// mergesQuiet is how long ClickHouse must run no merge in the benchmark's
// database for a part's merges to count as settled: it starts the next
// merge of a table as soon as one ends, while any is worth making.
const mergesQuiet = 500 * time.Millisecond

// waitMergesSettled waits until ClickHouse has run no merge in the
// connection's database for mergesQuiet (at most a minute).
func waitMergesSettled(ctx context.Context, st *store.ClickHouse) error {
	deadline := time.Now().Add(time.Minute)
	quietSince := time.Now()
	for {
		var running uint64
		if err := st.Conn().QueryRow(ctx, "SELECT count() FROM system.merges WHERE database = currentDatabase()").Scan(&running); err != nil {
			return fmt.Errorf("ask ClickHouse for its running merges: %w", err)
		}
		now := time.Now()
		switch {
		case running > 0:
			quietSince = now
		case now.Sub(quietSince) >= mergesQuiet:
			return nil
		}
		if now.After(deadline) {
			return fmt.Errorf("ClickHouse still merges the benchmark's rows after a minute (%d merges running)", running)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// benchAuditEvents builds n encoded events: approve → execute flows.
func benchAuditEvents(n int) ([]*nats.Msg, int) {
	out := make([]*nats.Msg, 0, n)
	total := 0
	for i := 0; len(out) < n; i++ {
		call := fmt.Sprintf("bench-%d", i)
		args, _ := structpb.NewStruct(map[string]any{"path": fmt.Sprintf("/srv/app/config-%d.yaml", i), "content": "key: value\nother: 42\n", "token": "t0ps3cret"})
		tc := &airlockv1.ToolCall{CallId: call, AgentId: "bench", ThreadId: "th-bench", Server: "fs", Tool: "write_file", Arguments: args, Revision: 1}
		digest, _ := canon.Digest(args) // as the policy and approval services stamp it
		d := &airlockv1.Decision{Action: airlockv1.Action_ACTION_ASK, Reason: "writes need a person", RuleId: "ask-writes", Risk: airlockv1.Risk_RISK_MEDIUM, Redact: []string{"/token"}, PolicyRevision: "rev-1", DecisionId: "d-" + call, ArgumentsDigest: digest}
		actor := &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "bench"}
		bodies := []*airlockv1.Event{
			{Body: &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: tc}}},
			{Body: &airlockv1.Event_ApprovalRequested{ApprovalRequested: &airlockv1.ApprovalRequested{Call: tc, Decision: d}}},
			{Body: &airlockv1.Event_Notified{Notified: &airlockv1.Notified{Channel: "console", Kind: "announce"}}},
			{Body: &airlockv1.Event_Approved{Approved: &airlockv1.Approved{Call: tc, Decision: d, ArgumentsDigest: digest}}, Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "alice"}},
			{Body: &airlockv1.Event_Started{Started: &airlockv1.Started{ExecutorId: "ex", Attempt: 1}}},
			{Body: &airlockv1.Event_Completed{Completed: &airlockv1.Completed{ResultJson: `{"ok":true}`, Latency: durationpb.New(3 * time.Millisecond), Attempt: 1}}},
		}
		for j, ev := range bodies {
			if len(out) == n {
				break
			}
			ev.EventId, ev.AgentId, ev.CallId, ev.Revision, ev.ThreadId = fmt.Sprintf("%s.%d", call, j), "bench", call, 1, "th-bench"
			if ev.Actor == nil {
				ev.Actor = actor
			}
			m, err := bus.Encode(ev, "airlock/bench", "")
			if err != nil {
				panic(err) // the events above are well-formed
			}
			total += len(m.Data)
			out = append(out, m)
		}
	}
	return out, total
}
