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

	"github.com/airlock-gate/airlock/services/shared/child"
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

	p      child.Process
	mu     sync.Mutex
	starts int
}

// start launches the process and waits until it is ready or timeout passes.
func (p *proc) start(ctx context.Context, timeout time.Duration) error {
	if p.p.Running() {
		return nil
	}
	p.mu.Lock()
	p.starts++
	n := p.starts
	p.mu.Unlock()
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = p.env
	return p.p.Start(ctx, child.Spec{
		Name: p.name, Cmd: cmd, LogPath: p.logPath,
		Header: fmt.Sprintf("=== %s start %d at %s", p.name, n, time.Now().Format(time.RFC3339Nano)),
		Ready:  p.ready, Poll: 100 * time.Millisecond, Timeout: timeout,
	})
}

// signal sends sig to the running process; false when it is not running.
func (p *proc) signal(sig syscall.Signal) bool { return p.p.Signal(sig) }

// kill ends the process at once (SIGKILL), as a crash would, and waits for it.
func (p *proc) kill() { p.p.Kill() }

// stop ends the process gracefully (SIGCONT if paused, SIGTERM), killing it
// when it has not exited within grace.
func (p *proc) stop(grace time.Duration) { p.p.Stop(grace) }

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
