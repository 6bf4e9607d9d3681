package audit_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/audit"
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

	var mu sync.Mutex
	var received []byte
	bound := make(chan struct{})
	done := make(chan struct{})
	defer close(done)
	go func() { // the other user
		seen := map[string]bool{}
		for {
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
			entries, _ := os.ReadDir("/proc")
			for _, e := range entries {
				if _, err := strconv.Atoi(e.Name()); err != nil || seen[e.Name()] {
					continue
				}
				cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
				// A child not yet exec'd still shows this program's command line.
				seen[e.Name()] = len(cmdline) > 0 && !bytes.HasPrefix(cmdline, []byte(os.Args[0]))
				if !bytes.Contains(cmdline, config) {
					continue
				}
				ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
				if err != nil {
					return // clickhouse-server was first: the race is lost
				}
				close(bound)
				go func() { <-done; ln.Close() }()
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					go func() {
						defer c.Close()
						_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
						b, _ := io.ReadAll(io.LimitReader(c, 4096))
						mu.Lock()
						received = append(received, b...)
						mu.Unlock()
					}()
				}
			}
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, stop2, err := audit.StartLocal(ctx, dir)
	if err == nil {
		stop2()
	}
	select {
	case <-bound:
	default:
		t.Skipf("the squatter did not bind port %d before clickhouse-server (start: %v)", port, err)
	}
	time.Sleep(time.Second) // the last probe's connection is read to its end
	mu.Lock()
	defer mu.Unlock()
	for _, user := range []string{audit.LocalWriter, audit.LocalAuditor} {
		b, _ := os.ReadFile(audit.LocalPasswordFile(dir, user))
		if pw := strings.TrimSpace(string(b)); pw != "" && bytes.Contains(received, []byte(pw)) {
			t.Errorf("the process that bound the remembered port %d before clickhouse-server received the %s password (start: %v)", port, user, err)
		}
	}
}
