package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/airlock-gate/airlock/services/shared/child"
	"github.com/airlock-gate/airlock/services/shared/freeport"
)

// ErrZooKeeperNotInstalled is returned when Java or ZooKeeper's jar is missing.
var ErrZooKeeperNotInstalled = errors.New("ZooKeeper not found: run `go tool task test:deps` (or `apt-get install zookeeperd`; it needs java and /usr/share/java/zookeeper.jar)")

// zooKeeperJars are where Debian's zookeeper package puts the server (its
// manifest names the jars it needs).
var zooKeeperJars = []string{"/usr/share/java/zookeeper.jar", "/usr/share/zookeeper/zookeeper.jar"}

// slf4jSimple is Debian's slf4j binding that writes to stderr.
const slf4jSimple = "/usr/share/java/slf4j-simple.jar"

// ZooKeeper is a standalone ZooKeeper server process owned by the caller
// (not the system service): the coordinator of a replicated ClickHouse in
// tests and `airlock chaos`.
type ZooKeeper struct {
	Dir  string
	Port int
	java string
	jar  string
	proc child.Process
}

// NewZooKeeper prepares a server with its data under dir on a free loopback
// port. It does not start it.
func NewZooKeeper(dir string) (*ZooKeeper, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, ErrZooKeeperNotInstalled
	}
	var jar string
	for _, p := range zooKeeperJars {
		if _, err := os.Stat(p); err == nil {
			jar = p
			break
		}
	}
	if jar == "" {
		return nil, ErrZooKeeperNotInstalled
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("zookeeper dir %s: %w", dir, err)
	}
	z := &ZooKeeper{Dir: abs, java: java, jar: jar}
	if z.Port, err = freeport.Pick(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(abs, "data"), 0o755); err != nil {
		return nil, fmt.Errorf("zookeeper dir: %w", err)
	}
	// A short tick: sessions of a killed ClickHouse expire in seconds, so
	// its replica can register again soon after it restarts.
	cfg := fmt.Sprintf("tickTime=500\ninitLimit=10\nsyncLimit=5\ndataDir=%s/data\nclientPort=%d\nclientPortAddress=127.0.0.1\n"+
		"admin.enableServer=false\n4lw.commands.whitelist=srvr\n", abs, z.Port)
	if err := os.WriteFile(filepath.Join(abs, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
		return nil, fmt.Errorf("write zookeeper config: %w", err)
	}
	return z, nil
}

// Addr is host:port of the client port.
func (z *ZooKeeper) Addr() string { return fmt.Sprintf("127.0.0.1:%d", z.Port) }

// Start launches the server and waits (up to timeout) until it serves
// sessions; on failure it is stopped.
func (z *ZooKeeper) Start(ctx context.Context, timeout time.Duration) error {
	cp := z.jar
	if _, err := os.Stat(slf4jSimple); err == nil {
		cp += ":" + slf4jSimple // its warnings go to the log instead of nowhere
	}
	cmd := exec.Command(z.java, "-Xmx256m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp, "org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(z.Dir, "zoo.cfg"))
	cmd.Dir = z.Dir
	err := z.proc.Start(ctx, child.Spec{
		Name: "zookeeper", Cmd: cmd, LogPath: filepath.Join(z.Dir, "zookeeper.log"),
		Ready: func(context.Context) bool { return zkOK(z.Addr()) }, Poll: 100 * time.Millisecond, Timeout: timeout,
	})
	if err != nil {
		z.Stop()
	}
	return err
}

// Stop terminates the server and waits for it.
func (z *ZooKeeper) Stop() { z.proc.Stop(10 * time.Second) }

// zkOK asks ZooKeeper's "srvr" four-letter command whether it serves:
// "ruok" says "imok" while the server is still loading, and a ClickHouse
// whose first session is refused then crashes (18.16).
func zkOK(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return false
	}
	out, _ := io.ReadAll(io.LimitReader(c, 4096))
	return strings.Contains(string(out), "Mode: ")
}
