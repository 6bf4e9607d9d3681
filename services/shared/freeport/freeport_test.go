package freeport

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// A picked port can be listened on, and lies below the ephemeral range
// where this machine has one to stay below (outgoing connections take
// ports from that range).
func TestAPickedPortIsFreeAndOutsideTheEphemeralRange(t *testing.T) {
	lo, hi := belowEphemeral()
	for range 20 {
		p, err := Pick()
		if err != nil {
			t.Fatal(err)
		}
		if hi > lo && (p < lo || p >= hi) {
			t.Fatalf("picked %d, want a port in [%d, %d), below the ephemeral range", p, lo, hi)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("picked %d, which cannot be listened on: %v", p, err)
		}
		l.Close()
	}
}

// claimRangeEnv makes the test binary a process that claims every port of
// a small range it can and holds them: "dir lo hi".
const claimRangeEnv = "AIRLOCK_FREEPORT_CLAIM_RANGE"

// The other process of the test below: it picks (holdIn, then releases the
// listener as Pick does) every port of the range it can, prints them, and
// lives until its input closes, as a test process lives while its servers
// run.
func TestMain(m *testing.M) {
	if spec := os.Getenv(claimRangeEnv); spec != "" {
		var dir string
		var lo, hi int
		if _, err := fmt.Sscan(spec, &dir, &lo, &hi); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		got := map[int]bool{}
		for range 50 * (hi - lo) {
			if p, release, err := holdIn(dir, lo, hi); err == nil {
				release()
				if p >= lo && p < hi {
					got[p] = true
				}
			}
		}
		for p := range got {
			fmt.Println(p)
		}
		fmt.Println("held")
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A port one process picked is not picked by another while the first
// lives, even while nothing listens on it: the first may not have started
// its server yet, or may be restarting it. Without the claims the second
// process picks one of them (nothing is bound there).
func TestAPortAnotherProcessPickedIsNotPicked(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil { // claims are made only in a directory this user owns alone
		t.Fatal(err)
	}
	base, release, err := Hold() // a free stretch somewhere: the range starts at a port free just now
	if err != nil {
		t.Fatal(err)
	}
	release()
	lo, hi := base, base+6
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %d", claimRangeEnv, dir, lo, hi))
	in, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); _ = child.Wait() }()
	held := map[int]bool{}
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "held" {
		p, err := strconv.Atoi(sc.Text())
		if err != nil {
			t.Fatalf("the other process said %q", sc.Text())
		}
		held[p] = true
	}
	if len(held) == 0 {
		t.Fatalf("the other process could pick no port of [%d, %d): nothing to test", lo, hi)
	}
	for range 20 {
		p, release, err := holdIn(dir, lo, hi)
		if err != nil {
			t.Fatal(err)
		}
		release()
		if held[p] {
			t.Fatalf("picked port %d, which the other process (still running) picked before; it held %v", p, held)
		}
	}
}
