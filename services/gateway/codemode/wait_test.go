package codemode

import (
	"context"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestAScriptWaitingForAPersonUsesNoCPU: a tool call inside a script can
// wait minutes for a person. Meanwhile the script runs no JavaScript, so
// what runs it — this process, or its child, whose CPU-time limit is its
// busy time and a second — must stay idle: a watchdog ticking through the
// wait burns CPU and, under RLIMIT_CPU, kills a script that only waited.
// The CPU used across four windows of half a second of its wait is measured
// (rusage of this process, the scheduler's figures of the child) and the
// lesser must be a small share of its window; the script then completes
// when the call is answered.
func TestAScriptWaitingForAPersonUsesNoCPU(t *testing.T) {
	const wait = 500 * time.Millisecond
	// A waiting script wakes for nothing; a hundredth of a core is far
	// above what an idle Go runtime spends, far below a 1 ms ticker.
	const most = wait / 100
	for mode, lim := range modes(t) {
		t.Run(mode, func(t *testing.T) {
			asked, answer := make(chan struct{}), make(chan struct{})
			call := func(ctx context.Context, c Call) (any, error) {
				close(asked)
				select {
				case <-answer:
					return "approved", nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			lim.Timeout = 30 * time.Second
			type outcome struct {
				res Result
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				res, err := Run(context.Background(), `const a = await tools.fs__write({path: "/a"}); return [a, "done"];`, []string{"fs__write"}, call, lim)
				done <- outcome{res, err}
			}()
			<-asked
			// Four windows, the least counted: a collection of what earlier
			// tests left, or a moment of the runtime's background work, lands
			// in one (8.8 ms in the lesser of two once, in a fresh-clone CI on
			// a loaded machine); a ticker runs in every one.
			runtime.GC()
			used := quietest(processCPU(t, lim.Isolate != ""), wait, 4)
			close(answer)
			o := <-done
			if o.err != nil || string(o.res.Value) != `["approved","done"]` {
				t.Fatalf("after the answer the script returned %s, %v; want [\"approved\",\"done\"]", o.res.Value, o.err)
			}
			t.Logf("%s: %v of CPU while the script waited %v", mode, used, wait)
			if used > most {
				t.Fatalf("the script used %v of CPU while it waited %v for its call (at most %v): something runs while nothing can happen", used, wait, most)
			}
		})
	}
}

// quietest is the least CPU cpu() rose by over n windows of d, one after
// the other: what is left of the start lands in the first; something that
// runs while nothing can happen runs in every one.
func quietest(cpu func() time.Duration, d time.Duration, n int) time.Duration {
	least := time.Duration(-1)
	for range n {
		before := cpu()
		time.Sleep(d) // the window measured, not a wait for an event
		if used := cpu() - before; least < 0 || used < least {
			least = used
		}
	}
	return least
}

// processCPU returns a reader of the CPU time used so far by what runs the
// script: this process, or (isolated) its only child.
func processCPU(t *testing.T, isolated bool) func() time.Duration {
	t.Helper()
	if !isolated {
		return func() time.Duration {
			used, err := cpuUsed()
			if err != nil {
				t.Fatal(err)
			}
			return used
		}
	}
	pid := onlyChild(t)
	return func() time.Duration { return testenv.CPUTime(t, pid) }
}

// onlyChild is the pid of this process's one child process.
func onlyChild(t *testing.T) int {
	t.Helper()
	pids := testenv.Children(t, os.Getpid())
	if len(pids) != 1 {
		t.Fatalf("want the script's child process alone, found children %v (run this test alone, not in parallel)", pids)
	}
	return pids[0]
}
