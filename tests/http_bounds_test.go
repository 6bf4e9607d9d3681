package tests

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAClientCannotHoldTheHTTPPortForEver attacks `airlock dev`'s HTTP port
// as any local process can: a request whose body stops after one byte
// (with an agent's token and without) is cut off at http.read_timeout
// instead of holding its connection and goroutine for ever, and
// connections that never finish their headers fill at most
// http.max_connections, are cut off in turn, and leave the console
// serving again; so do connections that ask for answers and never read them.
func TestAClientCannotHoldTheHTTPPortForEver(t *testing.T) {
	t.Parallel() // it mostly waits out the server's timeouts
	const readTimeout, writeTimeout = 3 * time.Second, 2 * time.Second
	const maxConns = 32
	cfg := filepath.Join(t.TempDir(), "airlock.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("http:\n  read_timeout: %s\n  write_timeout: %s\n  max_connections: %d\n", readTimeout, writeTimeout, maxConns)), 0o600); err != nil {
		t.Fatal(err)
	}
	dev := startDev(t, filepath.Join(t.TempDir(), "data"), 0, "", "AIRLOCK_CONFIG="+cfg)
	admin := adminToken(t, dev)
	token := agentToken(t, dev, admin, "bot")
	addr := strings.TrimPrefix(dev.HTTPURL, "http://")

	for _, tc := range []struct{ name, auth string }{
		{"without_a_token", ""},
		{"with_an_agents_token", "Authorization: Bearer " + token + "\r\n"},
	} {
		t.Run("a_body_that_stops_after_one_byte_"+tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "POST /api/v1/calls HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", addr, tc.auth)
			start := time.Now()
			_ = conn.SetReadDeadline(start.Add(readTimeout + 10*time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err == nil {
				resp.Body.Close()
			} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("the connection was still held %s after its body stopped (http.read_timeout %s)", time.Since(start).Round(time.Second), readTimeout)
			}
			// An answer or the connection closed: either way it is let go.
		})
	}

	t.Run("connections_that_never_finish_their_headers", func(t *testing.T) {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for range maxConns + 8 {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n", addr) // no blank line: the headers never end
			held = append(held, c)
		}
		healthz := func(timeout time.Duration) error {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, dev.HTTPURL+"/healthz", nil)
			resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
			if err == nil {
				resp.Body.Close()
			}
			return err
		}
		if err := healthz(time.Second); err == nil {
			t.Fatalf("/healthz was served while %d connections that never finish their headers were open (http.max_connections %d)", len(held), maxConns)
		}
		// The server cuts them off within the header timeout; the console serves again.
		if err := healthz(readTimeout*3 + 5*time.Second); err != nil {
			t.Fatalf("/healthz once the held connections were cut off: %v", err)
		}
	})

	t.Run("connections_that_never_read_their_answers", func(t *testing.T) {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		ask := strings.Repeat(fmt.Sprintf("GET /api/v1/openapi.json HTTP/1.1\r\nHost: %s\r\n\r\n", addr), 100)
		for range maxConns + 8 {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			_ = c.(*net.TCPConn).SetReadBuffer(1024)
			go fmt.Fprint(c, ask) // 100 answers asked for, none read
			held = append(held, c)
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout*5+10*time.Second)
		defer cancel()
		for {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, dev.HTTPURL+"/healthz", nil)
			resp, err := (&http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
			if err == nil {
				resp.Body.Close()
				t.Logf("/healthz answered %s after %d connections stopped reading (http.write_timeout %s)", time.Since(start).Round(100*time.Millisecond), len(held), writeTimeout)
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("/healthz still unanswered %s after %d connections stopped reading their answers (http.write_timeout %s): %v", time.Since(start).Round(time.Second), len(held), writeTimeout, err)
			}
		}
	})
}
