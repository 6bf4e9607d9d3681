package audit

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-gate/airlock/services/audit/local"
)

// ErrClickHouseNotInstalled is returned by StartLocal when no
// clickhouse-server binary is installed; `airlock dev` then runs without
// ClickHouse (the audit trail is read from the stream).
var ErrClickHouseNotInstalled = local.ErrNotInstalled

// StartLocal starts a private clickhouse-server for `airlock dev` with its
// data under dir/clickhouse, listening on loopback only, and returns the
// DSN of its "airlock" database and a stop function. The native port is
// remembered in dir/clickhouse/port and reused on the next start when free,
// so the DSN stays the same across restarts of `airlock dev`.
func StartLocal(ctx context.Context, dir string) (dsn string, stop func(), err error) {
	chDir := filepath.Join(dir, "clickhouse")
	if err := os.MkdirAll(chDir, 0o700); err != nil {
		return "", nil, fmt.Errorf("clickhouse data dir %s: %w", chDir, err)
	}
	portFile := filepath.Join(chDir, "port")
	port := 0
	if raw, err := os.ReadFile(portFile); err == nil {
		if p, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil && portFree(p) {
			port = p
		}
	}
	s, err := local.New(chDir, port)
	if err != nil {
		return "", nil, err
	}
	if err := s.Start(ctx, 60*time.Second); err != nil {
		return "", nil, err
	}
	_ = os.WriteFile(portFile, []byte(strconv.Itoa(s.TCPPort)+"\n"), 0o600) // best effort: only keeps the DSN stable
	return fmt.Sprintf("clickhouse://127.0.0.1:%d/airlock", s.TCPPort), s.Stop, nil
}

func portFree(p int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		return false
	}
	l.Close()
	return true
}
