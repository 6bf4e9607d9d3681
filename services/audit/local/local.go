// Package local runs a private clickhouse-server process: a generated config
// under a data directory, free loopback ports, readiness wait, stop and
// restart on the same data. Tests (via chtest) and `airlock dev` (via
// audit.StartLocal) use it; production points at a real ClickHouse.
package local

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-gate/airlock/services/shared/child"
	"github.com/airlock-gate/airlock/services/shared/freeport"
)

// ErrNotInstalled is returned when no clickhouse-server binary is on PATH.
var ErrNotInstalled = errors.New("clickhouse-server not found: run `go tool task test:deps` (or install clickhouse-server)")

// Server is one clickhouse-server process owned by the caller.
type Server struct {
	Dir      string
	TCPPort  int
	HTTPPort int
	bin      string
	// InterserverPort is where a replica serves parts to the others (0 when
	// the server is not a replica).
	InterserverPort int
	replica         *replicaOf

	proc child.Process
}

// Accounts are the users of a server that other people on the machine can
// reach (`airlock dev --clickhouse-local`): Writer (the sink: creates,
// migrates, inserts) and Auditor (read-only), each with a password, and
// "default" with a random password nobody keeps, so that no one logs in
// without one.
type Accounts struct {
	Writer, WriterPassword   string
	Auditor, AuditorPassword string
}

// Binary finds clickhouse-server on PATH or in /usr/sbin (Debian installs it there).
func Binary() (string, error) {
	if p, err := exec.LookPath("clickhouse-server"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/clickhouse-server", "/usr/bin/clickhouse-server", "/usr/local/bin/clickhouse-server"} {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", ErrNotInstalled
}

// New prepares a server under dir (created if missing) on free loopback
// ports; tcpPort 0 picks a free one. It does not start it. The same dir keeps
// its data across Start/Stop, and the ports chosen are written into the
// config so a restart comes back on the same address.
func New(dir string, tcpPort int) (*Server, error) {
	return newServer(dir, tcpPort, testUsers, nil)
}

// Shard is the {shard} macro of every replica NewCluster makes: one shard,
// every server a full copy.
const Shard = "01"

// replicaOf is what makes a server one replica of a cluster's one shard.
type replicaOf struct {
	zooKeeper string   // host:port
	cluster   string   // the remote_servers name ON CLUSTER statements use
	name      string   // the {replica} macro
	peers     []string // native host:port of every replica, this one included
}

// NewCluster prepares n servers under dir/r1 ... dir/rN (users as New's),
// each a replica of cluster's one shard, coordinated by the ZooKeeper at
// zooKeeper (host:port): ReplicatedReplacingMergeTree tables with the
// {shard} and {replica} macros and ON CLUSTER statements work on them. It
// does not start them; their native ports are fixed from here on.
func NewCluster(dir string, n int, zooKeeper, cluster string) ([]*Server, error) {
	ports := make([]int, n)
	peers := make([]string, n)
	for i := range ports {
		p, err := freeport.Pick()
		if err != nil {
			return nil, err
		}
		ports[i], peers[i] = p, fmt.Sprintf("127.0.0.1:%d", p)
	}
	out := make([]*Server, n)
	for i := range out {
		name := fmt.Sprintf("r%d", i+1)
		s, err := newServer(filepath.Join(dir, name), ports[i], testUsers, &replicaOf{zooKeeper: zooKeeper, cluster: cluster, name: name, peers: peers})
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

// NewWithAccounts is New with accounts a in place of the open "default"
// user and the test "auditor" of New.
func NewWithAccounts(dir string, tcpPort int, a Accounts) (*Server, error) {
	if !userName.MatchString(a.Writer) || !userName.MatchString(a.Auditor) || a.WriterPassword == "" || a.AuditorPassword == "" ||
		a.Writer == a.Auditor || a.Writer == "default" || a.Auditor == "default" {
		return nil, errors.New("clickhouse accounts: a writer and an auditor (two names from a-z 0-9 _ other than default), each with a password, are required")
	}
	var nobody [32]byte
	if _, err := rand.Read(nobody[:]); err != nil {
		return nil, fmt.Errorf("clickhouse accounts: %w", err)
	}
	// "default" keeps a password nobody knows (the hash of a random one).
	users := usersConfig(account{"default", "password_sha256_hex", sha256Hex(hex.EncodeToString(nobody[:])), "readonly"},
		account{a.Writer, "password_sha256_hex", sha256Hex(a.WriterPassword), "default"},
		account{a.Auditor, "password_sha256_hex", sha256Hex(a.AuditorPassword), "readonly"})
	return newServer(dir, tcpPort, users, nil)
}

// userName is what an account's name may be: it becomes an XML element.
var userName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,63}$`)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func newServer(dir string, tcpPort int, users string, replica *replicaOf) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("clickhouse dir %s: %w", dir, err)
	}
	s := &Server{Dir: abs, bin: bin, TCPPort: tcpPort, replica: replica}
	if s.TCPPort == 0 {
		if s.TCPPort, err = freeport.Pick(); err != nil {
			return nil, err
		}
	}
	if s.HTTPPort, err = freeport.Pick(); err != nil {
		return nil, err
	}
	if replica != nil {
		if s.InterserverPort, err = freeport.Pick(); err != nil {
			return nil, err
		}
	}
	for _, d := range []string{"data", "tmp", "user_files", "log"} {
		if err := os.MkdirAll(filepath.Join(abs, d), 0o755); err != nil {
			return nil, fmt.Errorf("clickhouse dir: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(abs, "config.xml"), []byte(s.config()), 0o644); err != nil {
		return nil, fmt.Errorf("write clickhouse config: %w", err)
	}
	// The users file holds password hashes: its owner (the server runs as
	// the same user) reads it, nobody else.
	usersFile := filepath.Join(abs, "users.xml")
	if err := os.WriteFile(usersFile, []byte(users), 0o600); err != nil {
		return nil, fmt.Errorf("write clickhouse users: %w", err)
	}
	if err := os.Chmod(usersFile, 0o600); err != nil { // an older file kept its mode
		return nil, fmt.Errorf("write clickhouse users: %w", err)
	}
	return s, nil
}

// DSN is the native-protocol address of database db on this server.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("clickhouse://127.0.0.1:%d/%s?dial_timeout=2s", s.TCPPort, db)
}

// ClusterDSN is the DSN of database db on the replicas of cluster
// (NewCluster's servers): every replica's address, tried in order, and the
// cluster the audit store runs its DDL on.
func ClusterDSN(replicas []*Server, db, cluster string) string {
	addrs := make([]string, len(replicas))
	for i, r := range replicas {
		addrs[i] = r.Addr()
	}
	return fmt.Sprintf("clickhouse://%s/%s?dial_timeout=2s&cluster=%s", strings.Join(addrs, ","), db, cluster)
}

// Addr is host:port of the native protocol.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.TCPPort) }

// Start launches the process and waits (up to timeout) until it accepts
// native connections and answers a query; on failure it is stopped.
func (s *Server) Start(ctx context.Context, timeout time.Duration) error {
	cmd := exec.Command(s.bin, "--config-file="+filepath.Join(s.Dir, "config.xml"))
	cmd.Dir = s.Dir
	err := s.proc.Start(ctx, child.Spec{
		Name: "clickhouse-server", Cmd: cmd, LogPath: filepath.Join(s.Dir, "log", "stdout.log"), LogHint: filepath.Join(s.Dir, "log"),
		// Whoever listens on the port is handed a password only once it is
		// known to be this server: another process may bind it first.
		Ready: func(context.Context) bool { return listensOn(s.proc.Pid(), s.TCPPort) && ready(s.Addr()) },
		Poll:  50 * time.Millisecond, Timeout: timeout,
	})
	if err != nil {
		s.Stop()
	}
	return err
}

// Exited is closed when the running server exits, whatever the cause; nil
// when it is not running.
func (s *Server) Exited() <-chan struct{} { return s.proc.Exited() }

// Pid is the running server's process id, 0 when it is not running.
func (s *Server) Pid() int { return s.proc.Pid() }

// Stop terminates the process (SIGTERM, then SIGKILL after 10 s) and waits for it.
func (s *Server) Stop() { s.proc.Stop(10 * time.Second) }

// Kill stops the process at once (SIGKILL), as a crash would.
func (s *Server) Kill() { s.proc.Kill() }

// CPU is the user + system CPU time the server process has used so far
// (from /proc; 0 when it is not running or /proc cannot say). Benchmarks
// count it beside their own.
func (s *Server) CPU() time.Duration {
	pid := s.proc.Pid()
	if pid == 0 {
		return 0
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) start after ") ".
	i := strings.LastIndexByte(string(raw), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticks
}

// Running reports whether the process is up.
func (s *Server) Running() bool { return s.proc.Running() }

// ready sends a native-protocol Hello and reports whether the server answered
// it: accepting TCP alone happens before tables are loaded. The Hello holds
// no secret (the port may be another process's: see listensOn): it logs in
// as a user no server has, without a password, so the server answers with
// an authentication error, which says it is up as well as its Hello would.
func ready(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	// ClientHello: packet 0, name, version major/minor, revision, db, user, password.
	var b []byte
	b = append(b, 0)
	b = appendStr(b, "airlock-probe")
	b = append(b, 1, 1)
	b = appendUvarint(b, 54213)
	b = appendStr(b, "")
	b = appendStr(b, probeUser)
	b = appendStr(b, "")
	if _, err := c.Write(b); err != nil {
		return false
	}
	buf := make([]byte, 1)
	if _, err := c.Read(buf); err != nil {
		return false
	}
	return buf[0] == 0 || buf[0] == 2 // ServerHello, or Exception (authentication failed)
}

// probeUser is the readiness probe's user: no server's users file names it.
const probeUser = "airlock_readiness_probe_nobody"

// listensOn reports whether the socket listening on 127.0.0.1:port belongs
// to process pid (or one it started), from /proc: a process that bound the
// port before the server started must not be taken for it. Where there is
// no /proc/net/tcp (not Linux) it cannot tell, and says yes.
func listensOn(pid, port int) bool {
	if pid == 0 {
		return false
	}
	raw, err := os.ReadFile("/proc/net/tcp")
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	if err != nil {
		return false
	}
	// 127.0.0.1 in either byte order (the kernel's, as a hex number).
	local := map[string]bool{fmt.Sprintf("0100007F:%04X", port): true, fmt.Sprintf("7F000001:%04X", port): true}
	sockets := map[string]bool{}
	for _, line := range strings.Split(string(raw), "\n")[1:] {
		// sl local_address rem_address st tx_queue:rx_queue tr:when retrnsmt uid timeout inode
		f := strings.Fields(line)
		if len(f) > 9 && local[f[1]] && f[3] == "0A" { // 0A: LISTEN
			sockets["socket:["+f[9]+"]"] = true
		}
	}
	return len(sockets) > 0 && holdsSocket(pid, sockets, 3)
}

// holdsSocket reports whether process pid, or a descendant up to depth
// generations down, has one of sockets ("socket:[inode]") open.
func holdsSocket(pid int, sockets map[string]bool, depth int) bool {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, _ := os.ReadDir(dir)
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && sockets[l] {
			return true
		}
	}
	if depth == 0 {
		return false
	}
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, t := range tasks {
		kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		for _, k := range strings.Fields(string(kids)) {
			if kid, err := strconv.Atoi(k); err == nil && holdsSocket(kid, sockets, depth-1) {
				return true
			}
		}
	}
	return false
}

func appendStr(b []byte, s string) []byte { return append(appendUvarint(b, uint64(len(s))), s...) }

func appendUvarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func (s *Server) config() string {
	r := strings.NewReplacer("{DIR}", s.Dir, "{TCP}", fmt.Sprint(s.TCPPort), "{HTTP}", fmt.Sprint(s.HTTPPort))
	cfg := r.Replace(configXML)
	if s.replica != nil {
		cfg = strings.Replace(cfg, "</yandex>", s.replicaConfig()+"</yandex>", 1)
	}
	return cfg
}

// replicaConfig is the cluster part of a replica's config: ZooKeeper, the
// macros, the cluster's one shard listing every replica (internal
// replication: the table replicates, not the Distributed engine), the
// distributed DDL queue ON CLUSTER uses, and the interserver port parts
// are fetched from. deploy/clickhouse/cluster has the same for operators.
func (s *Server) replicaConfig() string {
	rp := s.replica
	zkHost, zkPort, _ := strings.Cut(rp.zooKeeper, ":")
	var peers strings.Builder
	for _, p := range rp.peers {
		h, port, _ := strings.Cut(p, ":")
		fmt.Fprintf(&peers, "                <replica><host>%s</host><port>%s</port></replica>\n", h, port)
	}
	return fmt.Sprintf(`    <interserver_http_host>127.0.0.1</interserver_http_host>
    <interserver_http_port>%d</interserver_http_port>
    <zookeeper>
        <node><host>%s</host><port>%s</port></node>
        <session_timeout_ms>6000</session_timeout_ms>
    </zookeeper>
    <macros>
        <shard>%s</shard>
        <replica>%s</replica>
    </macros>
    <remote_servers>
        <%s>
            <shard>
                <internal_replication>true</internal_replication>
%s            </shard>
        </%s>
    </remote_servers>
    <distributed_ddl>
        <path>/clickhouse/task_queue/ddl</path>
    </distributed_ddl>
`, s.InterserverPort, zkHost, zkPort, Shard, rp.name, rp.cluster, peers.String(), rp.cluster)
}

// configXML works on 18.16 (root element <yandex>) and current releases,
// which still accept it. Caches are small: this is a test or laptop instance.
const configXML = `<?xml version="1.0"?>
<yandex>
    <logger>
        <level>warning</level>
        <log>{DIR}/log/clickhouse-server.log</log>
        <errorlog>{DIR}/log/clickhouse-server.err.log</errorlog>
        <size>10M</size>
        <count>2</count>
    </logger>
    <listen_host>127.0.0.1</listen_host>
    <tcp_port>{TCP}</tcp_port>
    <http_port>{HTTP}</http_port>
    <path>{DIR}/data/</path>
    <tmp_path>{DIR}/tmp/</tmp_path>
    <user_files_path>{DIR}/user_files/</user_files_path>
    <users_config>{DIR}/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    <mark_cache_size>268435456</mark_cache_size>
    <uncompressed_cache_size>268435456</uncompressed_cache_size>
    <max_concurrent_queries>100</max_concurrent_queries>
    <mlock_executable>false</mlock_executable>
</yandex>
`

// usersTemplate is the users file; {USERS} is the users section. Profiles:
// "default" (the writer's) and "readonly" (readonly=1: no INSERT, ALTER,
// DROP or setting changes).
const usersTemplate = `<?xml version="1.0"?>
<yandex>
    <profiles>
        <default>
            <max_memory_usage>2000000000</max_memory_usage>
        </default>
        <readonly>
            <readonly>1</readonly>
        </readonly>
    </profiles>
    <users>
{USERS}    </users>
    <quotas>
        <default>
            <interval>
                <duration>3600</duration>
                <queries>0</queries>
                <errors>0</errors>
                <result_rows>0</result_rows>
                <read_rows>0</read_rows>
                <execution_time>0</execution_time>
            </interval>
        </default>
    </quotas>
</yandex>
`

// account is one user of the users file, on loopback only. passwordTag is
// "password" (plain text: test servers only) or "password_sha256_hex".
type account struct{ name, passwordTag, password, profile string }

// usersConfig is the users file holding accounts.
func usersConfig(accounts ...account) string {
	var b strings.Builder
	for _, a := range accounts {
		fmt.Fprintf(&b, "        <%[1]s>\n            <%[2]s>%[3]s</%[2]s>\n            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>\n"+
			"            <profile>%[4]s</profile>\n            <quota>default</quota>\n        </%[1]s>\n", a.name, a.passwordTag, a.password, a.profile)
	}
	return strings.Replace(usersTemplate, "{USERS}", b.String(), 1)
}

// testUsers: "default" for the sink (no password: a test server) and a
// read-only "auditor" (as shipped in deploy/clickhouse/users.d/auditor.xml).
var testUsers = usersConfig(account{"default", "password", "", "default"}, account{"auditor", "password", "auditor", "readonly"})
