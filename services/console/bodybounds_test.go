package console_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/ingress"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// R9 F3: a REST submit of 512 KiB, arguments {"a":[0,0,…]}, cost 40 MB
// (maps, then protobuf) before the SDK's size check refused it as 2.8 MB
// encoded. Arguments that cannot fit limits.max_request_bytes are now
// refused before they are decoded, saying why; the console allocates a
// small multiple of the body; a call in its budget is still submitted.
func TestRESTArgumentsThatCannotFitAreRefusedBeforeTheyAreDecoded(t *testing.T) {
	e := newEnv(t)
	agentTok := newToken(t, e, "root", `{"name":"bot","kind":"agent","agent_id":"bot"}`)
	limit := e.deps.Config.Limits.MaxRequestBytes
	zeros := `{"a":[` + strings.Repeat("0,", limit) + `0]}` // 2 bytes of JSON an element, 11 encoded
	body := `{"call_id":"too_big","tool":"fs__write_file","arguments":` + zeros + `}`
	if int64(len(body)) > ingress.MaxJSONBody(limit) {
		t.Fatalf("the body (%d bytes) should be under the bound (%d)", len(body), ingress.MaxJSONBody(limit))
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	p := apiCall(t, e.srv.URL, agentTok, http.MethodPost, "/api/v1/calls", body)
	runtime.ReadMemStats(&after)

	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("one refused submit of %d bytes allocated %d bytes", len(body), alloc)
	// Read, framed, scanned: a few copies. Decoding it cost 80 times.
	if most := uint64(10 * len(body)); alloc > most {
		t.Fatalf("one refused submit of %d bytes allocated %d bytes; want at most %d (10 times the body)", len(body), alloc, most)
	}
	assertAPIError(t, p, http.StatusBadRequest, "invalid_request")
	if !strings.Contains(p.Body, "limits.max_request_bytes") || !strings.Contains(p.Body, "by reference") {
		t.Fatalf("the refusal %s should name limits.max_request_bytes and what to do", p.Body)
	}

	for _, c := range []struct{ name, id, args, wantPath string }{
		{"a_call_in_its_budget_is_submitted", "fits", fmt.Sprintf(`{"path":"/tmp/fits","content":%q}`, strings.Repeat("x", limit/2)), "/tmp/fits"},
		{"a_call_without_arguments_is_submitted", "no_args", ``, ""},
		{"null_arguments_are_none", "null_args", `null`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := map[string]any{"call_id": c.id, "tool": "fs__write_file"}
			if c.args != "" {
				req["arguments"] = json.RawMessage(c.args)
			}
			b, _ := json.Marshal(req)
			if p := apiCall(t, e.srv.URL, agentTok, http.MethodPost, "/api/v1/calls", string(b)); p.Status != http.StatusAccepted {
				t.Fatalf("submit: %d %s", p.Status, p.Body)
			}
			got := intakeRequest(t, e, "bot", c.id).GetRequested().GetCall().GetArguments().GetFields()["path"].GetStringValue()
			if got != c.wantPath {
				t.Fatalf("the intake holds path %q, want %q", got, c.wantPath)
			}
		})
	}

	t.Run("arguments_that_are_no_object_are_refused_saying_so", func(t *testing.T) {
		p := apiCall(t, e.srv.URL, agentTok, http.MethodPost, "/api/v1/calls", `{"call_id":"a_list","tool":"fs__write_file","arguments":[1,2]}`)
		assertAPIError(t, p, http.StatusBadRequest, "invalid_request")
		if !strings.Contains(p.Body, "must be a JSON object") {
			t.Fatalf("the refusal %s should say the arguments must be an object", p.Body)
		}
	})
}

// R9 leftover: the REST submit read a body of up to twice
// limits.max_request_bytes for every request an agent's token sent, however
// many it had open: one token sending slowly on many connections held as
// many bodies. An agent now has at most maxBodiesPerAgent submits and
// reports being read and handled on a console at once; one more is refused
// before its body is read, saying what to do; another agent is not held up,
// and the agent submits again once one of its bodies is done.
func TestAnAgentsSubmitsBeingReadAreBounded(t *testing.T) {
	e := newEnv(t)
	bot := newToken(t, e, "root", `{"name":"bot","kind":"agent","agent_id":"bot"}`)
	other := newToken(t, e, "root", `{"name":"other","kind":"agent","agent_id":"other"}`)
	host := strings.TrimPrefix(e.srv.URL, "http://")

	// Slow senders: headers and the body's first byte, then nothing.
	// One that came in after a probe took a slot is refused, answered at
	// once: it is replaced, until all 16 are held.
	dialSlow := func() net.Conn {
		conn, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		fmt.Fprintf(conn, "POST /api/v1/calls HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", host, bot)
		return conn
	}
	slow := make([]net.Conn, 16)
	for i := range slow {
		slow[i] = dialSlow()
	}
	answered := func(conn net.Conn) bool {
		_ = conn.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		n, _ := conn.Read(make([]byte, 1))
		return n > 0
	}
	submit := func(tok, id string) page {
		return apiCall(t, e.srv.URL, tok, http.MethodPost, "/api/v1/calls", fmt.Sprintf(`{"call_id":%q,"tool":"fs__read_file","arguments":{"path":"/tmp/x"}}`, id))
	}
	var refused page
	n := 0
	testenv.Eventually(t, 10*time.Second, "a 17th submit of bot refused while 16 are being read", func() bool {
		for i, conn := range slow {
			if answered(conn) {
				conn.Close()
				slow[i] = dialSlow()
			}
		}
		n++
		refused = submit(bot, fmt.Sprintf("over_%d", n))
		return refused.Status == http.StatusServiceUnavailable && strings.Contains(refused.Body, "already has")
	})
	assertAPIError(t, refused, http.StatusServiceUnavailable, "unavailable")
	if !strings.Contains(refused.Body, "already has 16 submits or reports") || !strings.Contains(refused.Body, "send this one again") {
		t.Fatalf("the refusal %s should say how many are held and what to do", refused.Body)
	}
	// A report holds a body too, and shares the bound.
	if p := apiCall(t, e.srv.URL, bot, http.MethodPost, "/api/v1/calls/over_1/report", `{"status":"completed"}`); p.Status != http.StatusServiceUnavailable || !strings.Contains(p.Body, "already has") {
		t.Fatalf("a report of bot while it is at its bound: %d %s", p.Status, p.Body)
	}
	if p := submit(other, "others_call"); p.Status != http.StatusAccepted {
		t.Fatalf("another agent's submit while bot is at its bound: %d %s", p.Status, p.Body)
	}
	for _, conn := range slow {
		conn.Close()
	}
	testenv.Eventually(t, 10*time.Second, "bot's submit accepted once its slow bodies are gone", func() bool {
		n++
		return submit(bot, fmt.Sprintf("after_%d", n)).Status == http.StatusAccepted
	})
}
