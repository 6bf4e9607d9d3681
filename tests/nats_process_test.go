package tests

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/embedded"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// envNATSChild makes the test binary run a NATS server instead of the tests
// (see TestMain): a real server in its own process, which a test can pause
// with SIGSTOP, resume with SIGCONT, or kill and start again.
const envNATSChild = "AIRLOCK_TEST_NATS_CHILD"

// parallelWaiting is how many tests (and subtests) marked parallel run at
// once unless -parallel says otherwise. Those marked here mostly wait — a
// real client's own timeout, the chaos schedule's paced load — rather than
// compute, so more of them than the 2 cores go test would allow overlap
// their waits. Six: the parallel tests took 131 s at four, 98 s at six and
// 112 s at eight (one run each; the longest, TestGatewayRequestsBeyondTheLeaseBound,
// takes 85 s alone).
const parallelWaiting = 6

func TestMain(m *testing.M) {
	if spec := os.Getenv(envNATSChild); spec != "" {
		os.Exit(runNATSChild(spec))
	}
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", strconv.Itoa(parallelWaiting))
	}
	os.Exit(testenv.Run(m))
}

// runNATSChild serves "<port>:<store dir>" until SIGTERM or SIGINT.
func runNATSChild(spec string) int {
	var port int
	var dir string
	if _, err := fmt.Sscanf(spec, "%d:%s", &port, &dir); err != nil {
		fmt.Fprintln(os.Stderr, "bad", envNATSChild, spec, err)
		return 2
	}
	s, err := embedded.Start(embedded.Options{Port: port, StoreDir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	s.Stop()
	return 0
}

// natsProcess is a NATS server in a child process.
type natsProcess struct {
	t    *testing.T
	port int
	dir  string
	cmd  *exec.Cmd
}

func startNATSProcess(t *testing.T) *natsProcess {
	t.Helper()
	n := &natsProcess{t: t, port: freePort(t), dir: filepath.Join(t.TempDir(), "js")}
	n.start()
	t.Cleanup(func() {
		if n.cmd != nil {
			_ = n.cmd.Process.Signal(syscall.SIGCONT)
			_ = n.cmd.Process.Kill()
			_ = n.cmd.Wait()
		}
	})
	return n
}

func (n *natsProcess) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(n.port) }

func (n *natsProcess) start() {
	n.t.Helper()
	n.cmd = exec.Command(os.Args[0], "-test.run=^$")
	n.cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d:%s", envNATSChild, n.port, n.dir))
	n.cmd.Stdout, n.cmd.Stderr = os.Stderr, os.Stderr
	if err := n.cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := netDial(n.port); err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	n.t.Fatalf("the NATS child process did not listen on %d within 20s", n.port)
}

// pause stops the server process for d (SIGSTOP, then SIGCONT).
func (n *natsProcess) pause(d time.Duration) {
	n.t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		n.t.Fatal(err)
	}
	time.Sleep(d) // the fault itself: the server is frozen for d
	if err := n.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		n.t.Fatal(err)
	}
}

// restart stops the server cleanly and starts it again on the same port and store.
func (n *natsProcess) restart() {
	n.t.Helper()
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	_ = n.cmd.Wait()
	n.start()
}

func netDial(port int) (interface{ Close() error }, error) {
	return net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
}
