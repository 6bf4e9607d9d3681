package local

import (
	"net"
	"os"
	"os/exec"
	"testing"
)

// TestListensOnTellsTheServersListenerFromAnothers: the listener of the
// process asked about is recognised; the same listener is not taken for
// another process's (here a child that holds no socket).
func TestListensOnTellsTheServersListenerFromAnothers(t *testing.T) {
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Skip("no /proc/net/tcp")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	if !listensOn(os.Getpid(), port) {
		t.Errorf("listensOn(this process, %d) = false, want true", port)
	}
	other := exec.Command("sleep", "30")
	if err := other.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { _ = other.Process.Kill(); _ = other.Wait() }()
	if listensOn(other.Process.Pid, port) {
		t.Errorf("listensOn(another process, %d) = true, want false", port)
	}
}
