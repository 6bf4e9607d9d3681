package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/ingress"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// statelessCall is a tools/call of the 2026-07-28 protocol (no session)
// whose body is body, posted to the endpoint at url.
func statelessCall(t *testing.T, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Mcp-Protocol-Version", statelessVersion)
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "fs__write_file")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return req.WithContext(ctx)
}

// statelessBody is the JSON of a 2026-07-28 tools/call of fs__write_file
// with arguments args (JSON).
func statelessBody(id int, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":%q,"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"big","version":"1"}},"name":"fs__write_file","arguments":%s}}`, id, statelessVersion, args)
}

// zerosArgs is {"a":[0,0,…]} of about n bytes: 2 bytes of JSON an element,
// 11 once encoded (R9 F1).
func zerosArgs(n int) string {
	return `{"a":[` + strings.Repeat("0,", n/2) + `0]}`
}

// R9 F1: one tools/call of a 4 MiB body of {"a":[0,0,…]} cost the gateway
// 550 MB and 3 CPU-seconds before the size check refused it, as 23 MB
// encoded. Its arguments are now refused unread, for the reason, and the
// gateway allocates a small multiple of the body on the way; a call in
// its budget is still submitted.
func TestArgumentsThatCannotFitAreRefusedBeforeTheyAreDecoded(t *testing.T) {
	ep, url, submitted := startHTTPGateway(t)
	awaitTool(t, ep, "fs__write_file")
	limit := testenv.Config("").Limits.MaxRequestBytes
	// Under the body bound, but 11/2 times the limit once encoded.
	body := statelessBody(1, zerosArgs(2*limit))
	if int64(len(body)) > ingress.MaxJSONBody(limit) {
		t.Fatalf("the body (%d bytes) should be under the bound (%d)", len(body), ingress.MaxJSONBody(limit))
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	resp, err := http.DefaultClient.Do(statelessCall(t, url, strings.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	runtime.ReadMemStats(&after)

	t.Logf("one refused call of %d bytes allocated %d bytes", len(body), after.TotalAlloc-before.TotalAlloc)
	// The body is read, the SDK frames it, the arguments are scanned:
	// a few copies of it. Decoding it cost over 50 times its size.
	if alloc, most := after.TotalAlloc-before.TotalAlloc, uint64(10*len(body)); alloc > most {
		t.Fatalf("one refused call of %d bytes allocated %d bytes; want at most %d (10 times the body)", len(body), alloc, most)
	}
	if answer := string(raw); !strings.Contains(answer, `"isError":true`) || !strings.Contains(answer, "limits.max_request_bytes") || !strings.Contains(answer, "by reference") {
		t.Fatalf("the call answered %s %.300s; want an error result naming limits.max_request_bytes and what to do", resp.Status, answer)
	}

	// A call in its budget is submitted (and waits: nothing decides it).
	fits := fmt.Sprintf(`{"path":"/tmp/fits","content":%q}`, strings.Repeat("x", limit/2))
	go func() {
		if resp, err := http.DefaultClient.Do(statelessCall(t, url, strings.NewReader(statelessBody(2, fits)))); err == nil {
			testenv.Drain(resp)
		}
	}()
	if c := nextSubmitted(t, submitted, "the call in its budget"); c.GetArguments().GetFields()["path"].GetStringValue() != "/tmp/fits" {
		t.Fatalf("submitted %v", c)
	}
}

// R9 F1: bodies were read (up to 4 MiB each) before a slot of
// gateway.max_requests was taken, so slow uploads were bounded only by the
// connections. The body bound is now twice limits.max_request_bytes and
// the envelope, and a request takes its slot before its body is read.
func TestABodyIsBoundedByTheRequestLimitAndReadInsideItsSlot(t *testing.T) {
	ep, url, _ := startHTTPGatewayWith(t, func(g *config.Gateway) { g.MaxRequests = 1 })
	awaitTool(t, ep, "fs__write_file")
	limit := testenv.Config("").Limits.MaxRequestBytes

	t.Run("a_body_past_the_bound_is_refused_saying_why", func(t *testing.T) {
		body := statelessBody(1, fmt.Sprintf(`{"content":%q}`, strings.Repeat("x", int(ingress.MaxJSONBody(limit)))))
		resp, err := http.DefaultClient.Do(statelessCall(t, url, strings.NewReader(body)))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(raw), "limits.max_request_bytes") {
			t.Fatalf("a body of %d bytes answered %s %.300s; want 413 naming limits.max_request_bytes", len(body), resp.Status, raw)
		}
	})

	t.Run("a_body_still_being_sent_holds_its_slot", func(t *testing.T) {
		slow, feed := io.Pipe()
		defer feed.Close()
		go func() {
			if resp, err := http.DefaultClient.Do(statelessCall(t, url, slow)); err == nil {
				testenv.Drain(resp)
			}
		}()
		if _, err := feed.Write([]byte(`{"jsonrpc":"2.0","id":1,`)); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 10*time.Second, "the slow upload to take the endpoint's one slot", func() bool { return len(ep.requests) == 1 })
		resp, err := http.DefaultClient.Do(statelessCall(t, url, strings.NewReader(statelessBody(2, `{"path":"/tmp/x","content":"x"}`))))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(raw), "gateway.max_requests") || !strings.Contains(string(raw), `"id":2`) {
			t.Fatalf("with the one slot held by an upload another request answered %s %s; want 503 naming gateway.max_requests and its id", resp.Status, raw)
		}
	})
}
