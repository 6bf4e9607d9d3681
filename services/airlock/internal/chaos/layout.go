package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/policies"
	"github.com/airlock-gate/airlock/services/audit/local"
	"github.com/airlock-gate/airlock/services/console"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/embedded"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/slack/slackfake"
)

// node is one NATS cluster node, its own process (`airlock chaos node`).
type node struct {
	*proc
	Name      string
	ClientURL string
}

// layout is the production layout running on loopback.
type layout struct {
	dir, bin, logDir, keysDir string
	cfg                       config.Config
	urls                      string // the cluster's client URLs, comma-separated
	nodes                     []*node
	replicas                  map[string][]*proc // service → replicas
	ports                     map[string][]int   // service → HTTP port of each replica
	consoles                  []string           // base URL of each console replica
	ch                        *local.Server      // the ClickHouse the fault kills: the only one, or the first replica
	dsn                       string
	// chReplicas > 1 runs ClickHouse as that many replicas of one shard
	// coordinated by zk; chs are all of them (ch is chs[0], the replica
	// the sink writes to while it is up).
	chReplicas  int
	chs         []*local.Server
	zk          *local.ZooKeeper
	tools       *toolServer
	slack       *slackfake.Server
	slackSecret string
	slackURL    string            // the Slack fake's Web API base
	mcpToken    string            // the bearer token of the gateway's endpoint
	agents      map[string]string // agent → credential file
	passwords   map[string]string // reviewer → console password
	admin       *nats.Conn
	js          jetstream.JetStream
}

// Principals of the run: reviewers decide in the console (REST, personal
// tokens) and in Slack (mapped by slack.users).
var (
	reviewers  = []string{"alice", "bob", "carol"}
	slackUsers = []slackfake.User{{ID: "U_ALICE", Name: "alice"}, {ID: "U_BOB", Name: "bob"}}
)

const (
	groupReviewers = "reviewers"
	slackChannel   = "#ops"
	toolSecretEnv  = "CHAOS_HOOK_SECRET"
)

// setUp prepares the run directory, starts every piece and waits until the
// layout serves. On error what was started is left for tearDown.
func setUp(ctx context.Context, l *layout, p profile, agents []string, seed int64, progress func(string, ...any)) error {
	for _, d := range []string{l.logDir, l.keysDir, filepath.Join(l.dir, "agents"), filepath.Join(l.dir, "policy"), filepath.Join(l.dir, "sandbox")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	env := childEnv()
	// The operator's steps, with the operator's commands.
	if _, err := runOnce(ctx, l.bin, env, l.logDir, "nats", "keys", l.keysDir); err != nil {
		return err
	}
	for _, f := range []string{DecisionKeyFile, FrontendKeyFile} {
		if _, err := runOnce(ctx, l.bin, env, l.logDir, "keys", "generate", filepath.Join(l.keysDir, f)); err != nil {
			return err
		}
	}
	if _, err := runOnce(ctx, l.bin, env, l.logDir, "audit", "keygen", "--out", filepath.Join(l.keysDir, AuditKeyFile)); err != nil {
		return err
	}
	// The nodes' certificate names the route host (localhost: a route is
	// accepted only for a name it lists) and the clients' address.
	if _, err := runOnce(ctx, l.bin, env, l.logDir, "nats", "certs", l.tlsDir(), "--host", "localhost", "--host", "127.0.0.1"); err != nil {
		return err
	}
	nodeEnv, err := readEnvFile(filepath.Join(l.keysDir, natsauth.PublicKeysFile))
	if err != nil {
		return err
	}
	l.agents = map[string]string{}
	for _, a := range agents {
		file := filepath.Join(l.dir, "agents", a+natsauth.CredentialSuffix)
		c, err := natsauth.NewCredential(file, a, "")
		if err != nil {
			return err
		}
		pub, err := c.PublicKey()
		if err != nil {
			return err
		}
		l.agents[a] = file
		nodeEnv = append(nodeEnv, strings.TrimPrefix(natsauth.AgentEnvVar(a), "$")+"="+pub)
	}

	progress("starting a %d-node NATS cluster and %s", NATSNodes, l.clickHouseName())
	if err := l.startNATS(ctx, agents, nodeEnv); err != nil {
		return err
	}
	chErr := make(chan error, 1)
	go func() { chErr <- l.startClickHouse(ctx) }()

	toolSecret := seal.NewKey().Hex()
	if l.tools, err = startToolServer([]byte(toolSecret), seed); err != nil {
		return err
	}
	l.slack = slackfake.Start()
	l.slackURL = l.slack.GetAPIURL()
	l.slackSecret = seal.NewKey().Hex()
	if err := l.writeConfig(p); err != nil {
		return err
	}
	if _, err := runOnce(ctx, l.bin, childEnv("AIRLOCK_CONFIG="+l.configFile(), "AIRLOCK_NATS_URL="+l.urls,
		"AIRLOCK_NATS_NKEY_SEED_FILE="+filepath.Join(l.keysDir, SeedFile(natsauth.RoleAdmin))), l.logDir, "provision"); err != nil {
		return err
	}
	if err := <-chErr; err != nil {
		return err
	}
	if err := l.connectAdmin(ctx); err != nil {
		return err
	}
	progress("starting 2 replicas of %s", strings.Join(serviceNames(), ", "))
	return l.startServices(ctx, toolSecret)
}

func serviceNames() []string {
	var out []string
	for _, s := range Topology() {
		out = append(out, s.Name)
	}
	return out
}

func (l *layout) configFile() string { return filepath.Join(l.dir, "airlock.yaml") }

// tlsDir holds the run's NATS CA and the nodes' certificate (the nats-tls
// Secret of deploy/k8s).
func (l *layout) tlsDir() string { return filepath.Join(l.keysDir, "nats-tls") }

// natsTLS is how every client of the run verifies the nodes.
func (l *layout) natsTLS() config.TLS {
	return config.TLS{CAFile: filepath.Join(l.tlsDir(), natsauth.TLSCAFile)}
}

// startNATS renders the shipped accounts (natsauth.ShippedFor, as
// deploy/nats/airlock.conf with this run's agents) and one node file per
// node that includes it and adds the node's listen, JetStream and cluster
// settings (as deploy/nats/cluster.conf), then starts the nodes.
func (l *layout) startNATS(ctx context.Context, agents []string, nodeEnv []string) error {
	shipped, err := natsauth.ShippedFor(config.Default(), agents...)
	if err != nil {
		return err
	}
	natsDir := filepath.Join(l.dir, "nats")
	if err := os.MkdirAll(natsDir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", natsDir, err)
	}
	if err := os.WriteFile(filepath.Join(natsDir, "airlock.conf"), []byte(shipped), 0o600); err != nil {
		return fmt.Errorf("write the NATS accounts: %w", err)
	}
	type ports struct{ client, cluster, monitor int }
	ps := make([]ports, NATSNodes)
	var routes, urls []string
	for i := range ps {
		for _, p := range []*int{&ps[i].client, &ps[i].cluster, &ps[i].monitor} {
			if *p, err = embedded.FreePort(); err != nil {
				return err
			}
		}
		routes = append(routes, fmt.Sprintf("nats://localhost:%d", ps[i].cluster))
		urls = append(urls, fmt.Sprintf("tls://127.0.0.1:%d", ps[i].client))
	}
	l.urls = strings.Join(urls, ",")
	for i, pt := range ps {
		name := fmt.Sprintf("n%d", i+1)
		conf := filepath.Join(natsDir, name+".conf")
		text := nodeConfig(name, pt.client, pt.monitor, pt.cluster, filepath.Join(natsDir, name), routes, l.tlsDir())
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			return fmt.Errorf("write %s: %w", conf, err)
		}
		n := &node{Name: name, ClientURL: urls[i], proc: &proc{
			name: "nats-" + name, bin: l.bin, args: []string{"chaos", "node", conf},
			env: childEnv(nodeEnv...), logPath: filepath.Join(l.logDir, "nats-"+name+".log"),
			ready: healthy(fmt.Sprintf("http://127.0.0.1:%d/healthz", pt.monitor)),
		}}
		l.nodes = append(l.nodes, n)
	}
	return parallel(len(l.nodes), func(i int) error { return l.nodes[i].start(ctx, 90*time.Second) })
}

// nodeConfig is one node's nats-server configuration: the shipped accounts
// (./airlock.conf) plus the node's listen, JetStream, TLS (the files of
// tlsDir) and cluster settings, shaped as deploy/nats/cluster.conf (a test
// compares the two).
func nodeConfig(name string, client, monitor, cluster int, storeDir string, routes []string, tlsDir string) string {
	files := fmt.Sprintf("cert_file: %q\n  key_file: %q\n  ca_file: %q\n", filepath.Join(tlsDir, natsauth.TLSCertFile),
		filepath.Join(tlsDir, natsauth.TLSKeyFile), filepath.Join(tlsDir, natsauth.TLSCAFile))
	return fmt.Sprintf(`# Node %[1]s of the run's cluster: the shipped accounts plus this node's
# settings, as deploy/nats/cluster.conf.
include ./airlock.conf

server_name: %[1]s
logtime: true
host: 127.0.0.1
port: %[2]d
http: "127.0.0.1:%[3]d"
jetstream {
  store_dir: %[4]q
  sync_interval: always
  max_file_store: 64G
}
tls {
  %[7]s  timeout: 2
}
cluster {
  name: airlock
  listen: "127.0.0.1:%[5]d"
  tls {
    %[7]s    verify_cert_and_check_known_urls: true
    timeout: 2
  }
  routes: [%[6]s]
}
`, name, client, monitor, storeDir, cluster, strings.Join(routes, ", "), files)
}

// parallel runs f(0..n-1) concurrently and joins their errors.
func parallel(n int, f func(int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = f(i) }()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// clusterName is the replicated ClickHouse's remote_servers cluster.
const clusterName = "airlock"

// clickHouseName says what ClickHouse the run has.
func (l *layout) clickHouseName() string {
	if l.chReplicas > 1 {
		return fmt.Sprintf("%d ClickHouse replicas with ZooKeeper", l.chReplicas)
	}
	return "ClickHouse"
}

func (l *layout) startClickHouse(ctx context.Context) error {
	if l.chReplicas > 1 {
		return l.startClickHouseCluster(ctx)
	}
	s, err := local.New(filepath.Join(l.dir, "clickhouse"), 0)
	if err != nil {
		return fmt.Errorf("ClickHouse: %w", err)
	}
	if err := s.Start(ctx, 90*time.Second); err != nil {
		return fmt.Errorf("ClickHouse: %w", err)
	}
	l.ch, l.dsn, l.chs = s, s.DSN("airlock"), []*local.Server{s}
	return nil
}

// startClickHouseCluster starts ZooKeeper and the replicas; the services
// get every replica's address and the cluster in their DSN.
func (l *layout) startClickHouseCluster(ctx context.Context) error {
	zk, err := local.NewZooKeeper(filepath.Join(l.dir, "zookeeper"))
	if err != nil {
		return fmt.Errorf("ZooKeeper: %w", err)
	}
	if err := zk.Start(ctx, 90*time.Second); err != nil {
		return fmt.Errorf("ZooKeeper: %w", err)
	}
	l.zk = zk
	chs, err := local.NewCluster(filepath.Join(l.dir, "clickhouse"), l.chReplicas, zk.Addr(), clusterName)
	if err != nil {
		return fmt.Errorf("ClickHouse: %w", err)
	}
	l.chs = chs
	if err := parallel(len(chs), func(i int) error { return chs[i].Start(ctx, 90*time.Second) }); err != nil {
		return fmt.Errorf("ClickHouse: %w", err)
	}
	l.ch, l.dsn = chs[0], local.ClusterDSN(chs, "airlock", clusterName)
	return nil
}

// replicaDSN is the DSN of replica i alone (what it holds, not the cluster's view).
func (l *layout) replicaDSN(i int) string { return l.chs[i].DSN("airlock") }

// connectAdmin is the driver's own connection, as the operator: it reads
// the stream and buckets for the checks and finds stream leaders.
func (l *layout) connectAdmin(ctx context.Context) error {
	o, err := nats.NkeyOptionFromSeed(filepath.Join(l.keysDir, SeedFile(natsauth.RoleAdmin)))
	if err != nil {
		return fmt.Errorf("admin seed: %w", err)
	}
	secure, err := bus.TLSOption(l.natsTLS(), "the run's NATS TLS")
	if err != nil {
		return err
	}
	l.admin, err = nats.Connect(l.urls, o, secure, nats.Name("airlock-chaos"), nats.MaxReconnects(-1),
		nats.ReconnectWait(200*time.Millisecond), nats.PingInterval(2*time.Second), nats.MaxPingsOutstanding(2))
	if err != nil {
		return fmt.Errorf("connect to the cluster as admin: %w", err)
	}
	l.js, err = jetstream.New(l.admin)
	return err
}

// writeConfig writes what every service reads (a ConfigMap in Kubernetes),
// the policy (the default Rego with this run's rules) and the tool registry.
// Secrets are not in it: each service gets its own through the environment.
func (l *layout) writeConfig(p profile) error {
	l.passwords = map[string]string{}
	var users strings.Builder
	for _, r := range reviewers {
		pw := seal.NewKey().Hex()[:20]
		h, err := console.HashPassword(pw)
		if err != nil {
			return err
		}
		l.passwords[r] = pw
		fmt.Fprintf(&users, "    - {name: %s, password_hash: %q, roles: [reviewer], groups: [%s]}\n", r, h, groupReviewers)
	}
	if err := l.servicePorts(); err != nil {
		return err
	}
	// The gateway endpoint's token, a file only the gateway's configuration
	// names (in Kubernetes, a Secret only its pods mount).
	l.mcpToken = seal.NewKey().Hex()
	if err := os.MkdirAll(filepath.Dir(l.mcpTokenFile()), 0o700); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(l.mcpTokenFile()), err)
	}
	if err := os.WriteFile(l.mcpTokenFile(), []byte(l.mcpToken+"\n"), 0o600); err != nil {
		return fmt.Errorf("write the gateway's token: %w", err)
	}
	cfg := fmt.Sprintf(`# What every airlock service of this run reads; secrets come from the environment.
nats: {tls: {ca_file: %[12]q}}
stream: {replicas: %[1]d}
buckets: {replicas: %[1]d}
http: {public_url: %[2]q}
policy: {dir: %[3]q}
approval:
  groups: {%[4]s: [%[5]s]}
  sweep_interval: 500ms
  log_notifier: false
executor:
  tools_file: %[6]q
  sandbox: %[7]q
  ack_wait: %[8]s
console:
  users:
%[9]sslack:
  channel: %[10]q
  users: {%[11]s}
gateway:
  heartbeat: %[17]s
  endpoints:
    - {name: %[13]s, agent: %[14]s, token_file: %[15]q, answer_within: %[16]s}
`, NATSNodes, l.consoles[0], filepath.Join(l.dir, "policy"), groupReviewers, strings.Join(reviewers, ", "),
		filepath.Join(l.dir, "tools.yaml"), filepath.Join(l.dir, "sandbox"), p.ackWait, users.String(), slackChannel, slackUserMap(),
		l.natsTLS().CAFile, mcpEndpoint, mcpAgent, l.mcpTokenFile(), mcpAnswerWithin, mcpHeartbeat)
	if err := os.WriteFile(l.configFile(), []byte(cfg), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", l.configFile(), err)
	}
	var err error
	if l.cfg, err = config.Load(l.configFile(), nil); err != nil {
		return err
	}
	rego, err := fs.ReadFile(policies.Default(), "airlock.rego")
	if err != nil {
		return fmt.Errorf("the built-in policy: %w", err)
	}
	if err := os.WriteFile(filepath.Join(l.dir, "policy", "airlock.rego"), rego, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(l.dir, "policy", "data.json"), []byte(rules(p.askTimeout)), 0o600); err != nil {
		return err
	}
	tools := fmt.Sprintf(`builtin_demo: false
servers:
  %[1]s:
    webhook: {url: "%[3]s/%[1]s", secret_env: %[4]s}
    timeout: 10s
    tools:
      %[5]s: {idempotent: true}
      %[6]s: {}
      %[7]s: {}
      %[8]s: {idempotent: true}
      %[9]s: {}
  %[2]s:
    webhook: {url: "%[3]s/%[2]s", secret_env: %[4]s}
    timeout: %[10]s
    tools:
      %[11]s: {}
`, serverHook, serverSlow, l.tools.URL, toolSecretEnv, toolLookup, toolNotify, toolTransfer, toolSync, toolDrop, p.slowTimeout, toolWait)
	return os.WriteFile(filepath.Join(l.dir, "tools.yaml"), []byte(tools), 0o600)
}

// mcpTokenFile is the gateway endpoint's token_file.
func (l *layout) mcpTokenFile() string {
	return filepath.Join(l.keysDir, "gateway", mcpEndpoint+".token")
}

// mcpURLs are the gateway endpoint's URL at each gateway replica.
func (l *layout) mcpURLs() []string {
	var out []string
	for _, p := range l.ports["gateway"] {
		out = append(out, fmt.Sprintf("http://127.0.0.1:%d/mcp/%s", p, mcpEndpoint))
	}
	return out
}

func slackUserMap() string {
	var parts []string
	for _, u := range slackUsers {
		parts = append(parts, u.ID+": "+u.Name)
	}
	return strings.Join(parts, ", ")
}

// Tools of the run (server hook unless named otherwise).
const (
	toolLookup   = "lookup"   // allowed, idempotent
	toolNotify   = "notify"   // allowed, not idempotent
	toolTransfer = "transfer" // asked, not idempotent
	toolSync     = "sync"     // asked, idempotent
	toolDrop     = "drop"     // denied
	toolWait     = "wait"     // server slow: allowed, not idempotent, short timeout
)

// rules are the run's policy rules: deny drop, allow lookup, notify and the
// slow server, ask a reviewer (console and Slack) for the rest of hook.
func rules(askTimeout time.Duration) string {
	type rule struct {
		ID        string   `json:"id"`
		Priority  int      `json:"priority"`
		Server    string   `json:"server"`
		Tool      string   `json:"tool,omitempty"`
		Effect    string   `json:"effect"`
		Risk      string   `json:"risk"`
		Reason    string   `json:"reason"`
		Approvers []string `json:"approvers,omitempty"`
		Notify    []string `json:"notify,omitempty"`
		Timeout   string   `json:"timeout,omitempty"`
	}
	rs := []rule{
		{ID: "chaos-drop", Priority: 1, Server: serverHook, Tool: toolDrop, Effect: "deny", Risk: "critical", Reason: "dropping is never allowed"},
		{ID: "chaos-lookup", Priority: 2, Server: serverHook, Tool: toolLookup, Effect: "allow", Risk: "low", Reason: "lookups change nothing"},
		{ID: "chaos-notify", Priority: 3, Server: serverHook, Tool: toolNotify, Effect: "allow", Risk: "low", Reason: "notifications are fine"},
		{ID: "chaos-slow", Priority: 4, Server: serverSlow, Effect: "allow", Risk: "low", Reason: "the slow upstream is allowed"},
		{ID: "chaos-ask", Priority: 5, Server: serverHook, Effect: "ask", Risk: "high", Reason: "moving things needs a person",
			Approvers: []string{"group:" + groupReviewers}, Notify: []string{"console", "slack:" + slackChannel}, Timeout: askTimeout.String()},
	}
	doc := map[string]any{"airlock": map[string]any{"rules": rs, "profiles": map[string]any{}, "bindings": map[string]any{}}}
	b, _ := json.MarshalIndent(doc, "", "  ")
	return string(b)
}

// servicePorts picks the HTTP port of every replica and the console URLs.
func (l *layout) servicePorts() error {
	out := map[string][]int{}
	l.consoles = nil
	for _, s := range Topology() {
		for range s.Replicas {
			p, err := embedded.FreePort()
			if err != nil {
				return err
			}
			out[s.Name] = append(out[s.Name], p)
			if s.Name == "console" {
				l.consoles = append(l.consoles, fmt.Sprintf("http://127.0.0.1:%d", p))
			}
		}
	}
	l.ports = out
	return nil
}

// serviceEnv is the environment of one service: the shared configuration,
// its own NATS seed, and only the secrets its role holds.
func (l *layout) serviceEnv(s Service, toolSecret string) []string {
	env := []string{
		"AIRLOCK_CONFIG=" + l.configFile(),
		"AIRLOCK_NATS_URL=" + l.urls,
		"AIRLOCK_NATS_NKEY_SEED_FILE=" + filepath.Join(l.keysDir, SeedFile(s.Role)),
	}
	if s.DecisionKey {
		env = append(env, "AIRLOCK_SECURITY_DECISION_KEY_FILE="+filepath.Join(l.keysDir, DecisionKeyFile))
	}
	if s.FrontendKey {
		env = append(env, "AIRLOCK_SECURITY_FRONTEND_KEY_FILE="+filepath.Join(l.keysDir, FrontendKeyFile))
	}
	if s.AuditKey {
		env = append(env, "AIRLOCK_AUDIT_KEY_FILE="+filepath.Join(l.keysDir, AuditKeyFile))
	}
	if s.ClickHouse {
		env = append(env, "AIRLOCK_CLICKHOUSE_DSN="+l.dsn)
	}
	if s.SlackBot {
		env = append(env, "AIRLOCK_SLACK_BOT_TOKEN=xoxb-chaos", "AIRLOCK_SLACK_API_URL="+l.slackURL)
	}
	if s.SlackSigning {
		env = append(env, "AIRLOCK_SLACK_SIGNING_SECRET="+l.slackSecret)
	}
	if s.ToolSecrets {
		env = append(env, toolSecretEnv+"="+toolSecret)
	}
	return childEnv(env...)
}

func (l *layout) startServices(ctx context.Context, toolSecret string) error {
	l.replicas = map[string][]*proc{}
	var all []*proc
	for _, s := range Topology() {
		for i, port := range l.ports[s.Name] {
			addr := fmt.Sprintf("127.0.0.1:%d", port)
			name := fmt.Sprintf("%s-%d", s.Name, i+1)
			p := &proc{
				name: name, bin: l.bin, args: []string{"serve", s.Name, "--http", addr},
				env: l.serviceEnv(s, toolSecret), logPath: filepath.Join(l.logDir, name+".log"),
				ready: healthy("http://" + addr + "/healthz"),
			}
			l.replicas[s.Name] = append(l.replicas[s.Name], p)
			all = append(all, p)
		}
	}
	return parallel(len(all), func(i int) error { return all[i].start(ctx, 120*time.Second) })
}

// tearDown stops everything that runs, services first.
func (l *layout) tearDown() {
	var all []*proc
	for _, rs := range l.replicas {
		all = append(all, rs...)
	}
	_ = parallel(len(all), func(i int) error { all[i].stop(10 * time.Second); return nil })
	if l.admin != nil {
		l.admin.Close()
	}
	_ = parallel(len(l.nodes), func(i int) error { l.nodes[i].stop(10 * time.Second); return nil })
	_ = parallel(len(l.chs), func(i int) error { l.chs[i].Stop(); return nil })
	if l.zk != nil {
		l.zk.Stop()
	}
	if l.tools != nil {
		l.tools.close()
	}
	if l.slack != nil {
		l.slack.Stop()
	}
}

// readEnvFile reads KEY=VALUE lines (comments and blanks skipped).
func readEnvFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !strings.Contains(line, "=") {
			return nil, fmt.Errorf("%s: %q is not KEY=VALUE", path, line)
		}
		out = append(out, line)
	}
	return out, sc.Err()
}
