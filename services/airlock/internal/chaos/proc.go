package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one supervised child process (a NATS node or an `airlock serve`
// replica): started, killed, paused, resumed and restarted by the fault
// schedule, with its output appended to logs/<name>.log across restarts.
type proc struct {
	name    string
	bin     string
	args    []string
	env     []string
	logPath string
	// ready reports whether a started process serves (its /healthz is 200).
	ready func(context.Context) bool

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	paused bool
	starts int
}

// start launches the process and waits until it is ready or timeout passes.
func (p *proc) start(ctx context.Context, timeout time.Duration) error {
	p.mu.Lock()
	if p.cmd != nil {
		p.mu.Unlock()
		return nil
	}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		p.mu.Unlock()
		return fmt.Errorf("log of %s: %w", p.name, err)
	}
	fmt.Fprintf(logf, "=== %s start %d at %s\n", p.name, p.starts+1, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group (signals from the terminal reach only the chaos
	// driver, which ends them in order); die with the driver.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		logf.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	p.cmd, p.exited, p.paused = cmd, exited, false
	p.starts++
	p.mu.Unlock()

	deadline := time.Now().Add(timeout)
	for {
		if p.ready(ctx) {
			return nil
		}
		select {
		case <-exited:
			p.mu.Lock()
			p.cmd = nil
			p.mu.Unlock()
			return fmt.Errorf("%s exited while starting: see %s", p.name, p.logPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s was not ready within %s: see %s", p.name, timeout, p.logPath)
		}
	}
}

// running reports whether the process is up (paused counts as up).
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil
}

// signal sends sig to the running process; false when it is not running.
func (p *proc) signal(sig syscall.Signal) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return false
	}
	switch sig {
	case syscall.SIGSTOP:
		p.paused = true
	case syscall.SIGCONT:
		p.paused = false
	}
	return true
}

// kill ends the process at once (SIGKILL), as a crash would, and waits for it.
func (p *proc) kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// stop ends the process gracefully (SIGCONT if paused, SIGTERM), killing it
// when it has not exited within grace.
func (p *proc) stop(grace time.Duration) {
	p.mu.Lock()
	cmd, exited, paused := p.cmd, p.exited, p.paused
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	if paused {
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	}
}

// logText is everything the process wrote, over all its starts.
func (p *proc) logText() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	return string(b)
}

// healthy is a readiness check: GET url answers 200.
func healthy(url string) func(context.Context) bool {
	client := &http.Client{Timeout: time.Second}
	return func(ctx context.Context) bool {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false
		}
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
}

// childEnv is the driver's environment without any AIRLOCK_ setting (a
// child gets exactly the settings its role has), plus extra.
func childEnv(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AIRLOCK_") {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}

// runOnce runs the airlock binary with args to completion (a setup step such
// as `airlock provision`) and returns its output; the error names the step.
func runOnce(ctx context.Context, bin string, env []string, logDir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	name := strings.Join(args[:min(len(args), 2)], "-")
	_ = os.WriteFile(filepath.Join(logDir, "step-"+name+".log"), out, 0o600)
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), fmt.Errorf("airlock %s failed (%v):\n%s", strings.Join(args, " "), err, out)
		}
		return string(out), fmt.Errorf("airlock %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}
