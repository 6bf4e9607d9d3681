// Package freeport picks loopback TCP ports for servers that must be told
// their port before they start (a NATS cluster's routes, ClickHouse's
// configuration, `airlock dev --nats-port` in tests).
package freeport

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// Pick returns a loopback TCP port nobody listens on right now, chosen below
// the kernel's ephemeral port range where it can. A port from that range
// (what binding port 0 gives) may be taken by any outgoing connection
// between this check and the server's own bind: under a busy test run a
// cluster node then could not listen and "did not start within 30s". Below
// the range only another listener can take it. Two of this user's
// processes never pick the same port while both live: each port picked
// is claimed for the picking process's life (see claim), so a port
// picked and not yet bound, or left unbound while its server restarts,
// is not handed to a parallel test process.
func Pick() (int, error) {
	p, release, err := Hold()
	if err != nil {
		return 0, err
	}
	release()
	return p, nil
}

// Hold is Pick that keeps the port bound until release is called: a caller
// that needs several ports before it can start what listens on them (a
// cluster's nodes name each other's route ports) holds each until just
// before its listener starts, so no other process can pick it meanwhile.
// release may be called more than once.
func Hold() (port int, release func(), err error) {
	lo, hi := belowEphemeral()
	return holdIn(claimDir(), lo, hi)
}

// holdIn is Hold choosing among [lo, hi) (none when hi <= lo), claiming
// each port it returns in dir (see claim).
func holdIn(dir string, lo, hi int) (port int, release func(), err error) {
	if hi > lo {
		for range 64 {
			p := lo + rand.IntN(hi-lo)
			if !claim(dir, p) {
				continue // another of this user's processes picked it
			}
			if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
				return p, sync.OnceFunc(func() { _ = l.Close() }), nil
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, nil, fmt.Errorf("find a free port: %w", err)
	}
	return l.Addr().(*net.TCPAddr).Port, sync.OnceFunc(func() { _ = l.Close() }), nil
}

// claimDir is where this user's processes claim ports ("" when it cannot
// be made, or is not this user's alone: then no port is claimed and the
// probe alone decides).
func claimDir() string { return claimDirIn(os.TempDir()) }

// claimDirIn is claimDir under base. Anyone may make a directory in a
// shared base (/tmp): one another user made, or may write in, is not
// used, since its owner could hold every claim or put a link where a claim
// file is opened.
func claimDirIn(base string) string {
	dir := filepath.Join(base, fmt.Sprintf("airlock-ports-%d", os.Getuid()))
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return ""
	}
	if !ownedAlone(dir) {
		return ""
	}
	return dir
}

// lowest is the first port Pick considers: above the registered ports most
// local services listen on.
const lowest = 20000

// belowEphemeral is the range [lowest, first ephemeral port) on Linux, or
// empty where the ephemeral range cannot be read or starts too low.
func belowEphemeral() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	var first, last int
	if _, err := fmt.Sscan(string(b), &first, &last); err != nil || first < lowest+1000 {
		return 0, 0
	}
	return lowest, first
}
