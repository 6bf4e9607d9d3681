// Package child supervises a child process the way airlock's own tooling
// runs its pieces (a private clickhouse-server, the nodes and replicas of
// `airlock chaos`): in its own process group, so that a signal from the
// terminal reaches only the parent, which ends its children in order; killed
// when the parent dies; its output appended to a log file across restarts;
// started, waited for until it serves, stopped gracefully, killed as a crash
// would, paused and resumed.
package child

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Spec is what to run and how to tell it serves.
type Spec struct {
	// Name names the process in errors.
	Name string
	// Cmd is the command to start (its Stdout and Stderr are set to the log).
	// A new one is needed for every start.
	Cmd *exec.Cmd
	// LogPath is the file the output is appended to; Header, when set, is
	// written before the process's output.
	LogPath, Header string
	// LogHint is where errors say to look (LogPath when empty).
	LogHint string
	// Ready reports whether the started process serves.
	Ready func(context.Context) bool
	// Poll is how often Ready is asked; Timeout how long Start waits for it.
	Poll, Timeout time.Duration
}

// Process is one supervised child process; the zero value is not running.
type Process struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	paused bool
}

// Start launches s.Cmd, unless the process runs already, and waits until
// s.Ready reports true. It fails when the process exits meanwhile, ctx
// ends or s.Timeout passes; in the last two cases the process is left
// running (Stop or Kill it).
func (p *Process) Start(ctx context.Context, s Spec) error {
	hint := s.LogHint
	if hint == "" {
		hint = s.LogPath
	}
	p.mu.Lock()
	if p.cmd != nil {
		p.mu.Unlock()
		return nil
	}
	logf, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		p.mu.Unlock()
		return fmt.Errorf("log of %s: %w", s.Name, err)
	}
	if s.Header != "" {
		fmt.Fprintln(logf, s.Header)
	}
	cmd := s.Cmd
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		logf.Close()
		return fmt.Errorf("start %s: %w", s.Name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	p.cmd, p.exited, p.paused = cmd, exited, false
	p.mu.Unlock()

	deadline := time.Now().Add(s.Timeout)
	for {
		if s.Ready(ctx) {
			return nil
		}
		select {
		case <-exited:
			p.mu.Lock()
			if p.cmd == cmd {
				p.cmd = nil
			}
			p.mu.Unlock()
			return fmt.Errorf("%s exited while starting: see %s", s.Name, hint)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(s.Poll):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s was not ready within %s: see %s", s.Name, s.Timeout, hint)
		}
	}
}

// Running reports whether the process is up (paused counts as up).
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil
}

// Exited is closed when the running process exits (or is stopped); nil
// when it is not running.
func (p *Process) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return nil
	}
	return p.exited
}

// Pid is the running process's id, 0 when it is not running.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Signal sends sig to the running process; false when it is not running.
// SIGSTOP and SIGCONT mark it paused and resumed.
func (p *Process) Signal(sig syscall.Signal) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process.Signal(sig) != nil {
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

// Kill ends the process at once (SIGKILL), as a crash would, and waits for it.
func (p *Process) Kill() {
	cmd, exited, _ := p.take()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// Stop ends the process gracefully (SIGCONT when paused, then SIGTERM),
// killing it when it has not exited within grace, and waits for it.
func (p *Process) Stop(grace time.Duration) {
	cmd, exited, paused := p.take()
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

// take marks the process not running and returns what ending it needs.
func (p *Process) take() (*exec.Cmd, chan struct{}, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd, exited, paused := p.cmd, p.exited, p.paused
	p.cmd = nil
	return cmd, exited, paused
}
