package mcpclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestASessionSendsTheTokenItIsGiven: every request of a session carries
// the endpoint's bearer token, and none when there is no token.
func TestASessionSendsTheTokenItIsGiven(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "test-upstream", Version: "1"}, nil)
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	for _, tt := range []struct {
		name, token, wantHeader string
	}{
		{"a_token_is_sent_as_bearer", "secret", "Bearer secret"},
		{"no_token_sends_no_authorization", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			seen := make(chan string, 16)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select {
				case seen <- r.Header.Get("Authorization"):
				default:
				}
				mcpHandler.ServeHTTP(w, r)
			}))
			defer srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cs, err := Connect(ctx, srv.URL, Options{Name: "test", Token: tt.token, Protocol: "2025-11-25", Within: 10 * time.Second, NoResume: true})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cs.ListTools(ctx, nil); err != nil {
				t.Fatal(err)
			}
			_ = cs.Close()
			srv.Close() // no request is in flight: every header is in seen
			close(seen)
			n := 0
			for got := range seen {
				n++
				if got != tt.wantHeader {
					t.Errorf("a request carried Authorization %q, want %q", got, tt.wantHeader)
				}
			}
			if n == 0 {
				t.Fatal("the session sent no request")
			}
		})
	}
}
