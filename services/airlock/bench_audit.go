package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/audit"
	"github.com/airlock-gate/airlock/services/audit/record"
	"github.com/airlock-gate/airlock/services/audit/store"
	"github.com/airlock-gate/airlock/services/shared/canon"
	"github.com/airlock-gate/airlock/services/shared/embedded"
	"github.com/airlock-gate/airlock/services/shared/envelope"
)

// auditBenchResult is what `airlock bench audit --json` prints.
type auditBenchResult struct {
	Events          int     `json:"events"`
	BatchSize       int     `json:"batch_size"`
	AvgEventBytes   int     `json:"avg_event_bytes"`
	PublishPerSec   float64 `json:"publish_events_per_sec"`
	SinkPerSec      float64 `json:"sink_events_per_sec"`
	SinkSeconds     float64 `json:"sink_seconds"`
	BuildSealPerSec float64 `json:"build_seal_events_per_sec"`
	InsertPerSec    float64 `json:"insert_rows_per_sec"`
	ChainVerified   bool    `json:"chain_verified"`
	VerifyPerSec    float64 `json:"verify_rows_per_sec"`
	Goal            float64 `json:"goal_events_per_sec"`
	MeetsGoal       bool    `json:"meets_goal"`
	ClickHouse      string  `json:"clickhouse"`
}

func newBenchAuditCmd(g *globals) *cobra.Command {
	var (
		events, batch int
		dsn           string
		asJSON        bool
		cpuProfile    string
	)
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Sustained audit ingest: events/s from the stream into ClickHouse (goal ≥ 100k/s)",
		Long: `Publishes --events realistic lifecycle events (the six events of an
approve → execute flow, repeated) into an embedded NATS server, then runs the
audit sink and measures how fast it drains them into ClickHouse: decode,
redact, hash-chain, batch insert, ack. Also reports the parts (build+seal in
memory, raw batch insert) and verifies the chain afterwards. Uses --clickhouse
or a private clickhouse-server started in a temp dir.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cpuProfile != "" {
				stop, err := startCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			res, err := benchAudit(cmd.Context(), g, dsn, events, batch)
			if err != nil {
				return err
			}
			if asJSON {
				b, _ := json.Marshal(res)
				fmt.Println(string(b))
				return nil
			}
			fmt.Printf(`audit ingest (%d events of ~%d B, batches of %d, ClickHouse %s)
  publish into the stream   %10.0f events/s
  sink: stream → ClickHouse %10.0f events/s  (%.2fs; goal ≥ %.0f/s: %s)
  build + hash chain        %10.0f events/s  (in memory)
  raw batch insert          %10.0f rows/s
  verify                    %10.0f rows/s  (chain OK: %v)
`, res.Events, res.AvgEventBytes, res.BatchSize, res.ClickHouse, res.PublishPerSec, res.SinkPerSec, res.SinkSeconds, res.Goal, yesNo(res.MeetsGoal),
				res.BuildSealPerSec, res.InsertPerSec, res.VerifyPerSec, res.ChainVerified)
			return nil
		},
	}
	cmd.Flags().IntVar(&events, "events", 200_000, "events to publish and drain")
	cmd.Flags().IntVar(&batch, "batch", 0, "sink batch size (default audit.batch_size)")
	cmd.Flags().StringVar(&dsn, "clickhouse", "", "ClickHouse DSN to write to (a database named airlock_bench is best); default: a private clickhouse-server")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	return cmd
}

func yesNo(b bool) string {
	if b {
		return "met"
	}
	return "NOT met"
}

func benchAudit(ctx context.Context, g *globals, dsn string, n, batch int) (auditBenchResult, error) {
	res := auditBenchResult{Events: n, Goal: 100_000}
	cfg, err := g.load()
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
	if dsn == "" {
		local, stop, err := audit.StartLocal(ctx, tmp)
		if err != nil {
			return res, fmt.Errorf("start a private ClickHouse for the benchmark: %w (or pass --clickhouse DSN)", err)
		}
		defer stop()
		dsn = local
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
	if g.logLevel == "" {
		cfg.Log.Level = "error" // the figures, not the services' logs (--log-level debug shows each batch)
	}
	log, err := g.logger(cfg)
	if err != nil {
		return res, err
	}
	deps, err := connectDeps(ctx, cfg, log, "airlock-bench-audit")
	if err != nil {
		return res, err
	}
	defer deps.NC.Close()

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

	// 2. Drain it with the real sink.
	st, err := store.OpenWriter(ctx, dsn)
	if err != nil {
		return res, err
	}
	defer st.Close()
	if err := st.Conn().Exec(ctx, "TRUNCATE TABLE events"); err != nil {
		return res, fmt.Errorf("empty the benchmark's events table: %w", err)
	}
	sink, err := audit.New(deps, audit.Options{DSN: dsn, Stream: cfg.Stream.Name, BatchSize: cfg.Audit.BatchSize, FlushInterval: cfg.Audit.FlushInterval})
	if err != nil {
		return res, err
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	start = time.Now()
	go func() { done <- sink.Run(sctx) }()
	for {
		seq, _, err := st.Head(ctx)
		if err == nil && seq >= uint64(n) {
			break
		}
		if time.Since(start) > 5*time.Minute {
			cancel()
			return res, fmt.Errorf("the sink wrote up to seq %d of %d in 5 minutes", seq, n)
		}
		time.Sleep(50 * time.Millisecond) // polling the head; 50 ms resolution on a multi-second run
	}
	res.SinkSeconds = time.Since(start).Seconds()
	res.SinkPerSec = float64(n) / res.SinkSeconds
	cancel()
	if err := <-done; err != nil {
		return res, err
	}
	res.MeetsGoal = res.SinkPerSec >= res.Goal

	// 3. The parts: building and sealing rows in memory, and raw inserts.
	rows := make([]record.Row, 0, n)
	start = time.Now()
	prev := record.GenesisHash
	now := time.Now()
	for i, m := range msgs {
		r := record.Build(record.Msg{Seq: uint64(i + 1), Time: now, Subject: m.Subject, Header: m.Header, Data: m.Data})
		record.Seal(&r, prev)
		prev = r.Hash
		rows = append(rows, r)
	}
	res.BuildSealPerSec = float64(n) / time.Since(start).Seconds()
	if err := st.Conn().Exec(ctx, "CREATE TABLE IF NOT EXISTS bench_events AS events"); err != nil {
		return res, err
	}
	raw, err := store.OpenWriter(ctx, dsn)
	if err != nil {
		return res, err
	}
	defer raw.Close()
	start = time.Now()
	for i := 0; i < len(rows); i += res.BatchSize {
		if err := raw.InsertInto(ctx, "bench_events", rows[i:min(i+res.BatchSize, len(rows))]); err != nil {
			return res, err
		}
	}
	res.InsertPerSec = float64(n) / time.Since(start).Seconds()
	_ = st.Conn().Exec(ctx, "DROP TABLE IF EXISTS bench_events")

	start = time.Now()
	v, err := st.Verify(ctx)
	if err != nil {
		return res, err
	}
	res.VerifyPerSec = float64(v.Count) / time.Since(start).Seconds()
	res.ChainVerified = v.OK && v.Count == uint64(n)
	return res, nil
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
			m, err := envelope.Encode(ev, "airlock/bench", "")
			if err != nil {
				panic(err) // the events above are well-formed
			}
			total += len(m.Data)
			out = append(out, m)
		}
	}
	return out, total
}
