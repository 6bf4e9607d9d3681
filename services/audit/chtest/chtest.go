// Package chtest starts private clickhouse-server processes for tests: free
// loopback ports, a temp data dir, a generated config. A test that needs
// ClickHouse fails (never skips) when clickhouse-server is not installed.
//
// Use Shared for tests that only need a database (each gets its own), and
// Start for tests that stop and restart the server.
package chtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/audit/local"
)

// Server is a clickhouse-server owned by a test (or a test package).
type Server struct {
	*local.Server
	t testing.TB
}

// Start starts a private clickhouse-server for t, stopped when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	dir, err := os.MkdirTemp("", "airlock-ch-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	s := start(t, dir)
	t.Cleanup(s.Server.Stop)
	return s
}

func start(t testing.TB, dir string) *Server {
	t.Helper()
	ls, err := local.New(dir, 0)
	if errors.Is(err, local.ErrNotInstalled) {
		t.Fatalf("clickhouse-server not found: run `go tool task test:deps`")
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Start(context.Background(), 60*time.Second); err != nil {
		t.Fatalf("start clickhouse-server: %v", err)
	}
	return &Server{Server: ls, t: t}
}

// Cluster is a replicated ClickHouse owned by a test: a private ZooKeeper
// and replicas of one shard (local.NewCluster), all stopped when t ends.
type Cluster struct {
	ZooKeeper *local.ZooKeeper
	Replicas  []*local.Server
	Name      string // the cluster's remote_servers name
}

// StartCluster starts ZooKeeper and n ClickHouse replicas for t. A test
// that needs them fails (never skips) when either is not installed.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "airlock-chc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	zk, err := local.NewZooKeeper(dir + "/zookeeper")
	if errors.Is(err, local.ErrZooKeeperNotInstalled) {
		t.Fatalf("%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := zk.Start(context.Background(), 60*time.Second); err != nil {
		t.Fatalf("start zookeeper: %v", err)
	}
	t.Cleanup(zk.Stop)
	c := &Cluster{ZooKeeper: zk, Name: "airlock"}
	if c.Replicas, err = local.NewCluster(dir, n, zk.Addr(), c.Name); errors.Is(err, local.ErrNotInstalled) {
		t.Fatalf("clickhouse-server not found: run `go tool task test:deps`")
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range c.Replicas {
		if err := r.Start(context.Background(), 60*time.Second); err != nil {
			t.Fatalf("start clickhouse-server replica: %v", err)
		}
		t.Cleanup(r.Stop)
	}
	return c
}

// DSN is the cluster's DSN for database db (DBName gives one per test).
func (c *Cluster) DSN(db string) string {
	return local.ClusterDSN(c.Replicas, db, c.Name)
}

// ReplicaDSN is the DSN of db on replica i alone (to read what it holds).
func (c *Cluster) ReplicaDSN(i int, db string) string {
	return c.Replicas[i].DSN(db)
}

// Restart starts the server again on the same port and data after Stop or Kill.
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.Server.Start(context.Background(), 60*time.Second); err != nil {
		s.t.Fatalf("restart clickhouse-server: %v", err)
	}
}

// DSN returns a DSN for a database named after the test (created by the
// sink's migrations), so tests sharing a server do not see each other's rows.
func (s *Server) DSN(t testing.TB) string {
	return s.Server.DSN(DBName(t))
}

var nonIdent = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// DBName is a database name unique to the test.
func DBName(t testing.TB) string {
	n := strings.ToLower(nonIdent.ReplaceAllString(t.Name(), "_"))
	if len(n) > 40 {
		n = n[:40]
	}
	return fmt.Sprintf("t_%s_%d", n, time.Now().UnixNano()%1_000_000)
}

var shared struct {
	once sync.Once
	srv  *local.Server
	dir  string
	err  error
}

// Shared returns one clickhouse-server for the whole test binary, started
// on first use; call it with Main in TestMain so it is stopped at the end.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.once.Do(func() {
		dir, err := os.MkdirTemp("", "airlock-ch-shared-")
		if err != nil {
			shared.err = err
			return
		}
		shared.dir = dir
		ls, err := local.New(dir, 0)
		if err != nil {
			shared.err = err
			return
		}
		if err := ls.Start(context.Background(), 60*time.Second); err != nil {
			shared.err = err
			return
		}
		shared.srv = ls
	})
	if errors.Is(shared.err, local.ErrNotInstalled) {
		t.Fatalf("clickhouse-server not found: run `go tool task test:deps`")
	}
	if shared.err != nil {
		t.Fatalf("start clickhouse-server: %v", shared.err)
	}
	return &Server{Server: shared.srv, t: t}
}

// Main runs the tests and then stops the shared server: func TestMain(m *testing.M) { chtest.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	if shared.srv != nil {
		shared.srv.Stop()
	}
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}
