package tests

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/embedded"
)

// serveProcess is a running `airlock serve SERVICE...`.
type serveProcess struct {
	t      *testing.T
	cmd    *exec.Cmd
	HTTP   string
	mu     sync.Mutex
	out    strings.Builder
	exited chan error
}

// startServe runs `airlock serve` with args (services and flags) against
// natsURL, on a free HTTP port, and waits until /healthz answers 200.
func startServe(t *testing.T, natsURL string, env []string, args ...string) *serveProcess {
	t.Helper()
	port, err := embedded.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	full := append([]string{"serve"}, args...)
	full = append(full, "--nats", natsURL, "--http", addr)
	cmd := exec.Command(airlockBinary(t), full...)
	cmd.Env = append(os.Environ(), env...)
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = cmd.Stdout
	p := &serveProcess{t: t, cmd: cmd, HTTP: "http://" + addr, exited: make(chan error, 1)}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		p.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("airlock serve %s output:\n%s", strings.Join(args, " "), p.Output())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(p.HTTP + "/healthz"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case err := <-p.exited:
			t.Fatalf("airlock serve exited early (%v):\n%s", err, p.Output())
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatalf("airlock serve did not answer /healthz within 60s:\n%s", p.Output())
	return nil
}

// Output is everything the process printed so far.
func (p *serveProcess) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// Kill sends SIGKILL, as a crash would, and waits for the process to be gone.
func (p *serveProcess) Kill() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		p.t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		p.t.Fatal("the process did not die within 10s of SIGKILL")
	}
}
