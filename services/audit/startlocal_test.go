package audit_test

import (
	"context"
	"testing"

	"github.com/airlock-gate/airlock/services/audit"
	"github.com/airlock-gate/airlock/services/audit/store"
)

func TestStartLocalGivesAWorkingDSNThatSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	dsn, stop, err := audit.StartLocal(context.Background(), dir)
	if err != nil {
		t.Fatalf("%v (install with `go tool task test:deps`)", err)
	}
	writer, err := audit.LocalDSN(dir, dsn, audit.LocalWriter)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	st, err := store.OpenWriter(context.Background(), writer)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	st.Close()
	stop()
	dsn2, stop2, err := audit.StartLocal(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer stop2()
	if dsn2 != dsn {
		t.Errorf("DSN changed across restarts: %s then %s", dsn, dsn2)
	}
	auditor, err := audit.LocalDSN(dir, dsn2, audit.LocalAuditor)
	if err != nil {
		t.Fatal(err)
	}
	st, err = store.Open(context.Background(), auditor)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, _, err := st.Head(context.Background()); err != nil {
		t.Fatalf("the events table did not survive the restart: %v", err)
	}
}
