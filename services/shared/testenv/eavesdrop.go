package testenv

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Eavesdropper records what every connection to a listener sends: the
// attack tests' stand-in for a process that took a port airlock talks to
// (a stale address, a port bound before the server's).
type Eavesdropper struct {
	mu       sync.Mutex
	received []byte
	conns    int
}

// Eavesdrop accepts connections on ln until it is closed, and records up
// to 4 KiB of each, read for at most readFor.
func Eavesdrop(ln net.Listener, readFor time.Duration) *Eavesdropper {
	e := &Eavesdropper{}
	e.serve(ln, readFor)
	return e
}

func (e *Eavesdropper) serve(ln net.Listener, readFor time.Duration) {
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.mu.Lock()
			e.conns++
			e.mu.Unlock()
			go func() {
				defer c.Close()
				_ = c.SetReadDeadline(time.Now().Add(readFor))
				b, _ := io.ReadAll(io.LimitReader(c, 4096))
				e.mu.Lock()
				e.received = append(e.received, b...)
				e.mu.Unlock()
			}()
		}
	}()
}

// Received is everything recorded so far.
func (e *Eavesdropper) Received() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return string(e.received)
}

// Conns is how many connections were accepted so far.
func (e *Eavesdropper) Conns() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.conns
}

// SquatOnStart plays another user of the machine who watches /proc for a
// new process whose command line holds marker and at once binds port on
// the loopback before it can, recording what connects (Eavesdrop, each
// connection read for at most readFor). bound is closed once the port is
// taken; a squatter that loses the race says so in the log and leaves
// bound open. A new process whose command line still starts with notYet
// (a child that has not exec'd yet) is looked at again. It stops when the
// test ends.
func SquatOnStart(t testing.TB, marker, notYet []byte, port int, readFor time.Duration) (bound <-chan struct{}, got *Eavesdropper) {
	t.Helper()
	took := make(chan struct{})
	got = &Eavesdropper{}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	seen := map[string]bool{}
	if entries, err := os.ReadDir("/proc"); err == nil {
		for _, e := range entries {
			seen[e.Name()] = true // what ran before
		}
	}
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			entries, _ := os.ReadDir("/proc")
			for _, e := range entries {
				if _, err := strconv.Atoi(e.Name()); err != nil || seen[e.Name()] {
					continue
				}
				cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
				seen[e.Name()] = len(cmdline) > 0 && !bytes.HasPrefix(cmdline, notYet)
				if !bytes.Contains(cmdline, marker) {
					continue
				}
				ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
				if err != nil {
					t.Logf("the squatter lost the race for port %d: %v", port, err)
					return
				}
				go func() { <-stop; ln.Close() }()
				got.serve(ln, readFor)
				close(took)
				return
			}
		}
	}()
	return took, got
}
