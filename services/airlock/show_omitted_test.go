package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The console's events API returns the first and last 100 events of a
// call, with "omitted" saying how many between were left out. `airlock
// approvals show` printed the two ends as one timeline: a reviewer on the
// CLI was not told events were missing (an agent that floods its call's
// events hid the middle from them). It says so where they are left out.
func TestApprovalsShowSaysEventsWereLeftOut(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/events"):
			var evs []string
			for i := range 200 {
				evs = append(evs, fmt.Sprintf(`{"type":"e%d","time":"2026-01-01T00:00:00Z"}`, i))
			}
			fmt.Fprintf(w, `{"events":[%s],"omitted":3800,"all_events":"airlock audit query --agent bot --call c1"}`, strings.Join(evs, ","))
		default:
			fmt.Fprint(w, `{"record":{"call":{"agent_id":"bot","call_id":"c1","server":"s","tool":"t"},"state":"APPROVAL_STATE_PENDING"}}`)
		}
	}))
	defer srv.Close()
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("tkn\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(context.Background(), t, "approvals", "show", "bot/c1", "--api", srv.URL, "--token-file", tok)
	if err != nil {
		t.Fatalf("approvals show: %v\n%s", err, out)
	}
	if !strings.Contains(out, "e199") {
		t.Fatalf("the timeline was not printed:\n%s", out)
	}
	// Between the first 100 (e0–e99) and the last 100 (e100–e199).
	marker := strings.Index(out, "3800 more events not shown here: airlock audit query --agent bot --call c1 lists every one\n")
	if marker < 0 || marker < strings.Index(out, "  e99 ") || marker > strings.Index(out, "  e100 ") {
		t.Fatalf("approvals show printed the first and last 100 events as one timeline, without saying 3800 between them were left out:\n%s", out)
	}
}
