package audit_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/audit/chtest"
	"github.com/airlock-gate/airlock/services/audit/store"
)

func TestShippedExampleQueriesRunAndTheAuditorUserIsReadOnly(t *testing.T) {
	ch := chtest.Shared(t)
	e := newEnv(t, ch)
	e.sink(e.dsn)
	e.publish(approveFlow(t, "bot", "q-1", "fs", "write_file", "alice", map[string]any{"path": "/a"})...)
	waitRows(t, e.open(e.dsn), 6, 15*time.Second)

	auditorDSN := strings.Replace(e.dsn, "clickhouse://", "clickhouse://auditor:auditor@", 1)
	ro, err := store.Open(context.Background(), auditorDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()

	raw, err := os.ReadFile("../../deploy/clickhouse/queries.sql")
	if err != nil {
		t.Fatal(err)
	}
	var stmts []string
	for _, s := range strings.Split(raw2sql(string(raw)), ";") {
		if s = strings.TrimSpace(s); s != "" {
			stmts = append(stmts, s)
		}
	}
	if len(stmts) < 8 {
		t.Fatalf("only %d example queries found", len(stmts))
	}
	for _, q := range stmts {
		rows, err := ro.Conn().Query(context.Background(), q)
		if err != nil {
			t.Errorf("example query fails for the auditor: %v\n%s", err, q)
			continue
		}
		rows.Close()
	}
	if rows, err := ro.Query(context.Background(), store.Filter{Call: "q-1"}); err != nil || len(rows) != 6 {
		t.Errorf("the auditor reads %d rows of q-1, %v; want 6", len(rows), err)
	}
	for _, q := range []string{"ALTER TABLE events UPDATE reason = 'x' WHERE seq = 1", "DROP TABLE events", "TRUNCATE TABLE events"} {
		if err := ro.Conn().Exec(context.Background(), q); err == nil {
			t.Errorf("the read-only auditor could run %q", q)
		}
	}
	if err := ro.Insert(context.Background(), []store.Row{{Seq: 999, Time: time.Now()}}); err == nil {
		t.Error("the read-only auditor could insert a row")
	}
}

// raw2sql drops comment lines.
func raw2sql(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
