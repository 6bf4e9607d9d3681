package audit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-gate/airlock/services/audit/local"
	"github.com/airlock-gate/airlock/services/shared/seal"
)

// ErrClickHouseNotInstalled is returned by StartLocal when no
// clickhouse-server binary is installed; `airlock dev` then runs without
// ClickHouse (the audit trail is read from the stream).
var ErrClickHouseNotInstalled = local.ErrNotInstalled

// The users of the ClickHouse StartLocal starts: the sink writes as
// LocalWriter, `airlock audit` reads as LocalAuditor (read-only). Their
// passwords are generated once, in files of mode 0600 under the data dir
// (LocalPasswordFile); "default" has a password nobody keeps.
const (
	LocalWriter  = "airlock"
	LocalAuditor = "auditor"
)

// LocalPasswordFile is where StartLocal keeps user's password under dir.
func LocalPasswordFile(dir, user string) string {
	return filepath.Join(dir, "clickhouse", user+".password")
}

// LocalDSN is dsn (the local ClickHouse's, as StartLocal returned it) with
// user's credentials, its password read from LocalPasswordFile: how
// `airlock audit` logs in to the ClickHouse `airlock dev
// --clickhouse-local` runs.
func LocalDSN(dir, dsn, user string) (string, error) {
	pw, err := seal.ReadSecretFile("ClickHouse password", LocalPasswordFile(dir, user))
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("%w (`airlock dev --clickhouse-local` creates it: restart it with this data dir)", err)
	}
	if err != nil {
		return "", err
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("local ClickHouse DSN: %w", err)
	}
	u.User = url.UserPassword(user, pw)
	return u.String(), nil
}

// StartLocal starts a private clickhouse-server for `airlock dev` with its
// data under dir/clickhouse, listening on loopback only, and returns the
// DSN of its "airlock" database (without credentials: LocalDSN adds a
// user's) and a stop function. The native port is remembered in
// dir/clickhouse/port and reused on the next start when free, so the DSN
// stays the same across restarts of `airlock dev`.
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
	a := local.Accounts{Writer: LocalWriter, Auditor: LocalAuditor}
	for user, pw := range map[string]*string{LocalWriter: &a.WriterPassword, LocalAuditor: &a.AuditorPassword} {
		k, err := seal.Ensure(LocalPasswordFile(dir, user))
		if err != nil {
			return "", nil, fmt.Errorf("the local ClickHouse's %s password: %w", user, err)
		}
		*pw = k.Hex()
	}
	s, err := local.NewWithAccounts(chDir, port, a)
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
