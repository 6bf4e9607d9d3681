// Package embedded runs a NATS server with JetStream inside the process, for
// `airlock dev` and for tests (single servers and 3-node clusters).
package embedded

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/airlock-gate/airlock/services/shared/freeport"
	"github.com/nats-io/nats-server/v2/server"
)

// Options configure an embedded server.
type Options struct {
	// Name of the server (unique within a cluster).
	Name string
	Host string
	// Port; -1 picks a free one.
	Port int
	// StoreDir holds JetStream's file store; reusing it keeps all data.
	StoreDir string
	// SyncAlways fsyncs every write before acknowledging it; otherwise
	// SyncInterval (0 = the server's default of 2 min) applies.
	SyncAlways   bool
	SyncInterval time.Duration
	// ClusterName, ClusterPort and Routes make it one node of a cluster.
	ClusterName string
	ClusterPort int
	Routes      []string
	// Log enables the server's own logging to stderr.
	Log bool
	// Logger, when set, receives the server's log instead (Log is then
	// ignored): `airlock dev` records permission violations through it
	// (package violation). It must not block.
	Logger server.Logger
	// MaxPayload is the largest message the server accepts (0: 8 MiB).
	// Production servers keep NATS's default of 1 MiB.
	MaxPayload int32
	// ConfigFile, when set, is a nats-server configuration (accounts, users,
	// permissions, ...) read first; the fields above override its listen and
	// store settings.
	ConfigFile string
}

// Server is a running embedded NATS server.
type Server struct {
	*server.Server
	opts Options
}

// Start starts a server and waits until it accepts connections.
func Start(o Options) (*Server, error) {
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.Name == "" {
		o.Name = "airlock-dev"
	}
	so, err := o.serverOptions()
	if err != nil {
		return nil, err
	}
	if err := portFree(o.Host, o.Port); err != nil {
		return nil, err
	}
	// A route port in use would leave the server never ready: say so now.
	if o.ClusterPort > 0 {
		if err := portFree(o.Host, o.ClusterPort); err != nil {
			return nil, fmt.Errorf("cluster port: %w", err)
		}
	}
	s, err := server.NewServer(so)
	if err != nil {
		return nil, fmt.Errorf("configure embedded NATS: %w", err)
	}
	switch {
	case o.Logger != nil:
		s.SetLoggerV2(o.Logger, false, false, false)
	case o.Log:
		s.ConfigureLogger()
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("embedded NATS on %s:%d did not start within 30s (is the port in use? pick another with --nats-port)", o.Host, o.Port)
	}
	return &Server{Server: s, opts: o}, nil
}

// restartWait is how long Restart tries: a stopped server's listeners can
// take a moment to close.
const restartWait = 5 * time.Second

// Restart starts again a server that was stopped, with its options (o is
// its Options()): the same ports and store, so its clients reconnect to it
// and it keeps its data. It tries for up to 5 s while its ports are not
// free yet.
func Restart(o Options) (*Server, error) {
	deadline := time.Now().Add(restartWait)
	for {
		s, err := Start(o)
		if err == nil || time.Now().After(deadline) {
			return s, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// portFree says at once, in a sentence, that the port is taken: the server
// itself would only fail to become ready, 30 seconds later, its reason
// unlogged.
func portFree(host string, port int) error {
	if port <= 0 {
		return nil // the server picks a free one
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err == nil {
		return l.Close()
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("embedded NATS cannot listen on %s: something already listens there (another airlock dev?): stop it, or pick another port with --nats-port", addr)
	}
	return fmt.Errorf("embedded NATS cannot listen on %s: %w (pick another address or port with --nats-port)", addr, err)
}

// StartConfigFile starts a server configured entirely by a nats-server
// configuration file — listen address, JetStream store, cluster routes,
// accounts — as a production node is (`airlock chaos` runs its cluster
// nodes this way), and waits until it accepts connections. With log the
// server logs to stderr.
func StartConfigFile(file string, log bool) (*Server, error) {
	so, err := server.ProcessConfigFile(file)
	if err != nil {
		return nil, fmt.Errorf("read NATS config %s: %w", file, err)
	}
	so.NoSigs, so.NoLog = true, !log
	so.MaxConn = fitConnections(so.MaxConn, openFileLimit())
	s, err := server.NewServer(so)
	if err != nil {
		return nil, fmt.Errorf("configure NATS from %s: %w", file, err)
	}
	if log {
		s.ConfigureLogger()
	}
	go s.Start()
	if !s.ReadyForConnections(60 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("NATS from %s did not accept connections within 60s (is its port in use?)", file)
	}
	return &Server{Server: s, opts: Options{Name: so.ServerName, Host: so.Host, Port: so.Port, StoreDir: so.StoreDir}}, nil
}

// serverOptions reads ConfigFile (if any) and applies the fields of o over it.
func (o Options) serverOptions() (*server.Options, error) {
	so := &server.Options{}
	if o.ConfigFile != "" {
		var err error
		if so, err = server.ProcessConfigFile(o.ConfigFile); err != nil {
			return nil, fmt.Errorf("read NATS config %s: %w", o.ConfigFile, err)
		}
	}
	so.ServerName, so.Host, so.Port = o.Name, o.Host, o.Port
	so.JetStream, so.StoreDir = true, o.StoreDir
	so.SyncAlways, so.SyncInterval = o.SyncAlways, o.SyncInterval
	if so.JetStreamMaxStore <= 0 {
		// Left to NATS, the limit is 75% of the disk free at boot: on a nearly
		// full disk that is less than the streams reserve
		// (stream.max_bytes, 16 GiB, and intake.max_bytes, 1 GiB), and `airlock dev` or a test
		// would not start at all. Each stream bounds itself, and a disk that
		// really fills makes writes fail, which every writer reports. NATS's
		// own default for a disk it cannot measure is this 1 TiB.
		so.JetStreamMaxStore = server.JetStreamMaxStoreDefault
	}
	so.NoSigs, so.NoLog, so.MaxPayload = true, !o.Log, 8<<20
	so.MaxConn = fitConnections(so.MaxConn, openFileLimit())
	if o.MaxPayload > 0 {
		so.MaxPayload = o.MaxPayload
	}
	if o.ClusterName != "" {
		so.Cluster = server.ClusterOpts{Name: o.ClusterName, Host: o.Host, Port: o.ClusterPort}
		so.Routes = server.RoutesFromStr(joinRoutes(o.Routes))
	}
	return so, nil
}

// Reload re-reads ConfigFile and applies what changed in it (users,
// permissions, accounts) without a restart; listen and store settings stay.
//
// nats-server (2.15) gives an account a reload creates its service imports
// but not the subscriptions that carry them, until the next reload: a new
// agent's account would publish its requests to no one. So when accounts
// were added, Reload reloads once more, which wires them as it rewires
// every existing account's.
func (s *Server) Reload() error {
	o := s.Options()
	before, err := s.accountNames()
	if err != nil {
		return err
	}
	for range 2 {
		so, err := o.serverOptions()
		if err != nil {
			return err
		}
		if err := s.ReloadOptions(so); err != nil {
			return fmt.Errorf("reload NATS config %s: %w", o.ConfigFile, err)
		}
		after, err := s.accountNames()
		if err != nil {
			return err
		}
		if !addsTo(before, after) {
			return nil
		}
		before = after
	}
	return nil
}

// accountNames are the accounts the server has now.
func (s *Server) accountNames() (map[string]bool, error) {
	az, err := s.Accountz(&server.AccountzOptions{})
	if err != nil {
		return nil, fmt.Errorf("list the embedded NATS server's accounts: %w", err)
	}
	names := make(map[string]bool, len(az.Accounts))
	for _, a := range az.Accounts {
		names[a] = true
	}
	return names, nil
}

// addsTo: after has an account before did not.
func addsTo(before, after map[string]bool) bool {
	for a := range after {
		if !before[a] {
			return true
		}
	}
	return false
}

// Who says which account and user (the public nkey of an nkey user) the
// server authenticated client connection cid as, while the server still
// knows the connection (open, or among the recently closed it keeps).
func (s *Server) Who(cid uint64) (account, user string, ok bool) {
	// Open connections first: asking for closed ones copies the server's
	// whole list of them.
	for _, state := range []server.ConnState{server.ConnOpen, server.ConnClosed} {
		cz, err := s.Connz(&server.ConnzOptions{CID: cid, State: state, Username: true})
		if err == nil && cz != nil && len(cz.Conns) == 1 && cz.Conns[0].Cid == cid {
			c := cz.Conns[0]
			return c.Account, c.AuthorizedUser, c.AuthorizedUser != ""
		}
	}
	return "", "", false
}

// URL is the client URL of the running server.
func (s *Server) URL() string { return s.ClientURL() }

// Options returns what the server was started with, with the chosen port.
func (s *Server) Options() Options {
	o := s.opts
	if addr, ok := s.Addr().(*net.TCPAddr); ok {
		o.Port = addr.Port
	}
	return o
}

// Stop shuts the server down and waits for it to finish.
func (s *Server) Stop() {
	s.Shutdown()
	s.WaitForShutdown()
}

// FreePort returns a loopback TCP port nobody listens on right now
// (freeport.Pick).
func FreePort() (int, error) { return freeport.Pick() }

// StartCluster starts n JetStream nodes on loopback that route to each
// other, with stores under dir/<name>, and waits until JetStream is ready.
func StartCluster(dir string, n int) ([]*Server, error) {
	servers, err := StartClusterNodes(dir, n)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if clusterReady(servers) {
			return servers, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return servers, fmt.Errorf("cluster of %d did not elect a JetStream meta leader that knows every peer within 30s", n)
}

// StartClusterNodes starts n JetStream nodes on loopback that route to each
// other, with stores under dir/<name>, and returns as soon as each accepts
// clients: before the cluster has a JetStream meta leader, as a cluster
// that has just been deployed is.
func StartClusterNodes(dir string, n int) ([]*Server, error) {
	// Ports picked up front could be taken by another process before the
	// node that listens on them starts (a route port the third node binds
	// only after the first two have started: a test's cluster that did not
	// start within 30 s). Each is held until just before its node starts,
	// and a start that fails anyway is tried once more on fresh ports.
	var err error
	for range 2 {
		var servers []*Server
		if servers, err = startClusterNodes(dir, n); err == nil {
			return servers, nil
		}
	}
	return nil, err
}

func startClusterNodes(dir string, n int) ([]*Server, error) {
	clientPorts, clusterPorts := make([]int, n), make([]int, n)
	var releases []func()
	defer func() {
		for _, release := range releases {
			release()
		}
	}()
	hold := func(p *int) error {
		port, release, err := freeport.Hold()
		if err != nil {
			return err
		}
		*p, releases = port, append(releases, release)
		return nil
	}
	for i := range n {
		if err := hold(&clientPorts[i]); err != nil {
			return nil, err
		}
		if err := hold(&clusterPorts[i]); err != nil {
			return nil, err
		}
	}
	var routes []string
	for _, p := range clusterPorts {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	servers := make([]*Server, 0, n)
	for i := range n {
		releases[2*i]()
		releases[2*i+1]()
		name := fmt.Sprintf("n%d", i+1)
		s, err := Start(Options{
			Name: name, Port: clientPorts[i], StoreDir: filepath.Join(dir, name),
			ClusterName: "airlock", ClusterPort: clusterPorts[i], Routes: routes,
		})
		if err != nil {
			for _, started := range servers {
				started.Stop()
			}
			return nil, err
		}
		servers = append(servers, s)
	}
	return servers, nil
}

// clusterReady: a meta leader exists, it knows every peer, and every node is current.
func clusterReady(servers []*Server) bool {
	leader := false
	for _, s := range servers {
		if !s.JetStreamIsCurrent() {
			return false
		}
		if s.JetStreamIsLeader() {
			leader = len(s.JetStreamClusterPeers()) == len(servers)
		}
	}
	return leader
}

func joinRoutes(r []string) string {
	out := ""
	for i, s := range r {
		if i > 0 {
			out += ","
		}
		out += s
	}
	return out
}
