package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// ping sends a ping in s and returns the HTTP status it got.
func ping(t *testing.T, s *testenv.MCPSession) int {
	t.Helper()
	resp := s.Post(context.Background(), `{"jsonrpc":"2.0","id":"p","method":"ping"}`)
	testenv.Drain(resp)
	return resp.StatusCode
}

// One endpoint token opens session after session (the hostile client kept
// each for the whole session_timeout, an hour): the endpoint holds at most
// gateway.max_sessions. A new one past it closes the session that has gone
// longest without a request (its client is answered 404, and starts
// again); when every session has a request in flight, the new one is
// refused with a JSON-RPC error saying what to do, and a busy session is
// never closed.
func TestAnEndpointHoldsAtMostItsMaxSessions(t *testing.T) {
	const max = 3
	ep, url, submitted := startHTTPGatewayWith(t, func(g *config.Gateway) { g.MaxSessions = max })
	awaitTool(t, ep, "fs__write_file")
	s1, s2, s3 := openSession(t, url, "a", "1"), openSession(t, url, "b", "1"), openSession(t, url, "c", "1")
	if got := ping(t, s1); got != http.StatusOK { // s2 is now the least recently used
		t.Fatalf("a ping in a live session: %d", got)
	}
	s4 := openSession(t, url, "d", "1")
	for _, tt := range []struct {
		s    *testenv.MCPSession
		want int
	}{{s1, http.StatusOK}, {s2, http.StatusNotFound}, {s3, http.StatusOK}, {s4, http.StatusOK}} {
		if got := ping(t, tt.s); got != tt.want {
			t.Fatalf("after a session past %d, a ping in session %s answered %d, want %d (only the least recently used closed)", max, tt.s.ID, got, tt.want)
		}
	}

	// A flood of new sessions, one after another and all at once, keeps
	// the endpoint at its bound.
	for i := range 50 {
		openSession(t, url, fmt.Sprint("flood-", i), "1")
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 10 {
				if resp, err := http.DefaultClient.Do(initialize(t, url)); err == nil {
					testenv.Drain(resp)
				}
			}
		})
	}
	wg.Wait()
	// A closed session leaves the SDK's list once its connection is done,
	// a moment after Close (seconds on a loaded machine): the bound is what
	// remains. A session that escaped the count never leaves.
	var n int
	testenv.Eventually(t, 30*time.Second, "the sessions closed past the bound to leave the SDK's list", func() bool {
		n = len(ep.liveSessions())
		return n <= max
	})
	if n != max {
		t.Fatalf("after 130 more sessions the endpoint holds %d, want %d (gateway.max_sessions)", n, max)
	}

	// Every session busy: a tools/call waits for a decision in each.
	var busy []*testenv.MCPSession
	for i := range max {
		s := openSession(t, url, fmt.Sprint("busy-", i), "1")
		resp, _ := callTool(t, s, "1", "fs__write_file", map[string]any{"path": fmt.Sprintf("/tmp/%d", i), "content": "x"})
		t.Cleanup(func() { resp.Body.Close() })
		nextSubmitted(t, submitted, "a busy session's call")
		busy = append(busy, s)
	}
	refused, err := http.DefaultClient.Do(initialize(t, url))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(refused.Body)
	refused.Body.Close()
	var answer rpcError
	if err := json.Unmarshal(raw, &answer); err != nil || refused.StatusCode != http.StatusServiceUnavailable || string(answer.ID) != `"init"` ||
		answer.Error.Code != codeTooManySessions || !strings.Contains(answer.Error.Message, "gateway.max_sessions") {
		t.Fatalf("a new session while every one is busy answered %s %s; want it refused naming gateway.max_sessions", refused.Status, raw)
	}
	for _, s := range busy {
		if got := ping(t, s); got != http.StatusOK {
			t.Fatalf("a busy session answered %d to a ping: it was closed", got)
		}
	}
}

// initialize is a request that starts a session at url.
func initialize(t *testing.T, url string) *http.Request {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(
		`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"late","version":"1"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+testToken)
	return req
}

// 100 concurrent tools/call requests of the 2026-07-28 protocol, which has
// no sessions for gateway.max_sessions to count, were all held open. An
// endpoint serves at most gateway.max_requests at once, in both protocols:
// past it a request is refused at once with a JSON-RPC error naming the
// setting, HTTP 503 and Retry-After.
func TestAnEndpointServesAtMostItsMaxRequests(t *testing.T) {
	const max = 3
	ep, url, submitted := startHTTPGatewayWith(t, func(g *config.Gateway) { g.MaxRequests = max })
	awaitTool(t, ep, "fs__write_file")
	call := func(i int) *http.Request {
		return statelessCall(t, url, strings.NewReader(statelessBody(i, fmt.Sprintf(`{"path":"/tmp/r%d","content":"x"}`, i))))
	}
	for i := range max { // each waits for a decision
		go func() {
			if resp, err := http.DefaultClient.Do(call(i)); err == nil {
				testenv.Drain(resp)
			}
		}()
		nextSubmitted(t, submitted, fmt.Sprintf("waiting call %d", i))
	}
	for _, c := range []struct {
		name string
		req  *http.Request
		id   string
	}{
		{"another_2026_07_28_call", call(max), fmt.Sprint(max)},
		{"a_new_session", initialize(t, url), `"init"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Refused at once; held open, it fails here rather than hang.
			ctx, cancel := context.WithTimeout(c.req.Context(), 15*time.Second)
			defer cancel()
			resp, err := http.DefaultClient.Do(c.req.WithContext(ctx))
			if err != nil {
				t.Fatalf("with %d requests in flight another was held open (%v); want it refused at once naming gateway.max_requests", max, err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var answer rpcError
			if err := json.Unmarshal(raw, &answer); err != nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
				string(answer.ID) != c.id || answer.Error.Code != codeTooManySessions || !strings.Contains(answer.Error.Message, "gateway.max_requests") {
				t.Fatalf("with %d requests in flight it answered %s (Retry-After %q) %s; want 503 naming gateway.max_requests", max, resp.Status, resp.Header.Get("Retry-After"), raw)
			}
		})
	}
}

// A lease-less request's wait ends when a lease on its call ends in this
// gateway, not on another call's; the entry goes once its requests leave.
func TestAVacancyIsToldToTheRequestsOfItsCallOnly(t *testing.T) {
	v := newVacancies()
	v.join("bot.a")
	v.join("bot.b")
	a, b := v.freed("bot.a"), v.freed("bot.b")
	v.vacated("bot.a")
	select {
	case <-a:
	default:
		t.Fatal("a lease of call a ended, and its lease-less request was not told")
	}
	select {
	case <-b:
		t.Fatal("a lease of call a ended, and call b's request was told")
	default:
	}
	if next := v.freed("bot.a"); next == a {
		t.Fatal("after a vacancy the request waits on the same closed channel: it would ask at once forever")
	}
	v.leave("bot.a")
	v.leave("bot.b")
	if len(v.calls) != 0 || v.freed("bot.a") != nil {
		t.Fatalf("entries left after every request left: %v", v.calls)
	}
}

// fakeSession is a live session that notes its closing.
type fakeSession struct{ closed bool }

func (s *fakeSession) Close() error { s.closed = true; return nil }

// Two admissions overlap: the second began while the first's session was
// still connecting, and is decided after the first ended. The first's
// session is live by then, so it is counted (and, at the bound, closed as
// the least recently used) rather than dropped uncounted: a session that
// escaped the count was never closed, and the endpoint held one more than
// gateway.max_sessions for every such overlap.
func TestASessionConnectedDuringAnotherAdmissionIsCounted(t *testing.T) {
	c := newSessionCap(1)
	live := map[string]closer{}
	liveNow := func() map[string]closer { return live }

	releaseFirst, ok := c.admit(liveNow)
	if !ok {
		t.Fatal("the first session was refused")
	}
	c.named("first")
	first := &fakeSession{}
	live["first"] = first // connected while its request is served
	releaseFirst()

	releaseSecond, ok := c.admit(liveNow)
	if !ok {
		t.Fatal("a second session was refused while the first was idle")
	}
	defer releaseSecond()
	if !first.closed {
		t.Fatal("at a bound of 1 the second admission did not close the first, idle, session: it escaped the count")
	}
}
