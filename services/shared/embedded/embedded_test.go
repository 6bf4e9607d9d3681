package embedded

import (
	"net"
	"strings"
	"testing"
)

// TestStartSaysAtOnceThatThePortIsTaken: a port something else listens on
// (a second `airlock dev`) is an error naming the address and what to do,
// not a server that fails to become ready after 30 seconds.
func TestStartSaysAtOnceThatThePortIsTaken(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	s, err := Start(Options{Port: port, StoreDir: t.TempDir()})
	if err == nil {
		s.Shutdown()
		t.Fatal("started on a port something else listens on")
	}
	for _, want := range []string{"cannot listen on " + l.Addr().String(), "something already listens there", "--nats-port"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
}

// A route port something else listens on is said at once too (a cluster
// node that could never become ready waited 30 s in CI), and a cluster's
// ports are held until each node starts, so its nodes start.
func TestAClustersPortsAreItsOwn(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	s, err := Start(Options{Port: -1, StoreDir: t.TempDir(), ClusterName: "c", ClusterPort: taken})
	if err == nil {
		s.Shutdown()
		t.Fatal("started with a route port something else listens on")
	}
	if !strings.Contains(err.Error(), "cluster port") || !strings.Contains(err.Error(), "something already listens there") {
		t.Errorf("the error does not say the route port is taken: %v", err)
	}
	servers, err := StartClusterNodes(t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		s.Shutdown()
	}
}

// The server's connections always leave the process fdReserve of its open
// file limit, whatever limits.bus_connections says.
func TestConnectionsFitTheOpenFileLimit(t *testing.T) {
	for _, c := range []struct {
		name    string
		maxConn int
		fdLimit uint64
		want    int
	}{
		{"fits", 4096, 20000, 4096},
		{"lowered to the limit less the reserve", 4096, 4096, 4096 - fdReserve},
		{"nats-server's default lowered", 0, 20000, 20000 - fdReserve},
		{"a limit under the reserve leaves one", 4096, 512, 1},
		{"unknown limit kept", 4096, 0, 4096},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := fitConnections(c.maxConn, c.fdLimit); got != c.want {
				t.Fatalf("fitConnections(%d, %d) = %d, want %d", c.maxConn, c.fdLimit, got, c.want)
			}
		})
	}
}
