package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRefusedToolCallsLeaveNothingRemembered: every
// tools/call of a session with a request id derives a call id, and the
// endpoint remembers it (recentCalls.add, before the call is submitted)
// for two hours, whatever became of the call. A client whose calls the
// SDK refuses before anything is published (arguments nested past the
// 128-level ceiling: no bus write, no budget charged) is answered at once,
// so it makes the endpoint remember call ids as fast as it can post, and
// nothing but the two-hour age bounds how many: memory grows with the
// request rate times two hours.
func TestRefusedToolCallsLeaveNothingRemembered(t *testing.T) {
	ep, url, _ := startHTTPGateway(t)
	awaitTool(t, ep, "fs__write_file")
	s := openSession(t, url, "cli", "1")
	deep := strings.Repeat("[", 200) + strings.Repeat("]", 200)
	const calls, workers = 4000, 64
	post := func(id int) (string, error) {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"fs__write_file","arguments":{"path":"/tmp/x","content":"x","deep":%s}}}`, id, deep)
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			return "", err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		req.Header.Set("Mcp-Session-Id", s.ID)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		return string(raw), err
	}
	// One call first: it is refused as malformed, nothing submitted.
	if out, err := post(1); err != nil || !strings.Contains(out, "malformed") {
		t.Fatalf("a call nested past the ceiling answered %q, %v", out, err)
	}
	remembered := func() int {
		ep.recent.mu.Lock()
		defer ep.recent.mu.Unlock()
		return len(ep.recent.seen)
	}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	var next, failed atomic.Int64
	next.Store(1)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				id := int(next.Add(1))
				if id > calls+1 {
					return
				}
				if out, err := post(id); err != nil || !strings.Contains(out, "malformed") {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	n := remembered()
	t.Logf("%d refused tools/calls in %s (%.0f/s, %d not refused as malformed): %d call ids remembered for %s, live heap %+d bytes (%.0f bytes a call)",
		calls, took.Round(time.Millisecond), float64(calls)/took.Seconds(), failed.Load(), n, recentFor,
		int64(after.HeapAlloc)-int64(before.HeapAlloc), float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/calls)
	if n > 64 {
		t.Fatalf("%d tools/calls refused before anything was submitted left %d call ids remembered for %s", calls+1, n, recentFor)
	}
}

// TestRecentCallsStayBounded: the ids remembered are at most recentMax,
// the least recently seen forgotten first, and none past recentFor.
func TestRecentCallsStayBounded(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name      string
		fill      func(r *recentCalls)
		id        string
		seen      bool
		remaining int
	}{
		{"the oldest goes first once the cap is reached", func(r *recentCalls) {
			for i := range recentMax + 1 {
				r.add(fmt.Sprint(i), now)
			}
		}, "0", false, recentMax},
		{"an id seen again is kept over older ones", func(r *recentCalls) {
			for i := range recentMax {
				r.add(fmt.Sprint(i), now)
			}
			r.add("0", now)
			r.add("new", now)
		}, "0", true, recentMax},
		{"an id older than recentFor is forgotten", func(r *recentCalls) {
			r.add("old", now.Add(-recentFor-time.Second))
			r.add("new", now)
		}, "old", false, 1},
		{"a refused call's id is taken back", func(r *recentCalls) {
			r.add("refused", now)
			r.forget("refused")
		}, "refused", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRecentCalls()
			tt.fill(r)
			r.mu.Lock()
			_, seen := r.seen[tt.id]
			remaining := len(r.seen)
			r.mu.Unlock()
			if seen != tt.seen || remaining != tt.remaining {
				t.Fatalf("id %q remembered: %v (want %v), %d ids remembered (want %d)", tt.id, seen, tt.seen, remaining, tt.remaining)
			}
		})
	}
}
