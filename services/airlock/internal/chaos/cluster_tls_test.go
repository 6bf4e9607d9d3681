package chaos

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/freeport"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// routeLog keeps the errors a node logs, so a test can wait for the one a
// refused route causes.
type routeLog struct{ errs chan string }

func (l routeLog) Noticef(string, ...any) {}
func (l routeLog) Warnf(string, ...any)   {}
func (l routeLog) Debugf(string, ...any)  {}
func (l routeLog) Tracef(string, ...any)  {}
func (l routeLog) Fatalf(format string, v ...any) {
	l.Errorf(format, v...)
}
func (l routeLog) Errorf(format string, v ...any) {
	select {
	case l.errs <- fmt.Sprintf(format, v...):
	default: // nobody reads that many
	}
}

// startNode starts a node from a configuration file on loopback, with its
// route listener on clusterPort and routes to routes; JetStream and
// monitoring off (routes are what is tested).
func startNode(t *testing.T, file, name string, clusterPort int, routes []*url.URL, log server.Logger) *server.Server {
	t.Helper()
	t.Setenv("SERVER_NAME", name)
	o, err := server.ProcessConfigFile(file)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	o.Host, o.Port, o.HTTPPort, o.JetStream, o.NoSigs = "127.0.0.1", -1, 0, false, true
	o.Cluster.Host, o.Cluster.Port, o.Routes = "127.0.0.1", clusterPort, routes
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatalf("node %s: %v", name, err)
	}
	s.SetLogger(log, false, false)
	go s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatalf("node %s did not start", name)
	}
	return s
}

// remoteNames are the servers a node has routes to.
func remoteNames(t *testing.T, s *server.Server) []string {
	t.Helper()
	rz, err := s.Routez(nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rz.Routes {
		if !slices.Contains(names, r.RemoteName) {
			names = append(names, r.RemoteName)
		}
	}
	slices.Sort(names)
	return names
}

// Two nodes run deploy/nats/cluster.conf as shipped (its TLS and route
// authorisation; loopback ports and route hosts) and form their routes.
// A server that reaches the route port without TLS, or with a certificate
// the CA signed for no route host (a client's), is refused: it never
// becomes a route.
func TestShippedClusterTLSKeepsOutsiders(t *testing.T) {
	shipped, err := natsauth.ShippedFor(config.Default(), "bot")
	if err != nil {
		t.Fatal(err)
	}
	dir := shippedNATSDir(t, shipped)
	tlsDir := clusterTLSDir(t)
	file := shippedClusterConf(t, dir, tlsDir)
	var ports []int
	var routes []*url.URL
	for range 2 {
		p, err := freeport.Pick()
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, p)
		// The certificate names localhost, as the shipped one names nats-N.nats.
		routes = append(routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("localhost:%d", p)})
	}
	quiet := routeLog{errs: make(chan string, 1)}
	first := routeLog{errs: make(chan string, 100)}
	n0 := startNode(t, file, "nats-0", ports[0], routes, first)
	n1 := startNode(t, file, "nats-1", ports[1], routes, quiet)
	testenv.Eventually(t, 10*time.Second, "the two nodes routing to each other over TLS", func() bool {
		return slices.Equal(remoteNames(t, n0), []string{"nats-1"}) && slices.Equal(remoteNames(t, n1), []string{"nats-0"})
	})

	for _, tt := range []struct {
		name string
		// conf is the outsider's cluster block beyond listen and routes.
		conf string
		// logged is what the first node logs when it refuses it (lower case).
		logged string
	}{
		{"a_server_without_tls", "", "tls route handshake error"},
		{"a_certificate_the_ca_signed_for_no_route_host", fmt.Sprintf("tls {\n  cert_file: %q\n  key_file: %q\n  ca_file: %q\n}\n",
			filepath.Join(tlsDir, "client.crt"), filepath.Join(tlsDir, "client.key"), filepath.Join(tlsDir, natsauth.TLSCAFile)), "authentication error"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for len(first.errs) > 0 {
				<-first.errs
			}
			conf := filepath.Join(t.TempDir(), "outsider.conf")
			text := fmt.Sprintf("server_name: outsider\ncluster {\n  name: airlock\n%s}\n", tt.conf)
			if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			port, err := freeport.Pick()
			if err != nil {
				t.Fatal(err)
			}
			outsider := startNode(t, conf, "outsider", port, routes[:1], quiet)
			deadline := time.After(10 * time.Second)
			for refused := false; !refused; {
				select {
				case line := <-first.errs:
					refused = strings.Contains(strings.ToLower(line), tt.logged)
				case <-deadline:
					t.Fatalf("nats-0 did not refuse the outsider's route within 10s (routes %v)", remoteNames(t, n0))
				}
			}
			if got := remoteNames(t, n0); !slices.Equal(got, []string{"nats-1"}) {
				t.Fatalf("nats-0 routes to %v; the outsider must not be among them", got)
			}
			// The outsider's side of the route nats-0 refused lives until it
			// reads the close (and again for a moment on each retry of the
			// route): it must hold no route once that settles.
			testenv.Eventually(t, 10*time.Second, "the outsider to hold no route", func() bool { return len(remoteNames(t, outsider)) == 0 })
			outsider.Shutdown()
		})
	}
}
