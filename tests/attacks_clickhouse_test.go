package tests

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// clickhouseClient runs the real clickhouse-client against the ClickHouse
// at addr (host:port) as user, and returns its output and whether it
// succeeded.
func clickhouseClient(t *testing.T, addr, user, password, query string) (string, bool) {
	t.Helper()
	bin, err := exec.LookPath("clickhouse-client")
	if err != nil {
		t.Fatal("clickhouse-client is not installed, and this test logs in with it as any local user would: apt-get install clickhouse-client")
	}
	host, port, _ := strings.Cut(addr, ":")
	args := []string{"--host", host, "--port", port, "--user", user, "--query", query}
	if password != "" {
		args = append(args, "--password", password)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err == nil
}

// Issue 22, finding 5. `airlock dev --clickhouse-local` left ClickHouse's
// "default" user without a password on loopback: any local user read every
// agent's arguments and results and ran ALTER TABLE airlock.events DELETE.
// What must hold: nobody logs in without a password; the audit commands
// read as a read-only auditor that can change nothing; the sink still
// writes and every audit command still works.
func TestTheLocalClickHouseOfDevLetsNobodyInWithoutAPassword(t *testing.T) {
	dev, bot := startDevWithLocalClickHouse(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := bot.Submit(ctx, airlock.Call{ID: "echo-1", Tool: "demo__echo", Args: map[string]any{"text": "sk_live_secret_result"}}); err != nil {
		t.Fatal(err)
	}
	if out, err := bot.Await(ctx, "echo-1"); err != nil || out.Status != airlock.StatusCompleted {
		t.Fatalf("setup: echo-1: %+v %v", out, err)
	}
	// The sink writes as the local writer: the call reaches ClickHouse, and
	// the audit CLI reads it back as the auditor.
	testenv.Eventually(t, 30*time.Second, "echo-1 in the ClickHouse audit trail", func() bool {
		r := cli(t, dev, "audit", "query", "--call", "echo-1", "--json")
		return r.Code == 0 && strings.Contains(r.Stdout, `"call_id":"echo-1"`) && !strings.Contains(r.Stderr, "events stream")
	})
	raw, err := os.ReadFile(filepath.Join(dev.DataDir, "clickhouse.dsn"))
	if err != nil {
		t.Fatalf("airlock dev --clickhouse-local wrote no clickhouse.dsn: %v", err)
	}
	u, err := url.Parse(strings.TrimSpace(string(raw)))
	if err != nil || u.User != nil {
		t.Fatalf("clickhouse.dsn is %q: want an address without credentials", raw)
	}
	addr := u.Host

	// Any local user, as "default" without a password: refused.
	for _, q := range []string{"SELECT count() FROM airlock.events", "ALTER TABLE airlock.events DELETE WHERE 1"} {
		if out, ok := clickhouseClient(t, addr, "default", "", q); ok {
			t.Errorf("the local ClickHouse ran %q for user default without a password: %s", q, out)
		}
	}
	// The passwords are files only their owner reads.
	pw := map[string]string{}
	for _, user := range []string{"airlock", "auditor"} {
		file := filepath.Join(dev.DataDir, "clickhouse", user+".password")
		st, err := os.Stat(file)
		if err != nil {
			t.Fatalf("airlock dev keeps no %s password: %v", user, err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Fatalf("%s has mode %v: want 0600", file, st.Mode().Perm())
		}
		b, _ := os.ReadFile(file)
		pw[user] = strings.TrimSpace(string(b))
	}
	// The auditor reads, and changes nothing.
	if out, ok := clickhouseClient(t, addr, "auditor", pw["auditor"], "SELECT count() FROM airlock.events"); !ok || out == "0" {
		t.Fatalf("the auditor could not read the trail: %q", out)
	}
	for _, q := range []string{
		"ALTER TABLE airlock.events DELETE WHERE 1",
		"INSERT INTO airlock.events (seq, call_id) VALUES (999999, 'forged')",
		"DROP TABLE airlock.events",
		"CREATE TABLE airlock.x (a UInt8) ENGINE = Memory",
	} {
		if out, ok := clickhouseClient(t, addr, "auditor", pw["auditor"], q); ok {
			t.Errorf("the read-only auditor ran %q: %s", q, out)
		}
	}
	if out, _ := clickhouseClient(t, addr, "auditor", pw["auditor"], "SELECT count() FROM airlock.events WHERE call_id = 'forged'"); out != "0" {
		t.Errorf("a forged row reached the trail: %q", out)
	}
	// Every audit command still works, without being told a password.
	for _, args := range [][]string{
		{"audit", "query", "--call", "echo-1"},
		{"audit", "stats", "--since", ""},
		{"audit", "export", "--format", "jsonl", "--call", "echo-1"},
		{"audit", "verify"},
		{"audit", "drop-before", "2000-01"},
	} {
		if r := cli(t, dev, args...); r.Code != 0 || strings.Contains(r.Stderr, "events stream") {
			t.Errorf("airlock %s: exit %d\n%s%s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
		}
	}
}

// Issue 22b, finding 1. When the ClickHouse of `airlock dev
// --clickhouse-local` died, the audit sink kept dialling its port and sent
// the writer's password (ClickHouse's native protocol carries it in clear
// text) to whoever bound that port next, while /healthz said ok. What must
// hold: after the server dies nothing airlock runs sends a password to its
// old port; /healthz says the audit store is down with a sentence; dev
// starts ClickHouse again on a new port with the same data, and the events
// written meanwhile reach it with the chain intact.
func TestALocalClickHouseThatDiesGetsNoPasswordSentToItsPort(t *testing.T) {
	dev, bot := startDevWithLocalClickHouse(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	echo := func(id string) {
		t.Helper()
		if _, err := bot.Submit(ctx, airlock.Call{ID: id, Tool: "demo__echo", Args: map[string]any{"text": id}}); err != nil {
			t.Fatal(err)
		}
		if out, err := bot.Await(ctx, id); err != nil || out.Status != airlock.StatusCompleted {
			t.Fatalf("%s: %+v %v", id, out, err)
		}
	}
	inClickHouse := func(id string) {
		t.Helper()
		testenv.Eventually(t, 60*time.Second, id+" in the ClickHouse audit trail", func() bool {
			r := cli(t, dev, "audit", "query", "--call", id, "--json")
			return r.Code == 0 && strings.Contains(r.Stdout, `"call_id":"`+id+`"`) && !strings.Contains(r.Stderr, "events stream")
		})
	}
	localAddr := func() string {
		raw, err := os.ReadFile(filepath.Join(dev.DataDir, "clickhouse.dsn"))
		if err != nil {
			return ""
		}
		u, err := url.Parse(strings.TrimSpace(string(raw)))
		if err != nil {
			return ""
		}
		return u.Host
	}
	echo("before-1")
	inClickHouse("before-1")
	addr := localAddr()
	// Kill the clickhouse-server dev started (the one with this data dir's
	// config), as a crash would, and take its port at once.
	pid := clickhouseServerOf(t, filepath.Join(dev.DataDir, "clickhouse", "config.xml"))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	var err error
	testenv.Eventually(t, 10*time.Second, "the dead ClickHouse's port to be free", func() bool {
		ln, err = net.Listen("tcp", addr)
		return err == nil
	})
	var mu sync.Mutex
	var received []byte
	conns := 0
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns++
			mu.Unlock()
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				for {
					_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
					n, err := c.Read(buf)
					mu.Lock()
					received = append(received, buf[:n]...)
					mu.Unlock()
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	defer ln.Close()

	leaked := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, user := range []string{"airlock", "auditor"} {
			b, _ := os.ReadFile(filepath.Join(dev.DataDir, "clickhouse", user+".password"))
			if p := strings.TrimSpace(string(b)); p != "" && strings.Contains(string(received), p) {
				t.Errorf("a process on the dead ClickHouse's port %s received the %s password (%d connections)", addr, user, conns)
				return true
			}
		}
		return false
	}

	// /healthz says the audit store is down, in a sentence.
	down := false
	for deadline := time.Now().Add(10 * time.Second); !down && time.Now().Before(deadline); {
		resp, err := http.Get(dev.HTTPURL + "/healthz")
		if err != nil {
			continue
		}
		var h struct {
			Status string            `json:"status"`
			Down   map[string]string `json:"down"`
		}
		down = json.NewDecoder(resp.Body).Decode(&h) == nil && resp.StatusCode == http.StatusServiceUnavailable &&
			h.Status == "degraded" && strings.Contains(h.Down["audit_store"], "exited")
		resp.Body.Close()
	}
	if !down {
		t.Errorf("/healthz never said the audit store is down after its ClickHouse died")
	}
	// Calls go on while it is down; their events wait in the stream, and
	// for a few seconds the port's new owner hears no password.
	echo("during-1")
	echo("during-2")
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if leaked() {
			t.FailNow()
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	// Dev restarts ClickHouse on another port; /healthz is ok again.
	testenv.Eventually(t, 60*time.Second, "ClickHouse restarted on a new port and /healthz ok", func() bool {
		a := localAddr()
		if a == "" || a == addr {
			return false
		}
		resp, err := http.Get(dev.HTTPURL + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	echo("after-1")
	for _, id := range []string{"during-1", "during-2", "after-1"} {
		inClickHouse(id)
	}
	if r := cli(t, dev, "audit", "verify"); r.Code != 0 {
		t.Errorf("airlock audit verify after the restart: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	// The listener on the old port kept recording all along.
	if leaked() {
		t.FailNow()
	}
	mu.Lock()
	t.Logf("connections to the old port after the kill: %d", conns)
	mu.Unlock()
}

// clickhouseServerOf finds the pid of the clickhouse-server running with
// config (the one a dev under test started).
func clickhouseServerOf(t *testing.T, config string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(string(cmdline), "--config-file="+config) {
			return pid
		}
	}
	t.Fatalf("no clickhouse-server runs with %s", config)
	return 0
}

// startDevWithLocalClickHouse starts `airlock dev` with clickhouse.start_local
// and the agent bot.
func startDevWithLocalClickHouse(t *testing.T) (*devProcess, *airlock.Client) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "airlock.yaml")
	writeFile(t, cfg, "clickhouse:\n  start_local: true\n")
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_CONFIG="+cfg)
	return dev, dev.Agent(t, "bot")
}
