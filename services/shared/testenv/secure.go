package testenv

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/embedded"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
	"github.com/airlock-gate/airlock/services/shared/seal"
)

// SecureNATS is an embedded server running airlock's accounts and
// permissions (package natsauth) with an nkey seed per service role and a
// credential per agent, all generated in a temp dir: the trust boundary as
// production has it.
type SecureNATS struct {
	t      testing.TB
	Server *embedded.Server
	Dir    string
	Config config.Config
	seeds  map[string]string
	creds  map[string]string
	// spec, serverTLS and conf render the server's configuration again
	// when an agent is added.
	spec      natsauth.Spec
	serverTLS string
	conf      string
}

// StartSecureNATS starts a server with a user for every service role and
// for each agent named, and provisions the streams and buckets as admin.
func StartSecureNATS(t testing.TB, agents ...string) *SecureNATS {
	t.Helper()
	return startSecureNATS(t, "", config.TLS{}, agents)
}

// StartSecureTLSNATS is StartSecureNATS serving TLS with f's server
// certificate; with verify every client must present a certificate f's CA
// signed. Config (and so ServiceConfig) verifies the server with f's CA
// and, with verify, presents f's client certificate.
func StartSecureTLSNATS(t testing.TB, f TLSFiles, verify bool, agents ...string) *SecureNATS {
	t.Helper()
	return startSecureNATS(t, f.ServerBlock(verify), f.Client(verify), agents)
}

func startSecureNATS(t testing.TB, serverTLS string, clientTLS config.TLS, agents []string) *SecureNATS {
	t.Helper()
	dir := t.TempDir()
	n := &SecureNATS{t: t, Dir: dir, seeds: map[string]string{}, creds: map[string]string{}, serverTLS: serverTLS, conf: filepath.Join(dir, "accounts.conf")}
	cfg := Config("")
	cfg.NATS.TLS = clientTLS
	n.spec = natsauth.Spec{Config: cfg}
	for _, role := range append([]string{natsauth.RoleAdmin}, natsauth.ServiceRoles...) {
		file := filepath.Join(dir, "keys", role+".nk")
		pub, err := natsauth.EnsureSeed(file)
		if err != nil {
			t.Fatal(err)
		}
		n.seeds[role] = file
		n.spec.Services = append(n.spec.Services, natsauth.User{Role: role, NKey: pub})
	}
	for _, a := range agents {
		n.newAgent(a)
	}
	n.render()
	var err error
	n.Server, err = embedded.Start(embedded.Options{Port: -1, StoreDir: filepath.Join(dir, "js"), ConfigFile: n.conf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Server.Stop)
	cfg.NATS.URL = n.Server.URL()
	n.Config = cfg
	nc, js := n.Connect(natsauth.RoleAdmin)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := bus.Provision(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	return n
}

// newAgent writes a credential for agent and adds its user to the spec.
func (n *SecureNATS) newAgent(agent string) {
	n.t.Helper()
	file := filepath.Join(n.Dir, "agents", agent+natsauth.CredentialSuffix)
	c, err := natsauth.NewCredential(file, agent, "")
	if err != nil {
		n.t.Fatal(err)
	}
	pub, _ := c.PublicKey()
	n.creds[agent] = file
	n.spec.Agents = append(n.spec.Agents, natsauth.User{Agent: agent, NKey: pub})
}

// render writes the server's configuration from the spec.
func (n *SecureNATS) render() {
	n.t.Helper()
	text, err := natsauth.Accounts(n.spec)
	if err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(n.conf, []byte(text+n.serverTLS), 0o600); err != nil {
		n.t.Fatal(err)
	}
}

// AddAgent adds an agent to the running server, as `airlock agents add`
// does to `airlock dev`'s: a new credential, the accounts rendered again,
// and the server reloaded without a restart.
func (n *SecureNATS) AddAgent(agent string) {
	n.t.Helper()
	n.newAgent(agent)
	n.render()
	if err := n.Server.Reload(); err != nil {
		n.t.Fatal(err)
	}
}

// SeedFile is the nkey seed file of a service role.
func (n *SecureNATS) SeedFile(role string) string { return n.seeds[role] }

// CredentialFile is an agent's credential file.
func (n *SecureNATS) CredentialFile(agent string) string { return n.creds[agent] }

// ServiceConfig is the configuration a service of role runs with.
func (n *SecureNATS) ServiceConfig(role string) config.Config {
	cfg := n.Config
	cfg.NATS.NkeySeedFile = n.seeds[role]
	return cfg
}

// Connect connects as a service role; the connection is closed when the test ends.
func (n *SecureNATS) Connect(role string) (*nats.Conn, jetstream.JetStream) {
	n.t.Helper()
	o, err := nats.NkeyOptionFromSeed(n.seeds[role])
	if err != nil {
		n.t.Fatal(err)
	}
	opts := []nats.Option{o, nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond)}
	if tlsOpt, err := bus.TLSOption(n.Config.NATS.TLS, "nats.tls"); err != nil {
		n.t.Fatal(err)
	} else if tlsOpt != nil {
		opts = append(opts, tlsOpt)
	}
	nc, err := nats.Connect(n.Server.URL(), opts...)
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		n.t.Fatal(err)
	}
	return nc, js
}

// DevAdmin connects to a running `airlock dev` as its operator, with the
// admin seed it generated under dataDir; closed when the test ends.
func DevAdmin(t testing.TB, dataDir, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	o, err := nats.NkeyOptionFromSeed(natsauth.Dev{DataDir: dataDir}.SeedFile(natsauth.RoleAdmin))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, o, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// DevFrontendKey is the front-end key a `airlock dev` generated under dataDir.
func DevFrontendKey(t testing.TB, dataDir string) seal.Key {
	t.Helper()
	k, err := seal.Load("front-end key", "", natsauth.Dev{DataDir: dataDir}.FrontendKeyFile())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Cluster is a 3-node (or n-node) JetStream cluster on loopback with the
// streams and buckets provisioned replicated on every node, and a client
// connection to all of it.
type Cluster struct {
	Servers []*embedded.Server
	// Config points at every node, with stream and bucket replicas = n.
	Config config.Config
	NC     *nats.Conn
	JS     jetstream.JetStream
}

// StartCluster starts an n-node cluster, provisions it (replicas = n) and
// connects; everything is stopped when the test ends.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	servers, err := embedded.StartCluster(t.TempDir(), n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range servers {
			if s.Running() {
				s.Stop()
			}
		}
	})
	var urls []string
	for _, s := range servers {
		urls = append(urls, s.URL())
	}
	cfg := Config(strings.Join(urls, ","))
	cfg.Stream.Replicas, cfg.Buckets.Replicas = n, n
	nc, js := Connect(t, cfg.NATS.URL)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := bus.Provision(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	return &Cluster{Servers: servers, Config: cfg, NC: nc, JS: js}
}
