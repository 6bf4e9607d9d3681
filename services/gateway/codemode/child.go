package codemode

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A script runs isolated (Limits.Isolate) in a child process of a program
// whose main calls MaybeChild first: the same interpreter and limits, plus
// what only an operating system can bound — an address-space limit
// (RLIMIT_AS), so no allocation, in JavaScript or in one step of a built-in,
// grows past the run's memory; a CPU-time limit (RLIMIT_CPU), so a built-in
// that runs long in one step (a backtracking regular expression) is killed;
// an empty environment; and death with the parent. The child asks the parent
// for each tool call over its stdin/stdout, one JSON message a line.
//
// The CPU-time limit bounds running, never waiting: a script may wait
// minutes for a person to decide one of its calls. So the soft limit is set
// again each time the script is about to run JavaScript, to the CPU used so
// far plus the busy time it has left plus the slack, and only the hard
// limit (SIGKILL, for a child that would outlive SIGXCPU) counts from the
// start, with room for a hundredth of a core through the whole run.

// childEnv marks a process started to run one script.
const childEnv = "AIRLOCK_CODEMODE_CHILD"

// MaybeChild runs this process as one script's sandbox and exits when it was
// started as one; otherwise it returns at once. Call it first in main of a
// program that runs scripts isolated.
func MaybeChild() {
	if os.Getenv(childEnv) != "1" {
		return
	}
	os.Exit(childMain(os.Stdin, os.Stdout))
}

// Messages between parent and child.
type (
	startMsg struct {
		Src    string   `json:"src"`
		Tools  []string `json:"tools"`
		Limits Limits   `json:"limits"`
	}
	callMsg struct {
		Call *Call `json:"call,omitempty"`
		// Done ends the run: its result or its error.
		Done  *Result `json:"done,omitempty"`
		Error *Error  `json:"error,omitempty"`
	}
	resultMsg struct {
		Index int             `json:"index"`
		Value json.RawMessage `json:"value,omitempty"`
		Error string          `json:"error,omitempty"`
	}
)

// Slack of the operating system's limits over the interpreter's own, which
// come first with a clearer message: the runtime itself, and the CPU its
// garbage collector spends.
const (
	addressSlack = 512 << 20
	cpuSlack     = time.Second
)

// waitShare: the hard CPU-time limit leaves a waiting child Timeout /
// waitShare of CPU besides its busy time. A waiting child runs nothing but
// the Go runtime's own upkeep (a collection every two minutes), far less.
const waitShare = 100

// exitBusy is the child's exit code when it used up its CPU time.
const exitBusy = 124

func childMain(in io.Reader, out io.Writer) int {
	r := bufio.NewReaderSize(in, 64<<10)
	line, err := r.ReadBytes('\n')
	var st startMsg
	if err != nil || json.Unmarshal(line, &st) != nil {
		fmt.Fprintln(os.Stderr, "codemode child: no start message")
		return 2
	}
	lim := st.Limits.WithDefaults()
	// Go ignores SIGXCPU unless asked: the soft CPU limit ends the run.
	xcpu := make(chan os.Signal, 1)
	signal.Notify(xcpu, syscall.SIGXCPU)
	go func() {
		<-xcpu
		os.Exit(exitBusy)
	}()
	hard, err := limitSelf(lim)
	if err != nil {
		fmt.Fprintln(os.Stderr, "codemode child:", err)
		return 2
	}
	var mu sync.Mutex
	enc := json.NewEncoder(out)
	send := func(m any) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(m)
	}
	var wmu sync.Mutex
	waiting := map[int]chan resultMsg{}
	go func() {
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				os.Exit(3) // the parent went away: nothing waits for this run
			}
			var m resultMsg
			if json.Unmarshal(line, &m) != nil {
				continue
			}
			wmu.Lock()
			ch := waiting[m.Index]
			delete(waiting, m.Index)
			wmu.Unlock()
			if ch != nil {
				ch <- m
			}
		}
	}()
	caller := func(ctx context.Context, c Call) (any, error) {
		ch := make(chan resultMsg, 1)
		wmu.Lock()
		waiting[c.Index] = ch
		wmu.Unlock()
		send(callMsg{Call: &c})
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case m := <-ch:
			if m.Error != "" {
				return nil, errors.New(m.Error)
			}
			var v any
			if err := json.Unmarshal(m.Value, &v); err != nil {
				return nil, fmt.Errorf("the result could not be read: %w", err)
			}
			return v, nil
		}
	}
	lim.Isolate = ""
	res, err := runWith(context.Background(), st.Src, st.Tools, caller, lim, func(left time.Duration) error {
		return armCPU(left, hard)
	})
	var e *Error
	switch {
	case errors.As(err, &e):
		send(callMsg{Error: e})
	case err != nil:
		send(callMsg{Error: &Error{Kind: KindThrown, Message: err.Error()}})
	default:
		send(callMsg{Done: &res})
	}
	return 0
}

// limitSelf applies the operating system's limits to this process and
// returns the hard CPU-time limit, in seconds.
func limitSelf(lim Limits) (uint64, error) {
	size, err := addressSpace()
	if err != nil {
		return 0, err
	}
	as := size + 2*lim.MaxMemoryBytes + addressSlack
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: as, Max: as}); err != nil {
		return 0, fmt.Errorf("limit the address space: %w", err)
	}
	used, err := cpuUsed()
	if err != nil {
		return 0, err
	}
	soft := seconds(used + lim.Busy + cpuSlack)
	hard := soft + 1 + seconds(lim.Timeout/waitShare)
	if err := syscall.Setrlimit(syscall.RLIMIT_CPU, &syscall.Rlimit{Cur: soft, Max: hard}); err != nil {
		return 0, fmt.Errorf("limit the CPU time: %w", err)
	}
	return hard, nil
}

// armCPU sets the soft CPU-time limit (SIGXCPU) to the CPU used so far plus
// left and the slack, before the script runs JavaScript again: what it
// spent waiting never counts against what it may spend running. The soft
// limit may be raised only up to hard.
func armCPU(left time.Duration, hard uint64) error {
	used, err := cpuUsed()
	if err != nil {
		return err
	}
	soft := min(seconds(used+left+cpuSlack), hard)
	if err := syscall.Setrlimit(syscall.RLIMIT_CPU, &syscall.Rlimit{Cur: soft, Max: hard}); err != nil {
		return fmt.Errorf("limit the CPU time: %w", err)
	}
	return nil
}

// cpuUsed is the CPU time this process has used, as RLIMIT_CPU counts it.
func cpuUsed() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("read the CPU time used: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// seconds is d in whole seconds, rounded up (RLIMIT_CPU's unit).
func seconds(d time.Duration) uint64 { return uint64(math.Ceil(d.Seconds())) }

// addressSpace is this process's virtual memory size (VmSize).
func addressSpace() (uint64, error) {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("read the process's memory size: %w", err)
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "VmSize:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("read VmSize %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("no VmSize in /proc/self/status")
}

// runIsolated runs the script in a child process of lim.Isolate.
func runIsolated(ctx context.Context, src string, tools []string, call Caller, lim Limits) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, lim.Timeout)
	defer cancel()
	cmd := exec.Command(lim.Isolate)
	cmd.Env = []string{childEnv + "=1", "GOMAXPROCS=1", "GOTRACEBACK=none"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return Result{}, fmt.Errorf("start the script's sandbox: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return Result{}, fmt.Errorf("start the script's sandbox: %w", err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &limitedWriter{w: &stderr, n: 8 << 10}
	if err := cmd.Start(); err != nil {
		return Result{}, fmt.Errorf("start the script's sandbox %s: %w", lim.Isolate, err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // before Wait: calls still out are withdrawn
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-ctx.Done():
			_ = cmd.Process.Kill()
		case <-stopped:
		}
	}()
	var mu sync.Mutex
	enc := json.NewEncoder(stdin)
	send := func(m any) error {
		mu.Lock()
		defer mu.Unlock()
		return enc.Encode(m)
	}
	if err := send(startMsg{Src: src, Tools: tools, Limits: lim}); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return Result{}, fmt.Errorf("start the script's sandbox: %w", err)
	}
	// The child is held to the run's limits here too: a line at most as
	// long as the largest message, calls counted, tool names from the list,
	// the answer bounded.
	lines := bufio.NewScanner(stdout)
	lineMax := childLineMax(lim)
	lines.Buffer(make([]byte, 0, 64<<10), lineMax)
	known := map[string]bool{}
	for _, t := range tools {
		known[t] = true
	}
	calls := 0
	seen := map[int]bool{}
	end := func(err error) (Result, error) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return Result{}, err
	}
	for {
		var m callMsg
		if !lines.Scan() {
			if errors.Is(lines.Err(), bufio.ErrTooLong) {
				return end(fail(KindLimit, "the script sent a message over %d bytes (its arguments, output and console.log together, as JSON): it was stopped; pass less data per call", lineMax))
			}
			_ = cmd.Process.Kill()
			werr := cmd.Wait()
			return Result{}, childEnded(ctx, lim, werr, stderr.String())
		}
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
			return end(fmt.Errorf("the script's sandbox sent a message that does not decode: %w", err))
		}
		switch {
		case m.Call != nil:
			c := *m.Call
			calls++
			switch {
			case calls > lim.MaxCalls:
				return end(fail(KindLimit, "the script made more than %d tool calls in one run: it was stopped; split the work", lim.MaxCalls))
			case !known[c.Tool] || c.Index < 1 || c.Index > lim.MaxCalls || seen[c.Index]:
				return end(fmt.Errorf("the script's sandbox asked for call %d of tool %q, which it cannot make", c.Index, c.Tool))
			}
			seen[c.Index] = true
			wg.Add(1)
			go func() {
				defer wg.Done()
				v, err := call(ctx, c)
				res := resultMsg{Index: c.Index}
				if err != nil {
					res.Error = err.Error()
				} else if res.Value, err = json.Marshal(v); err != nil {
					res.Error = fmt.Sprintf("the result of %s could not be read: %v", c.Tool, err)
				}
				_ = send(res)
			}()
		case m.Error != nil:
			return end(m.Error)
		case m.Done != nil:
			if !json.Valid(m.Done.Value) || len(m.Done.Value) > lim.MaxOutputBytes {
				return end(fail(KindLimit, "the script's output (returned value and console.log) is over %d bytes: return less", lim.MaxOutputBytes))
			}
			_, _ = end(nil)
			return *m.Done, nil
		}
	}
}

// childLineMax is the longest line the child may send: one call's arguments
// or the answer with its output, as JSON, where escaping can make each byte
// six (a '<' is "\u003c"), plus the envelope.
func childLineMax(lim Limits) int {
	const jsonEscapeGrowth = 6
	return jsonEscapeGrowth*(lim.MaxArgBytes+2*lim.MaxOutputBytes) + (64 << 10)
}

// childEnded is the error for a child that ended without an answer.
func childEnded(ctx context.Context, lim Limits, werr error, stderr string) error {
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return fail(KindTimeout, "the script did not finish within %s (waits for people included): it was stopped, and calls still waiting were withdrawn", lim.Timeout)
	case strings.Contains(stderr, "out of memory") || strings.Contains(stderr, "cannot allocate memory"):
		return fail(KindMemory, "the script allocated more than %d MiB: it was stopped, and calls still waiting were withdrawn", lim.MaxMemoryBytes>>20)
	case errors.As(werr, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && (ws.ExitStatus() == exitBusy || ws.Signaled() && ws.Signal() == syscall.SIGKILL) {
			return fail(KindTimeout, "the script ran for more than %s without waiting (one long step?): it was stopped, and calls still waiting were withdrawn", lim.Busy)
		}
	}
	return fmt.Errorf("the script's sandbox ended without an answer (%v): %s", werr, strings.TrimSpace(stderr))
}

// limitedWriter keeps the first n bytes.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		_, _ = l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}
