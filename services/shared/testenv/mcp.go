package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// MCPSession is an MCP session (protocol 2025-11-25) with a gateway
// endpoint spoken as plain HTTP, for what a go-sdk client never does
// (sending a request id that is in flight again, answering another
// session's request, naming itself with hostile text).
type MCPSession struct {
	t     testing.TB
	url   string
	token string
	// ID is the session id the gateway gave at initialize.
	ID string
}

// OpenMCPSession initializes a session at url with bearer token, the
// client capabilities caps (a JSON object) and the client's name and
// version, and sends notifications/initialized. It fails t unless the
// gateway answers 200 with a session id.
func OpenMCPSession(t testing.TB, url, token, caps, name, version string) *MCPSession {
	t.Helper()
	s := &MCPSession{t: t, url: url, token: token}
	info, err := json.Marshal(map[string]string{"name": name, "version": version})
	if err != nil {
		t.Fatal(err)
	}
	resp := s.Post(context.Background(), fmt.Sprintf(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":%s,"clientInfo":%s}}`, caps, info))
	s.ID = resp.Header.Get("Mcp-Session-Id")
	Drain(resp)
	if resp.StatusCode != http.StatusOK || s.ID == "" {
		t.Fatalf("initialize at %s: %s, session %q", url, resp.Status, s.ID)
	}
	Drain(s.Post(context.Background(), `{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	return s
}

// Post sends body (a JSON-RPC message) in the session and returns the
// response, whatever its status; the caller closes its body.
func (s *MCPSession) Post(ctx context.Context, body string) *http.Response {
	s.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if s.ID != "" {
		req.Header.Set("Mcp-Session-Id", s.ID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp
}

// Drain reads resp's body to its end and closes it.
func Drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}
