package tests

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestMeasurePendingMemory measures what `airlock dev` holds per call
// waiting for a person (issue 22: 600 pending calls of 200 KB took the dev
// process from 122 MB to 1.57 GB). It is a measurement, not part of the
// suite: it writes AIRLOCK_PENDING_CALLS calls (10,000) with arguments of
// AIRLOCK_PENDING_ARG_BYTES bytes (16,384) and runs only when
// AIRLOCK_MEASURE_PENDING=1:
//
//	AIRLOCK_MEASURE_PENDING=1 go test -count=1 -v -timeout 30m -run TestMeasurePendingMemory ./tests/
//
// It reports the growth of the process's resident set and of its live heap
// (after a collection, from a heap profile) per pending call, leaves the
// heap profiles before and after (in AIRLOCK_PENDING_PROFILE_DIR, when set)
// for `go tool pprof`, and
// fails when the live heap grows by more than AIRLOCK_PENDING_GOAL_BYTES
// (16,384) per pending call. Each measurement waits
// AIRLOCK_PENDING_SETTLE_SECONDS (20) first.
func TestMeasurePendingMemory(t *testing.T) {
	if os.Getenv("AIRLOCK_MEASURE_PENDING") != "1" {
		t.Skip("a measurement: set AIRLOCK_MEASURE_PENDING=1 to run it")
	}
	calls, argBytes, goal := envInt(t, "AIRLOCK_PENDING_CALLS", 10000), envInt(t, "AIRLOCK_PENDING_ARG_BYTES", 16<<10), envInt(t, "AIRLOCK_PENDING_GOAL_BYTES", 16<<10)
	settle := time.Duration(envInt(t, "AIRLOCK_PENDING_SETTLE_SECONDS", 20)) * time.Second
	dir := t.TempDir()
	cfg := filepath.Join(dir, "airlock.yaml")
	// One agent submits every call: its budget at the policy's intake
	// (limits.agent_calls_per_minute, limits.agent_request_bytes_per_minute)
	// is lifted out of the measurement's way.
	writeFile(t, cfg, fmt.Sprintf("approval:\n  groups: {reviewers: [alice]}\n  default_timeout: 2h\n  max_pending_per_agent: %d\nintake:\n  max_pending_per_agent: %d\nlimits:\n  agent_subscriptions: %d\n  agent_calls_per_minute: 1000000000\n  agent_request_bytes_per_minute: 1099511627776\n", 2*calls, 2*calls, 4*calls))
	profile := filepath.Join(dir, "heap.pprof")
	natsPort, httpAddr := freePort(t), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	p := testenv.StartAirlock(t, httpAddr, []string{"AIRLOCK_CONFIG=" + cfg},
		"dev", "--data", filepath.Join(dir, "data"), "--nats-port", fmt.Sprint(natsPort), "--http", httpAddr, "--heap-profile", profile)
	dev := &devProcess{Process: p, DataDir: filepath.Join(dir, "data"), NATSURL: fmt.Sprintf("nats://127.0.0.1:%d", natsPort)}
	agent := dev.Agent(t, "bot")

	submit := func(from, n int) {
		content := strings.Repeat("x", argBytes)
		var wg sync.WaitGroup
		next := make(chan int)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					call := airlock.Call{ID: fmt.Sprintf("m%d", i), Tool: writeTool, Args: map[string]any{"path": fmt.Sprintf("f%d.txt", i), "content": content}}
					// The intake may be full for a moment: submit again until it takes the call.
					for deadline := time.Now().Add(time.Minute); ; {
						_, err := agent.Submit(context.Background(), call)
						if err == nil {
							break
						}
						if !strings.Contains(err.Error(), "intake.max_pending_per_agent") || time.Now().After(deadline) {
							t.Errorf("submit %s: %v", call.ID, err)
							break
						}
						<-time.After(10 * time.Millisecond)
					}
				}
			}()
		}
		for i := from; i < from+n; i++ {
			next <- i
		}
		close(next)
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		// The approval service's own count: paging through 10,000 records on every poll would load it.
		testenv.Eventually(t, 20*time.Minute, fmt.Sprintf("%d calls pending", from+n), func() bool {
			return metric(t, p.HTTPURL, "airlock_approvals_pending") == from+n
		})
	}
	measure := func(name string) (rss, heap int) {
		// The embedded NATS server keeps the message blocks it wrote last in
		// buffers it drops a few seconds after they go quiet: what is left
		// then is what the process holds for the pending calls.
		<-time.After(settle)
		if err := os.Remove(profile); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if err := syscall.Kill(p.Pid(), syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 30*time.Second, "the heap profile", func() bool { _, err := os.Stat(profile); return err == nil })
		kept := filepath.Join(cmp.Or(os.Getenv("AIRLOCK_PENDING_PROFILE_DIR"), dir), name+".pprof")
		if err := os.Rename(profile, kept); err != nil {
			t.Fatal(err)
		}
		heap = metric(t, p.HTTPURL, "go_memstats_heap_inuse_bytes")
		rss = procRSS(t, p.Pid())
		t.Logf("%s: RSS %.1f MB, live heap %.1f MB, heap profile %s", name, float64(rss)/1e6, float64(heap)/1e6, kept)
		return rss, heap
	}
	const warm = 100 // lazy caches, connections and stream blocks come first
	submit(0, warm)
	rss0, heap0 := measure("before")
	submit(warm, calls)
	rss1, heap1 := measure("after")
	perRSS, perHeap := (rss1-rss0)/calls, (heap1-heap0)/calls
	t.Logf("%d pending calls of %d-byte arguments: RSS +%d bytes and live heap +%d bytes per pending call (goal: live heap ≤ %d)", calls, argBytes, perRSS, perHeap, goal)
	if perHeap > goal {
		t.Fatalf("the live heap grew by %d bytes per pending call: over the %d-byte goal", perHeap, goal)
	}
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: set a positive number", name, s)
	}
	return n
}

// metric reads one gauge from the process's /metrics.
func metric(t *testing.T, base, name string) int {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return int(f)
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}

// procRSS is the resident set of process pid, in bytes.
func procRSS(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc status")
	return 0
}
