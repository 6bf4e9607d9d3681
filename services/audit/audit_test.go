package audit_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/airlock-gate/airlock/services/audit"
	"github.com/airlock-gate/airlock/services/audit/chtest"
	"github.com/airlock-gate/airlock/services/audit/record"
	"github.com/airlock-gate/airlock/services/audit/store"
	"github.com/airlock-gate/airlock/services/shared/canon"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

func TestEveryEventOfAnApproveExecuteFlowLandsWithTheRightFields(t *testing.T) {
	e := newEnv(t, chtest.Shared(t))
	e.sink(e.dsn)
	args := map[string]any{"path": "/etc/app.conf", "token": "s3cret-token", "opts": map[string]any{"password": "hunter2", "mode": "0644"}}
	e.publish(approveFlow(t, "bot", "call-1", "fs", "write_file", "alice", args, "/token", "/opts/password")...)
	rows := waitRows(t, e.open(e.dsn), 6, 15*time.Second)

	wantDigest, _ := canon.Digest(mustStruct(t, args))
	byType := map[string]store.Row{}
	for i, r := range rows {
		byType[r.Type] = r
		if r.Agent != "bot" || r.Call != "call-1" || r.Thread != "th-bot" || r.Revision != 1 {
			t.Errorf("row %d (%s) has agent %q call %q thread %q revision %d", i, r.Type, r.Agent, r.Call, r.Thread, r.Revision)
		}
		if i > 0 && r.Seq != rows[i-1].Seq+1 {
			t.Errorf("rows are not in stream order: %d after %d", r.Seq, rows[i-1].Seq)
		}
		if strings.Contains(r.Payload, "s3cret-token") || strings.Contains(r.Payload, "hunter2") {
			t.Errorf("%s row stores a redacted secret in clear: %s", r.Type, r.Payload)
		}
		if r.Time.IsZero() || time.Since(r.Time) > time.Minute {
			t.Errorf("%s row has time %s", r.Type, r.Time)
		}
	}
	got := func(typ string) store.Row {
		r, ok := byType[typ]
		if !ok {
			t.Fatalf("no %s row in %v", typ, rows)
		}
		return r
	}
	cases := []struct {
		name string
		ok   bool
	}{
		{"requested row names the tool and keeps the full-arguments digest", got("requested").Server == "fs" && got("requested").Tool == "write_file" && got("requested").ArgsDigest == wantDigest && got("requested").ActorType == "agent"},
		{"requested row withholds every argument value until the policy has decided", strings.Contains(got("requested").Payload, record.Withheld) && !strings.Contains(got("requested").Payload, "/etc/app.conf")},
		{"decision row carries the policy's verdict, rule, risk, revision and decision id", got("approval_requested").Decision == "ask" && got("approval_requested").RuleID == "ask-writes" && got("approval_requested").Risk == "high" && got("approval_requested").PolicyRevision == "rev-1" && got("approval_requested").DecisionID == "dec-call-1" && got("approval_requested").Reason == "writes need a person"},
		{"decision row masks exactly the marked paths", strings.Contains(got("approval_requested").Payload, `"token":"[REDACTED]"`) && strings.Contains(got("approval_requested").Payload, `"password":"[REDACTED]"`) && strings.Contains(got("approval_requested").Payload, `"/etc/app.conf"`) && strings.Contains(got("approval_requested").Payload, `"mode":"0644"`)},
		{"decision row keeps the digest of the full arguments", got("approval_requested").ArgsDigest == wantDigest},
		{"approved row names the human reviewer", got("approved").Decision == "approve" && got("approved").ActorType == "human" && got("approved").ActorID == "alice" && got("approved").ActorChannel == "console" && got("approved").Reason == "fine"},
		{"approved row masks the marked paths too", strings.Contains(got("approved").Payload, `"token":"[REDACTED]"`)},
		{"completed row has the tool latency", got("completed").LatencyMS != nil && *got("completed").LatencyMS == 42},
		{"rows without latency have none", got("started").LatencyMS == nil},
		{"notified row is recorded with its own random event id", got("notified").EventID != "" && got("notified").ActorID == "approval"},
	}
	for _, c := range cases {
		if !c.ok {
			t.Errorf("%s: does not hold", c.name)
		}
	}
	if res := e.verify(e.open(e.dsn)); !res.OK || res.Count != 6 {
		t.Fatalf("verify: %+v", res)
	}
	if rows[0].PrevHash != record.GenesisHash {
		t.Errorf("first row's prev_hash is %s, want the genesis hash", rows[0].PrevHash)
	}
}

func TestClickHouseStoppedUnderLoadThenRestartedLosesNothingAndTheChainVerifies(t *testing.T) {
	ch := chtest.Start(t) // private: this test stops it
	e := newEnv(t, ch)
	e.sink(e.dsn)
	st := e.open(e.dsn)

	e.publishAsync(simpleEvents(t, "a", 2000))
	waitRows(t, st, 2000, 30*time.Second)

	// Load keeps coming while ClickHouse is down.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.publishAsync(simpleEvents(t, "b", 3000))
	}()
	ch.Kill()
	wg.Wait()
	e.publishAsync(simpleEvents(t, "c", 1000))
	// ClickHouse stays down until the sink has failed to commit several
	// times: the events must be waiting in the stream, not lost.
	retries := e.deps.Metrics.Handled.WithLabelValues("audit", "retry")
	testenv.Eventually(t, 20*time.Second, "the sink retrying while ClickHouse is down", func() bool { return testutil.ToFloat64(retries) >= 3 })
	ch.Restart()

	total := e.streamCount()
	if total != 6000 {
		t.Fatalf("stream holds %d events, want 6000", total)
	}
	rows := waitRows(t, st, total, 60*time.Second)
	for i, r := range rows {
		if r.Seq != uint64(i+1) {
			t.Fatalf("row %d has seq %d: a sequence is missing or repeated", i, r.Seq)
		}
	}
	if res := e.verify(st); !res.OK || res.Count != total {
		t.Fatalf("verify after outage: %+v", res)
	}
}

func TestRedeliveredEventsAreNotCountedTwice(t *testing.T) {
	e := newEnv(t, chtest.Shared(t))
	stop := e.sink(e.dsn)
	st := e.open(e.dsn)
	e.publishAsync(simpleEvents(t, "r", 300))
	before := waitRows(t, st, 300, 20*time.Second)
	stop()

	t.Run("the consumer deleted and every event delivered again", func(t *testing.T) {
		if err := e.deps.JS.DeleteConsumer(context.Background(), e.deps.Config.Stream.Name, audit.Durable); err != nil {
			t.Fatal(err)
		}
		stop := e.sink(e.dsn)
		e.publishAsync(simpleEvents(t, "r2", 10)) // something new, to know the redelivery was processed
		waitRows(t, st, 310, 20*time.Second)
		stop()
	})
	t.Run("the same rows inserted again, as after an insert that failed ambiguously", func(t *testing.T) {
		if err := st.Insert(context.Background(), before); err != nil {
			t.Fatal(err)
		}
		n, err := st.Count(context.Background(), store.Filter{})
		if err != nil || n != 310 {
			t.Fatalf("count after re-insert = %d, %v; want 310", n, err)
		}
		rows, err := st.Query(context.Background(), store.Filter{Call: "r-0"})
		if err != nil || len(rows) != 2 {
			t.Fatalf("query of one call after re-insert returned %d rows, %v; want 2", len(rows), err)
		}
	})
	t.Run("two sink replicas at once do not fork the chain", func(t *testing.T) {
		e.sink(e.dsn)
		e.sink(e.dsn)
		e.publishAsync(simpleEvents(t, "r3", 2000))
		waitRows(t, st, 2310, 30*time.Second)
	})
	if res := e.verify(st); !res.OK || res.Count != 2310 {
		t.Fatalf("verify: %+v", res)
	}
}

func TestFiltersAndExportsReturnTheRightRows(t *testing.T) {
	e := newEnv(t, chtest.Shared(t))
	e.sink(e.dsn)
	e.publish(approveFlow(t, "bot", "c-1", "fs", "write_file", "alice", map[string]any{"path": "/a"})...)
	e.publish(approveFlow(t, "helper", "c-2", "shell", "exec", "bob", map[string]any{"cmd": "ls"})...)
	e.publish(simpleEvents(t, "s", 4)...)
	st := e.open(e.dsn)
	all := waitRows(t, st, 16, 15*time.Second)
	mid := all[6].Time
	rd := store.NewStream(e.deps.JS, e.deps.Config.Stream.Name, e.key)

	cases := []struct {
		name   string
		filter store.Filter
		want   int
		check  func(store.Row) bool
	}{
		{"by call", store.Filter{Call: "c-2"}, 6, func(r store.Row) bool { return r.Call == "c-2" }},
		{"by thread", store.Filter{Thread: "th-bot"}, 6, func(r store.Row) bool { return r.Thread == "th-bot" }},
		{"by agent", store.Filter{Agent: "helper"}, 6, func(r store.Row) bool { return r.Agent == "helper" }},
		{"by tool as server__tool takes every event of its calls", store.Filter{Tool: "shell__exec"}, 6, func(r store.Row) bool { return r.Call == "c-2" }},
		{"by bare tool name", store.Filter{Tool: "read_file"}, 4, func(r store.Row) bool { return r.Tool == "read_file" }},
		{"by actor", store.Filter{Actor: "alice"}, 1, func(r store.Row) bool { return r.Type == "approved" && r.Call == "c-1" }},
		{"by type", store.Filter{Type: "completed"}, 2, func(r store.Row) bool { return r.Type == "completed" }},
		{"by decision", store.Filter{Decision: "allow"}, 2, func(r store.Row) bool { return r.Type == "allowed" }},
		{"by several fields at once", store.Filter{Agent: "bot", Type: "approved", Decision: "approve"}, 1, func(r store.Row) bool { return r.Call == "c-1" }},
		{"by time range", store.Filter{Since: mid}, countFrom(all, mid), func(r store.Row) bool { return !r.Time.Before(mid) }},
		{"until a time", store.Filter{Until: mid}, 16 - countFrom(all, mid), func(r store.Row) bool { return r.Time.Before(mid) }},
		{"with a limit", store.Filter{Limit: 3}, 3, func(r store.Row) bool { return r.Seq <= 3 }},
		{"leaving agents out", store.Filter{ExcludeAgents: []string{"bot", "nobody"}}, 6, func(r store.Row) bool { return r.Agent != "bot" }},
		{"leaving agents out with another field", store.Filter{ExcludeAgents: []string{"helper"}, Type: "approved"}, 1, func(r store.Row) bool { return r.Call == "c-1" }},
		{"nothing matching", store.Filter{Call: "nope"}, 0, nil},
	}
	for _, c := range cases {
		for _, src := range []store.Reader{st, rd} {
			t.Run(c.name+" from "+src.Source(), func(t *testing.T) {
				rows, err := src.Query(context.Background(), c.filter)
				if err != nil {
					t.Fatal(err)
				}
				if len(rows) != c.want {
					t.Fatalf("%d rows, want %d: %v", len(rows), c.want, types(rows))
				}
				for _, r := range rows {
					if !c.check(r) {
						t.Errorf("row %d (%s %s) does not belong", r.Seq, r.Type, r.Call)
					}
				}
			})
		}
	}

	t.Run("csv export has a header and one line per row", func(t *testing.T) {
		var b strings.Builder
		n, err := store.Export(context.Background(), st, &b, "csv", store.Filter{Call: "c-1"})
		if err != nil || n != 6 {
			t.Fatalf("export: %d rows, %v", n, err)
		}
		lines := strings.Split(strings.TrimSpace(b.String()), "\n")
		if len(lines) != 7 || !strings.HasPrefix(lines[0], "seq,time,event_id,type") || !strings.Contains(lines[4], ",approved,") {
			t.Fatalf("csv:\n%s", b.String())
		}
	})
	t.Run("json export is an array of rows with the payload as JSON", func(t *testing.T) {
		var b strings.Builder
		if _, err := store.Export(context.Background(), st, &b, "json", store.Filter{Agent: "helper"}); err != nil {
			t.Fatal(err)
		}
		var got []map[string]any
		if err := json.Unmarshal([]byte(b.String()), &got); err != nil {
			t.Fatalf("%v:\n%s", err, b.String())
		}
		if len(got) != 6 || got[0]["call_id"] != "c-2" || got[0]["payload"].(map[string]any)["requested"] == nil {
			t.Fatalf("json export: %v", got)
		}
	})
	t.Run("jsonl export is one object per line", func(t *testing.T) {
		var b strings.Builder
		if _, err := store.Export(context.Background(), rd, &b, "jsonl", store.Filter{Type: "completed"}); err != nil {
			t.Fatal(err)
		}
		if lines := strings.Split(strings.TrimSpace(b.String()), "\n"); len(lines) != 2 {
			t.Fatalf("jsonl:\n%s", b.String())
		}
	})
	t.Run("the stream and ClickHouse give the same rows and hashes", func(t *testing.T) {
		fromStream, err := rd.Query(context.Background(), store.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range all {
			if fromStream[i].Hash != all[i].Hash {
				t.Fatalf("row %d: stream hash %s, ClickHouse hash %s", i, fromStream[i].Hash, all[i].Hash)
			}
		}
	})
	t.Run("analytics agree between the stream and ClickHouse", func(t *testing.T) {
		a1, err := st.Analytics(context.Background(), store.AnalyticsOptions{})
		if err != nil {
			t.Fatal(err)
		}
		a2, err := rd.Analytics(context.Background(), store.AnalyticsOptions{})
		if err != nil {
			t.Fatal(err)
		}
		j1, _ := json.Marshal(a1)
		j2, _ := json.Marshal(a2)
		if string(j1) != string(j2) {
			t.Fatalf("clickhouse %s\nstream     %s", j1, j2)
		}
		if len(a1.MostAsked) != 2 || a1.DecideCount != 2 || len(a1.Reviewers) != 2 {
			t.Fatalf("analytics: %s", j1)
		}
	})
}

func countFrom(rows []store.Row, t time.Time) int {
	n := 0
	for _, r := range rows {
		if !r.Time.Before(t) {
			n++
		}
	}
	return n
}

func types(rows []store.Row) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.Call+"/"+r.Type)
	}
	return out
}

func TestBackFill(t *testing.T) {
	ch := chtest.Shared(t)
	t.Run("events published before ClickHouse was configured are written once it is", func(t *testing.T) {
		e := newEnv(t, ch)
		svc, err := audit.NewFromConfig(context.Background(), e.deps) // no DSN: idle
		if err != nil {
			t.Fatal(err)
		}
		stopIdle := runIdle(t, svc)
		e.publish(approveFlow(t, "bot", "bf-1", "fs", "write_file", "alice", map[string]any{"path": "/x"})...)
		rows, err := store.NewStream(e.deps.JS, e.deps.Config.Stream.Name, e.key).Query(context.Background(), store.Filter{Call: "bf-1"})
		if err != nil || len(rows) != 6 {
			t.Fatalf("without ClickHouse the stream reader gives %d rows, %v; want 6", len(rows), err)
		}
		stopIdle()
		e.sink(e.dsn)
		waitRows(t, e.open(e.dsn), 6, 15*time.Second)
	})
	t.Run("a new empty ClickHouse gets everything the stream retains, although the consumer acknowledged it all", func(t *testing.T) {
		e := newEnv(t, ch)
		stop := e.sink(e.dsn)
		e.publish(simpleEvents(t, "old", 20)...)
		waitRows(t, e.open(e.dsn), 20, 15*time.Second)
		stop()
		fresh := ch.DSN(t) + "x"
		fresh = strings.Replace(fresh, "?dial_timeout=2sx", "_new?dial_timeout=2s", 1)
		e.sink(fresh)
		e.publish(simpleEvents(t, "new", 2)...)
		st := e.open(fresh)
		waitRows(t, st, 22, 15*time.Second)
		if res := e.verify(st); !res.OK {
			t.Fatalf("verify: %+v", res)
		}
	})
}

func runIdle(t *testing.T, s interface {
	Run(context.Context) error
}) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("idle audit service: %v", err)
		}
	}
}

func TestMigrationsAreIdempotent(t *testing.T) {
	ch := chtest.Shared(t)
	dsn := ch.DSN(t)
	files, err := fs.ReadDir(store.Migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	want := uint64(len(files))
	for i := 0; i < 3; i++ {
		st, err := store.OpenWriter(context.Background(), dsn)
		if err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
		var n uint64
		if err := st.Conn().QueryRow(context.Background(), "SELECT count() FROM schema_migrations FINAL").Scan(&n); err != nil || n != want {
			t.Fatalf("run %d: schema_migrations has %d rows, %v; want %d", i+1, n, err, want)
		}
		st.Close()
	}
}
