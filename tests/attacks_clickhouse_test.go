package tests

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	cfg := filepath.Join(t.TempDir(), "airlock.yaml")
	writeFile(t, cfg, "clickhouse:\n  start_local: true\n")
	dev := startDev(t, t.TempDir(), 0, "", "AIRLOCK_CONFIG="+cfg)
	bot := dev.Agent(t, "bot")
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
