package audit_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/audit"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestAStartSendsNoPasswordToAProcessThatBoundThePortFirst: StartLocal
// reuses the port it remembers (checked free a moment before) and from the
// moment clickhouse-server is started polls that port with a native Hello
// that carries the writer's password in clear text. Any local user may bind
// a loopback port: one who knows it (it listened there last time) and sees
// clickhouse-server start (/proc/*/cmdline is world-readable) binds it before
// the server does, and is handed the password of the user that writes,
// alters and drops the audit trail. No password may go to a port before
// airlock knows the server it started is the one listening there.
func TestAStartSendsNoPasswordToAProcessThatBoundThePortFirst(t *testing.T) {
	dir := t.TempDir()
	_, stop, err := audit.StartLocal(context.Background(), dir)
	if err != nil {
		t.Fatalf("%v (install with `go tool task test:deps`)", err)
	}
	stop()
	raw, err := os.ReadFile(filepath.Join(dir, "clickhouse", "port"))
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	config := []byte("--config-file=" + filepath.Join(dir, "clickhouse", "config.xml"))

	// The other user.
	bound, squatter := testenv.SquatOnStart(t, config, []byte(os.Args[0]), port, 3*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, stop2, err := audit.StartLocal(ctx, dir)
	if err == nil {
		stop2()
	}
	select {
	case <-bound:
	default:
		t.Fatalf("the squatter did not bind port %d before clickhouse-server (start: %v): the attack was not made", port, err)
	}
	time.Sleep(time.Second) // the last probe's connection is read to its end
	for _, user := range []string{audit.LocalWriter, audit.LocalAuditor} {
		b, _ := os.ReadFile(audit.LocalPasswordFile(dir, user))
		if pw := strings.TrimSpace(string(b)); pw != "" && strings.Contains(squatter.Received(), pw) {
			t.Errorf("the process that bound the remembered port %d before clickhouse-server received the %s password (start: %v)", port, user, err)
		}
	}
}
