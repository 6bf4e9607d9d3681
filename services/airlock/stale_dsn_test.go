package main

import (
	"context"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/audit"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// clickhouse.dsn is written and removed only by a dev started
// with --clickhouse-local. One killed (SIGKILL, OOM) leaves it; a dev
// started next on the same data dir without --clickhouse-local holds the
// lock for its whole run and never removes the file, so runningDevFile
// trusts the stale address, and `airlock audit ...` logs in there with the
// auditor's password: whoever took the port gets it.
func TestAStaleClickHouseDSNUnderADevWithoutClickHouseLocalSendsNoPassword(t *testing.T) {
	dir := t.TempDir()
	squatter, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer squatter.Close()
	got := testenv.Eavesdrop(squatter, 2*time.Second)
	// The dead dev's files: its ClickHouse's address and the auditor's password.
	if err := os.WriteFile(localDSNFile(dir), []byte("clickhouse://"+squatter.Addr().String()+"/airlock\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := seal.CreateSecretFile(audit.LocalPasswordFile(dir, audit.LocalAuditor), "auditor-secret-pw\n"); err != nil {
		t.Fatal(err)
	}
	// The dev running now (started without --clickhouse-local) holds the lock.
	unlock, err := lockDataDir(natsauth.Dev{DataDir: dir}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	t.Setenv("AIRLOCK_DEV_DATA_DIR", dir)
	t.Setenv("AIRLOCK_CLICKHOUSE_DSN", "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var a auditFlags
	// Without the check, open dials the address and waits for an answer the
	// squatter never gives: it reads what came for 2 s, then hangs up, and
	// only then does open return. So what it was sent is recorded by now.
	_, _, _ = a.open(ctx, &globals{})
	if strings.Contains(got.Received(), "auditor-secret-pw") {
		t.Fatalf("the audit CLI sent the local auditor's password to the address a dead dev's clickhouse.dsn names, though the dev that holds the lock runs no local ClickHouse")
	}
}
