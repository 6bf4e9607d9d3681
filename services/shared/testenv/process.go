package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binary is the airlock command built once per test binary; the build is
// shared by every test that runs the real process, and Run removes it when
// the test binary ends (each build is ~80 MB: left behind, a few hundred
// runs fill the disk and JetStream then refuses to create streams).
var binary = struct {
	once    sync.Once
	running bool
	dir     string
	path    string
	err     error
}{}

// Run runs the package's tests and then removes the airlock binary that
// AirlockBinary built; a package that runs the real process calls it from
// TestMain: func TestMain(m *testing.M) { os.Exit(testenv.Run(m)) }.
func Run(m *testing.M) int {
	binary.running = true
	code := m.Run()
	if binary.dir != "" {
		if err := os.RemoveAll(binary.dir); err != nil {
			fmt.Fprintf(os.Stderr, "remove the test's airlock build %s: %v\n", binary.dir, err)
		}
	}
	return code
}

// AirlockBinary builds the airlock command (once per test binary) and
// returns its path.
func AirlockBinary(t testing.TB) string {
	t.Helper()
	if !binary.running {
		t.Fatal("testenv.AirlockBinary needs the package's TestMain to call testenv.Run, " +
			"which removes the build when the tests end: func TestMain(m *testing.M) { os.Exit(testenv.Run(m)) }")
	}
	binary.once.Do(func() {
		removeOrphanBuilds(os.TempDir())
		// The owner's pid in the name lets a later run remove the build of
		// a test binary that crashed before Run could.
		dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", buildPrefix, os.Getpid()))
		if err != nil {
			binary.err = err
			return
		}
		binary.dir, binary.path = dir, filepath.Join(dir, "airlock")
		out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", binary.path,
			"github.com/airlock-gate/airlock/services/airlock").CombinedOutput()
		if err != nil {
			binary.err = fmt.Errorf("go build airlock: %v\n%s", err, out)
		}
	})
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

// buildPrefix starts the name of each test binary's airlock build directory:
// airlock-bin-<pid of the test binary>-<random>.
const buildPrefix = "airlock-bin-"

// removeOrphanBuilds removes the airlock builds under tmp whose test binary
// is no longer running (it crashed, or was killed, before Run removed its
// build); a build of a running one, or one named otherwise, stays.
func removeOrphanBuilds(tmp string) {
	dirs, _ := filepath.Glob(filepath.Join(tmp, buildPrefix+"*-*"))
	for _, dir := range dirs {
		pid, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(filepath.Base(dir), buildPrefix), "-", 2)[0])
		if err != nil || pid <= 0 || pid == os.Getpid() || alive(pid) {
			continue
		}
		_ = os.RemoveAll(dir) // best effort: another run may be removing it too
	}
}

// alive reports whether a process with pid runs (signal 0 checks without
// sending anything).
func alive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, syscall.EPERM) // another user's process
}

// Process is a running airlock command.
type Process struct {
	t    testing.TB
	cmd  *exec.Cmd
	args []string
	mu   sync.Mutex
	out  strings.Builder
	// printed is closed (and replaced) each time the process prints a line.
	printed chan struct{}
	exited  chan error
	done    bool
	// HTTPURL is the process's HTTP base, e.g. http://127.0.0.1:34567.
	HTTPURL string
}

// StartAirlock runs the airlock binary with args and extra environment, and
// waits until http://httpAddr/healthz answers 200 (LaunchAirlock, then
// WaitReady within 60 s).
func StartAirlock(t testing.TB, httpAddr string, env []string, args ...string) *Process {
	t.Helper()
	p := LaunchAirlock(t, httpAddr, env, args...)
	p.WaitReady(60 * time.Second)
	return p
}

// LaunchAirlock runs the airlock binary with args and extra environment
// and returns at once; httpAddr is where it serves HTTP. When the test ends
// a process still running is interrupted (killed after 15s); its output is
// logged if the test failed.
func LaunchAirlock(t testing.TB, httpAddr string, env []string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(AirlockBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	p := &Process{t: t, cmd: cmd, args: args, printed: make(chan struct{}), exited: make(chan error, 1), HTTPURL: "http://" + httpAddr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			close(p.printed)
			p.printed = make(chan struct{})
			p.mu.Unlock()
		}
		p.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if !p.done {
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-p.exited:
			case <-time.After(15 * time.Second):
				_ = cmd.Process.Kill()
			}
		}
		if t.Failed() {
			LogTail(t, "airlock "+strings.Join(args, " ")+" output", p.Output())
		}
	})
	return p
}

// WaitReady waits until the process's /healthz answers 200, failing the
// test if it exits first or is not ready within the given time.
func (p *Process) WaitReady(within time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(p.HTTPURL + "/healthz"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case err := <-p.exited:
			p.done = true
			p.t.Fatalf("airlock %s exited early (%v):\n%s", p.args[0], err, p.Output())
		case <-time.After(100 * time.Millisecond):
		}
	}
	p.t.Fatalf("airlock %s did not answer /healthz within %s:\n%s", p.args[0], within, p.Output())
}

// WaitForOutput waits until the process has printed text, failing the test
// if it exits first or has not printed it within the given time.
func (p *Process) WaitForOutput(text string, within time.Duration) {
	p.t.Helper()
	timeout := time.After(within)
	for {
		p.mu.Lock()
		found, printed := strings.Contains(p.out.String(), text), p.printed
		p.mu.Unlock()
		if found {
			return
		}
		select {
		case <-printed:
		case err := <-p.exited:
			p.done = true
			if strings.Contains(p.Output(), text) { // its last words: read before it exited
				return
			}
			p.t.Fatalf("airlock %s exited (%v) before it said %q:\n%s", p.args[0], err, text, p.Output())
		case <-timeout:
			p.t.Fatalf("airlock %s did not say %q within %s:\n%s", p.args[0], text, within, p.Output())
		}
	}
}

// Pid is the process id of the running command.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Output is everything the process printed so far.
func (p *Process) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// Interrupt sends SIGINT, as Ctrl-C would, and fails the test unless the
// process exits cleanly within the given time.
func (p *Process) Interrupt(within time.Duration) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		p.t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		p.done = true
		if err != nil {
			p.t.Fatalf("airlock exited with %v after SIGINT:\n%s", err, p.Output())
		}
	case <-time.After(within):
		p.t.Fatalf("airlock did not exit within %s of SIGINT:\n%s", within, p.Output())
	}
}

// Kill sends SIGKILL, as a crash would, and waits until the process is gone.
func (p *Process) Kill() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		p.t.Fatal(err)
	}
	select {
	case <-p.exited:
		p.done = true
	case <-time.After(10 * time.Second):
		p.t.Fatal("the process did not die within 10s of SIGKILL")
	}
}

// tailLines is how many last lines of a failed test's process output
// LogTail puts in the test's log.
const tailLines = 30

// LogTail logs the last lines of what (a process's output) and keeps the
// whole of it in a file whose path it logs. The failure that matters is
// logged above the dump, and a CI log shown by its last lines then shows
// the failure, not only a thousand lines of a process's log.
func LogTail(t testing.TB, what, output string) {
	t.Helper()
	lines := strings.SplitAfter(strings.TrimRight(output, "\n"), "\n")
	where := "not kept"
	if f, err := os.CreateTemp("", "airlock-test-output-*.log"); err != nil {
		where = fmt.Sprintf("not kept: %v", err)
	} else {
		_, werr := f.WriteString(output)
		if cerr := f.Close(); werr == nil && cerr == nil {
			where = f.Name()
		}
	}
	if len(lines) <= tailLines {
		t.Logf("%s (whole: %s):\n%s", what, where, output)
		return
	}
	t.Logf("%s, last %d of %d lines (whole: %s):\n%s", what, tailLines, len(lines), where, strings.Join(lines[len(lines)-tailLines:], ""))
}
