package embedded

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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

// TestRestartWaitsForItsPortAndKeepsItsData: a server restarted with the
// options of one that stopped listens on the same port with the same
// store (a message stored before is there), once whatever held its port
// lets go of it; a port held for good is the error Start gives.
func TestRestartWaitsForItsPortAndKeepsItsData(t *testing.T) {
	s, err := Start(Options{Port: -1, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := nats.Connect(s.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "KEPT", Subjects: []string{"kept"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "kept", []byte("x")); err != nil {
		t.Fatal(err)
	}
	o := s.Options()
	s.Stop()
	// Something takes the port for a moment, as a stopped server's
	// listener can still hold it.
	l, err := net.Listen("tcp", net.JoinHostPort(o.Host, strconv.Itoa(o.Port)))
	if err != nil {
		t.Fatal(err)
	}
	released := time.AfterFunc(500*time.Millisecond, func() { l.Close() })
	defer released.Stop()
	again, err := Restart(o)
	if err != nil {
		t.Fatalf("restart once the port is free: %v", err)
	}
	defer again.Stop()
	if again.URL() != s.URL() {
		t.Fatalf("restarted at %s, was %s", again.URL(), s.URL())
	}
	for nc.Status() != nats.CONNECTED {
		if ctx.Err() != nil {
			t.Fatal("the client did not reconnect to the restarted server")
		}
		time.Sleep(20 * time.Millisecond)
	}
	st, err := js.Stream(ctx, "KEPT")
	if err != nil || st.CachedInfo().State.Msgs != 1 {
		t.Fatalf("the stream stored before the restart: %v, %+v", err, st)
	}
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	o.Port = held.Addr().(*net.TCPAddr).Port
	if s, err := Restart(o); err == nil || !strings.Contains(err.Error(), "something already listens there") {
		if s != nil {
			s.Stop()
		}
		t.Fatalf("restart on a port held for good: %v, want Start's error", err)
	}
}
