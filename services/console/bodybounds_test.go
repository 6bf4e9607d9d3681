package console_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/airlock-gate/airlock/services/shared/ingress"
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
