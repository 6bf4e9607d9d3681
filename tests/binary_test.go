package tests

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/embedded"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// airlockBinary builds the airlock command once per test run.
func airlockBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "airlock-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "airlock")
		gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
		out, err := exec.Command(gobin, "build", "-o", binPath, "github.com/airlock-gate/airlock/services/airlock").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build airlock: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// devProcess is a running `airlock dev`.
type devProcess struct {
	t        *testing.T
	cmd      *exec.Cmd
	NATSURL  string
	HTTPURL  string
	DataDir  string
	natsPort int
	httpAddr string
	output   *strings.Builder
	mu       *sync.Mutex
	exited   chan error
}

// startDev runs `airlock dev` on free ports with dataDir and waits for /healthz.
func startDev(t *testing.T, dataDir string, natsPort int, httpAddr string, extraEnv ...string) *devProcess {
	t.Helper()
	if natsPort == 0 {
		var err error
		if natsPort, err = embedded.FreePort(); err != nil {
			t.Fatal(err)
		}
	}
	if httpAddr == "" {
		p, err := embedded.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		httpAddr = fmt.Sprintf("127.0.0.1:%d", p)
	}
	cmd := exec.Command(airlockBinary(t), "dev", "--data", dataDir, "--nats-port", fmt.Sprint(natsPort), "--http", httpAddr)
	cmd.Env = append(os.Environ(), extraEnv...)
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = cmd.Stdout
	d := &devProcess{t: t, cmd: cmd, NATSURL: fmt.Sprintf("nats://127.0.0.1:%d", natsPort), HTTPURL: "http://" + httpAddr,
		DataDir: dataDir, natsPort: natsPort, httpAddr: httpAddr, output: &strings.Builder{}, mu: &sync.Mutex{}, exited: make(chan error, 1)}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			d.mu.Lock()
			d.output.WriteString(sc.Text() + "\n")
			d.mu.Unlock()
		}
		d.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("airlock dev output:\n%s", d.Output())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(d.HTTPURL + "/healthz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return d
			}
		}
		select {
		case err := <-d.exited:
			t.Fatalf("airlock dev exited early (%v):\n%s", err, d.Output())
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatalf("airlock dev did not answer /healthz within 60s:\n%s", d.Output())
	return nil
}

// Output is everything the process printed so far.
func (d *devProcess) Output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.output.String()
}

// Interrupt sends SIGINT and waits for a clean exit.
func (d *devProcess) Interrupt(within time.Duration) {
	d.t.Helper()
	if err := d.cmd.Process.Signal(os.Interrupt); err != nil {
		d.t.Fatal(err)
	}
	select {
	case err := <-d.exited:
		if err != nil {
			d.t.Fatalf("airlock dev exited with %v after SIGINT:\n%s", err, d.Output())
		}
	case <-time.After(within):
		d.t.Fatalf("airlock dev did not exit within %s of SIGINT:\n%s", within, d.Output())
	}
}
