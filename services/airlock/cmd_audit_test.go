package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTheAuditCLIFindsTheLocalClickHouseOfDev: `airlock dev
// --clickhouse-local` writes where its ClickHouse listens; the audit
// commands read it when no DSN is configured, and say where they got it
// when it does not answer.
func TestTheAuditCLIFindsTheLocalClickHouseOfDev(t *testing.T) {
	dir := t.TempDir()
	// A port nothing listens on: take a free one and close it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	if err := os.WriteFile(localDSNFile(dir), []byte("clickhouse://"+addr+"/airlock\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AIRLOCK_DEV_DATA_DIR", dir)
	t.Setenv("AIRLOCK_CLICKHOUSE_DSN", "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var a auditFlags
	_, _, err = a.open(ctx, &globals{})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "clickhouse.dsn")) || !strings.Contains(err.Error(), "does not answer") {
		t.Fatalf("open: %v, want it to name %s and say the ClickHouse there does not answer", err, localDSNFile(dir))
	}
}
