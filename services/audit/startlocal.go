package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
	s, err := startLocalServer(ctx, dir, 0)
	if err != nil {
		return "", nil, err
	}
	return localBase(s), s.Stop, nil
}

func localBase(s *local.Server) string { return fmt.Sprintf("clickhouse://%s/airlock", s.Addr()) }

// startLocalServer starts the local server; avoid, when not 0, is a port
// it must not use (the one a server that died listened on).
func startLocalServer(ctx context.Context, dir string, avoid int) (*local.Server, error) {
	chDir := filepath.Join(dir, "clickhouse")
	if err := os.MkdirAll(chDir, 0o700); err != nil {
		return nil, fmt.Errorf("clickhouse data dir %s: %w", chDir, err)
	}
	portFile := filepath.Join(chDir, "port")
	port := 0
	if raw, err := os.ReadFile(portFile); err == nil && avoid == 0 {
		if p, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil && portFree(p) {
			port = p
		}
	}
	a := local.Accounts{Writer: LocalWriter, Auditor: LocalAuditor}
	for user, pw := range map[string]*string{LocalWriter: &a.WriterPassword, LocalAuditor: &a.AuditorPassword} {
		k, err := seal.Ensure(LocalPasswordFile(dir, user))
		if err != nil {
			return nil, fmt.Errorf("the local ClickHouse's %s password: %w", user, err)
		}
		*pw = k.Hex()
	}
	var s *local.Server
	for {
		var err error
		if s, err = local.NewWithAccounts(chDir, port, a); err != nil {
			return nil, err
		}
		if s.TCPPort != avoid {
			break
		}
	}
	if err := s.Start(ctx, 60*time.Second); err != nil {
		return nil, err
	}
	_ = os.WriteFile(portFile, []byte(strconv.Itoa(s.TCPPort)+"\n"), 0o600) // best effort: only keeps the DSN stable
	return s, nil
}

// Local is the ClickHouse of `airlock dev --clickhouse-local`, supervised:
// when it exits unexpectedly, DSN reports it gone at once (so nothing
// sends a password to its old port, where any process could listen next),
// and it is started again on a fresh port with the same data.
type Local struct {
	dir    string
	log    *slog.Logger
	onAddr func(base string)

	mu       sync.Mutex
	srv      *local.Server
	down     string // why there is no server, while there is none
	stopping bool
	done     chan struct{}
}

// SuperviseLocal starts the local ClickHouse under dir (as StartLocal) and
// supervises it until Stop. onAddr is told the credential-free DSN each
// time the server (re)starts, and "" when it exits.
func SuperviseLocal(ctx context.Context, dir string, log *slog.Logger, onAddr func(base string)) (*Local, error) {
	s, err := startLocalServer(ctx, dir, 0)
	if err != nil {
		return nil, err
	}
	l := &Local{dir: dir, log: log, onAddr: onAddr, srv: s, done: make(chan struct{})}
	onAddr(localBase(s))
	go l.watch(ctx)
	return l, nil
}

// Base is the running server's DSN without credentials, or an error
// saying it is gone.
func (l *Local) Base() (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.srv == nil {
		return "", errors.New(l.down)
	}
	return localBase(l.srv), nil
}

// DSN is the running server's DSN with user's credentials, or an error
// saying it is gone (then nothing may connect).
func (l *Local) DSN(user string) (string, error) {
	base, err := l.Base()
	if err != nil {
		return "", err
	}
	return LocalDSN(l.dir, base, user)
}

// Pid is the running server's process id, 0 while it is down.
func (l *Local) Pid() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.srv == nil {
		return 0
	}
	return l.srv.Pid()
}

// Stop stops supervising and stops the server.
func (l *Local) Stop() {
	l.mu.Lock()
	l.stopping = true
	s := l.srv
	l.mu.Unlock()
	if s != nil {
		s.Stop()
	}
	<-l.done
}

// watch restarts the server each time it exits, until Stop or ctx ends.
func (l *Local) watch(ctx context.Context) {
	defer close(l.done)
	for {
		l.mu.Lock()
		s := l.srv
		l.mu.Unlock()
		select {
		case <-s.Exited():
		case <-ctx.Done():
			return
		}
		l.mu.Lock()
		if l.stopping {
			l.mu.Unlock()
			return
		}
		l.srv = nil
		l.down = fmt.Sprintf("the local ClickHouse on %s exited; airlock no longer connects to that address and is restarting it on a new port (events wait in the stream meanwhile; see %s)",
			s.Addr(), filepath.Join(l.dir, "clickhouse", "log"))
		l.mu.Unlock()
		l.onAddr("")
		l.log.Error("audit: "+l.down, "service", "audit")
		for delay := time.Second; ; delay = min(2*delay, 30*time.Second) {
			next, err := startLocalServer(ctx, l.dir, s.TCPPort)
			l.mu.Lock()
			if err == nil && l.stopping {
				l.mu.Unlock()
				next.Stop()
				return
			}
			if err == nil {
				l.srv = next
				l.mu.Unlock()
				l.onAddr(localBase(next))
				l.log.Info("audit: the local ClickHouse runs again", "service", "audit", "addr", next.Addr())
				break
			}
			l.down = fmt.Sprintf("the local ClickHouse exited and could not be started again (%v); airlock retries (events wait in the stream meanwhile)", err)
			stopping := l.stopping
			l.mu.Unlock()
			if stopping {
				return
			}
			l.log.Error("audit: "+l.down, "service", "audit")
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
		}
	}
}

func portFree(p int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		return false
	}
	l.Close()
	return true
}
