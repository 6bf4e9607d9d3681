package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// CPUTime is the CPU time process pid has used so far: each thread's time
// on a CPU as the scheduler counts it, in nanoseconds (the tick-based
// utime of /proc/<pid>/stat counts in 10 ms steps). Linux only.
func CPUTime(t testing.TB, pid int) time.Duration {
	t.Helper()
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if len(files) == 0 {
		t.Fatalf("process %d has no threads to measure (did it end?)", pid)
	}
	var sum time.Duration
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		ns, err := strconv.ParseInt(strings.Fields(string(raw))[0], 10, 64)
		if err != nil {
			t.Fatalf("read %s: %v", f, err)
		}
		sum += time.Duration(ns)
	}
	return sum
}

// Children are the pids of process pid's child processes. Linux only.
func Children(t testing.TB, pid int) []int {
	t.Helper()
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, f := range files {
		raw, _ := os.ReadFile(f) // a thread that ended has none
		for _, p := range strings.Fields(string(raw)) {
			n, err := strconv.Atoi(p)
			if err != nil {
				t.Fatalf("read %s: %v", f, err)
			}
			out = append(out, n)
		}
	}
	return out
}
