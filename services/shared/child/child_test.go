package child

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func spec(t *testing.T, log, script string, ready func(context.Context) bool) Spec {
	t.Helper()
	return Spec{Name: "sh", Cmd: exec.Command("/bin/sh", "-c", script), LogPath: log, Header: "=== start",
		Ready: ready, Poll: 10 * time.Millisecond, Timeout: 5 * time.Second}
}

func always(context.Context) bool { return true }

// wrote is ready once the log holds word.
func wrote(log, word string) func(context.Context) bool {
	return func(context.Context) bool {
		b, _ := os.ReadFile(log)
		return strings.Contains(string(b), word)
	}
}

func TestStartStopKillAndRestartAppendToOneLog(t *testing.T) {
	log := filepath.Join(t.TempDir(), "sh.log")
	var p Process
	ctx := context.Background()
	if err := p.Start(ctx, spec(t, log, "echo first; exec sleep 60", wrote(log, "first"))); err != nil {
		t.Fatal(err)
	}
	if !p.Running() || p.Pid() == 0 {
		t.Fatal("not running after Start")
	}
	if err := p.Start(ctx, spec(t, log, "exit 3", always)); err != nil || !p.Running() {
		t.Fatalf("a second Start while running: %v", err)
	}
	if !p.Signal(syscall.SIGSTOP) {
		t.Fatal("could not pause")
	}
	p.Stop(5 * time.Second) // resumes a paused process before SIGTERM
	if p.Running() || p.Signal(syscall.SIGCONT) {
		t.Fatal("running after Stop")
	}
	if err := p.Start(ctx, spec(t, log, "echo second; exec sleep 60", wrote(log, "second"))); err != nil {
		t.Fatal(err)
	}
	p.Kill()
	if p.Running() {
		t.Fatal("running after Kill")
	}
	b, _ := os.ReadFile(log)
	if got := string(b); strings.Count(got, "=== start") != 2 || !strings.Contains(got, "first") || !strings.Contains(got, "second") {
		t.Fatalf("log:\n%s", got)
	}
}

func TestStartFailsWhenTheProcessExitsOrIsNeverReady(t *testing.T) {
	log := filepath.Join(t.TempDir(), "sh.log")
	never := func(context.Context) bool { return false }
	var p Process
	if err := p.Start(context.Background(), spec(t, log, "exit 3", never)); err == nil || !strings.Contains(err.Error(), "exited while starting") || p.Running() {
		t.Fatalf("a process that exits: %v, running %v", err, p.Running())
	}
	s := spec(t, log, "exec sleep 60", never)
	s.Timeout = 100 * time.Millisecond
	if err := p.Start(context.Background(), s); err == nil || !strings.Contains(err.Error(), "was not ready within") || !p.Running() {
		t.Fatalf("a process never ready: %v, running %v (left for the caller)", err, p.Running())
	}
	p.Stop(5 * time.Second)
}
