package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/audit"
	"github.com/airlock-gate/airlock/services/audit/record"
	"github.com/airlock-gate/airlock/services/audit/store"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/svc"
	"github.com/airlock-gate/airlock/services/shared/testenv"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestAuditVerifyCommandNamesAPlantedRow runs `airlock audit verify` against
// a trail the sink wrote: OK, then — after someone with INSERT on ClickHouse
// adds a forged approval beyond the stream — the row is named and the
// command fails.
func TestAuditVerifyCommandNamesAPlantedRow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := startAuditSink(t)
	n, deps, dsn, keyHex := a.nats, a.deps, a.dsn, a.keyHex
	pub := deps.Publisher("test")
	for i := range 4 {
		ev := &airlockv1.Event{AgentId: "bot", CallId: "c1", Revision: 1, Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "bob"},
			Body: &airlockv1.Event_Notified{Notified: &airlockv1.Notified{Channel: "console", Kind: "announce", Ref: string(rune('a' + i))}}}
		if _, err := pub.Publish(ctx, ev, ""); err != nil {
			t.Fatal(err)
		}
	}
	st, err := store.OpenWriter(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	testenv.Eventually(t, 20*time.Second, "4 rows in ClickHouse", func() bool {
		n, err := st.Count(ctx, store.Filter{})
		return err == nil && n == 4
	})
	t.Setenv("AIRLOCK_NATS_URL", n.URL())
	t.Setenv("AIRLOCK_CLICKHOUSE_DSN", dsn)
	t.Setenv("AIRLOCK_AUDIT_KEY", keyHex)

	out, err := runCLI(ctx, t, "audit", "verify")
	if err != nil || !strings.HasPrefix(out, "OK: 4 rows verified") || !strings.Contains(out, "compared with the stream") {
		t.Fatalf("verify of an intact trail: %v\n%s", err, out)
	}

	rows, err := st.Query(ctx, store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	f := rows[3]
	f.Seq, f.Type, f.ActorID, f.Decision = 5, "approved", "alice", "approve"
	f.PrevHash = rows[3].Hash
	sum := sha256.Sum256(append([]byte(f.PrevHash), record.AppendCanonicalFields(nil, &f)...))
	f.Hash = hex.EncodeToString(sum[:])
	if err := st.Insert(ctx, []store.Row{f}); err != nil {
		t.Fatal(err)
	}
	out, err = runCLI(ctx, t, "audit", "verify")
	if err == nil || !strings.Contains(out, "future") || !strings.Contains(out, "seq 5") || !strings.Contains(out, "planted") {
		t.Fatalf("verify after a planted row: %v\n%s", err, out)
	}
	t.Run("without the key verify says where to set it", func(t *testing.T) {
		t.Setenv("AIRLOCK_AUDIT_KEY", "")
		t.Setenv("AIRLOCK_DEV_DATA_DIR", t.TempDir())
		if _, err := runCLI(ctx, t, "audit", "verify"); err == nil || !strings.Contains(err.Error(), "audit.key_file") {
			t.Fatalf("err %v", err)
		}
	})
}

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
	unlock, err := lockDataDir(natsauth.Dev{DataDir: dir}, slog.New(slog.DiscardHandler)) // a dev runs on dir
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if err := os.WriteFile(localDSNFile(dir), []byte("clickhouse://"+addr+"/airlock\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := seal.CreateSecretFile(audit.LocalPasswordFile(dir, audit.LocalAuditor), "pw\n"); err != nil {
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

// The readers of the trail log in with clickhouse.reader_dsn (a read-only
// user's) when it is set: the audit commands but drop-before, and the
// console's audit pages.
func TestTheReadersOfTheTrailUseTheReaderDSN(t *testing.T) {
	cfg := config.Default()
	cfg.ClickHouse.DSN, cfg.ClickHouse.ReaderDSN = "clickhouse://airlock:w@127.0.0.1:1/airlock", "clickhouse://auditor:r@127.0.0.1:2/airlock"
	file := filepath.Join(t.TempDir(), "airlock.yaml")
	if err := os.WriteFile(file, []byte("clickhouse:\n  dsn: "+cfg.ClickHouse.DSN+"\n  reader_dsn: "+cfg.ClickHouse.ReaderDSN+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AIRLOCK_CLICKHOUSE_DSN", cfg.ClickHouse.DSN) // as the file says, whatever the environment held
	for _, c := range []struct {
		name  string
		write bool
		want  string
	}{{"a_reading_command_reads_as_the_reader", false, cfg.ClickHouse.ReaderDSN}, {"drop_before_writes_as_the_writer", true, cfg.ClickHouse.DSN}} {
		t.Run(c.name, func(t *testing.T) {
			a := auditFlags{write: c.write}
			_, dsn, _, err := a.config(&globals{configFile: file})
			if err != nil || dsn != c.want {
				t.Fatalf("config = %q, %v; want %q", dsn, err, c.want)
			}
		})
	}
	// Nothing listens on either port: the error names the one the console tried.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := newConsoleAudit(svc.Deps{Config: cfg}).reader(ctx); err == nil || !strings.Contains(err.Error(), "auditor") || strings.Contains(err.Error(), ":1/") {
		t.Fatalf("the console's audit reader: %v, want it to have tried the reader DSN", err)
	}
}

// runCLI runs the airlock command with args and returns what it printed on stdout.
func runCLI(ctx context.Context, t *testing.T, args ...string) (string, error) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	outc := make(chan []byte)
	go func() { b, _ := io.ReadAll(r); outc <- b }()
	cmd := newRootCmd()
	cmd.SetArgs(args)
	runErr := cmd.ExecuteContext(ctx)
	os.Stdout = stdout
	w.Close()
	return string(<-outc), runErr
}

// TestAuditJSONShowsNoHiddenRunes: an agent's reason and arguments with a
// right-to-left override, an isolate and a zero-width space come out of
// `audit query --json` and `audit export --format json|jsonl` as \u
// escapes (as `approvals show --json` prints them), and the JSON still
// decodes to the text the agent wrote.
func TestAuditJSONShowsNoHiddenRunes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := testenv.StartNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	const hiddenText = "invoice\u202efdp.sh \u2066x\u2069 z\u200bw"
	ev := &airlockv1.Event{AgentId: "bot", CallId: "c1", Revision: 1, Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_AGENT, Id: "bot"},
		Body: &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Tool: "fs__read_file",
			Reason: hiddenText, Arguments: &structpb.Struct{Fields: map[string]*structpb.Value{"path": structpb.NewStringValue(hiddenText)}}}}}}
	if _, err := deps.Publisher("test").Publish(ctx, ev, ""); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AIRLOCK_NATS_URL", n.URL())
	t.Setenv("AIRLOCK_CLICKHOUSE_DSN", "")
	t.Setenv("AIRLOCK_DEV_DATA_DIR", t.TempDir())
	for _, args := range [][]string{{"audit", "query", "--json"}, {"audit", "export", "--format", "jsonl"}, {"audit", "export", "--format", "json"}} {
		t.Run(strings.Join(args[1:], "_"), func(t *testing.T) {
			out, err := runCLI(ctx, t, args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if i := strings.IndexAny(out, "\u202e\u2066\u2069\u200b"); i >= 0 {
				t.Fatalf("a hidden rune printed raw at byte %d:\n%q", i, out)
			}
			if !strings.Contains(out, `invoice\u202efdp.sh \u2066x\u2069 z\u200bw`) {
				t.Fatalf("the reason is not shown as \\u escapes:\n%s", out)
			}
			var row any
			first := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(out), "["), "]"))
			if err := json.Unmarshal([]byte(strings.SplitN(first, "\n", 2)[0]), &row); err != nil || !strings.Contains(fmt.Sprint(row), hiddenText) {
				t.Fatalf("the JSON decodes to %v (%v), want the agent's text %q in it", row, err, hiddenText)
			}
		})
	}
}
