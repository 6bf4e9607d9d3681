package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/config"
)

// TestTheHTTPServerCutsOffASlowBodyButNotALongAnswer: a body trickled past
// http.read_timeout ends the request, while a handler that answers long
// after its body arrived (an MCP call waiting for a person, a feed, a
// long-poll) keeps its request alive.
func TestTheHTTPServerCutsOffASlowBodyButNotALongAnswer(t *testing.T) {
	const bodyTimeout = 300 * time.Millisecond
	const answerAfter = 3 * bodyTimeout
	cfg := config.Default().HTTP
	cfg.ReadTimeout = bodyTimeout
	bodyErr := make(chan error, 4)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			bodyErr <- err
			http.Error(w, "body: "+err.Error(), http.StatusRequestTimeout)
			return
		}
		select {
		case <-time.After(answerAfter):
			fmt.Fprint(w, "answered")
		case <-r.Context().Done():
			bodyErr <- fmt.Errorf("the request was canceled while its handler worked: %w", r.Context().Err())
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(cfg, h)
	go func() { _ = serveHTTP(srv, ln, 8) }()
	t.Cleanup(func() { _ = srv.Close() })
	url := "http://" + ln.Addr().String()

	for _, tc := range []struct{ name, method, body string }{
		{"a_post_whose_body_came_at_once", http.MethodPost, `{"a":1}`},
		{"a_get_without_a_body", http.MethodGet, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, url, strings.NewReader(tc.body))
			if tc.body == "" {
				req.Body = http.NoBody
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(got) != "answered" {
				t.Fatalf("a handler answering %s after the body was cut off: %d %q (%v)", answerAfter, resp.StatusCode, got, drain(bodyErr))
			}
		})
	}
	t.Run("a_body_that_stops_coming", func(t *testing.T) {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
		_ = conn.SetReadDeadline(time.Now().Add(10 * bodyTimeout))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer within %s to a body that stopped after one byte (http.read_timeout is %s): %v", 10*bodyTimeout, bodyTimeout, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("a body that stopped coming: %d, want the handler's %d", resp.StatusCode, http.StatusRequestTimeout)
		}
	})
}

// TestTheHTTPServerHoldsAtMostMaxConnections: past http.max_connections a
// new connection is not served until one ends.
func TestTheHTTPServerHoldsAtMostMaxConnections(t *testing.T) {
	const max = 4
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(config.Default().HTTP, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	go func() { _ = serveHTTP(srv, ln, max) }()
	t.Cleanup(func() { _ = srv.Close() })
	var held []net.Conn
	for range max {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprint(c, "GET / HTTP/1.1\r\nHost: x\r\n") // headers never finished
		held = append(held, c)
	}
	get := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ln.Addr().String(), nil)
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(time.Second); err == nil {
		t.Fatalf("a request was served while %d connections (http.max_connections) were held", max)
	}
	held[0].Close()
	if err := get(5 * time.Second); err != nil {
		t.Fatalf("a request once one of the held connections closed: %v", err)
	}
	for _, c := range held[1:] {
		c.Close()
	}
}

func drain(errs chan error) []error {
	var out []error
	for {
		select {
		case err := <-errs:
			out = append(out, err)
		default:
			return out
		}
	}
}

// TestTheHTTPServerCutsOffAClientThatStopsReading: a client that sends a
// request and never reads the answer makes the server's write wait for
// room in its socket; past http.write_timeout the write fails and the
// connection goes, while a stream whose writes come further apart than that
// (a feed, an MCP call waiting for a person) goes on, each write having the
// timeout afresh.
func TestTheHTTPServerCutsOffAClientThatStopsReading(t *testing.T) {
	const writeTimeout = 300 * time.Millisecond
	cfg := config.Default().HTTP
	cfg.WriteTimeout = writeTimeout
	writeErr := make(chan error, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 64<<10)
		for range 1024 { // 64 MiB: more than any socket buffers
			if _, err := w.Write(chunk); err != nil {
				writeErr <- err
				return
			}
		}
		writeErr <- nil
	})
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		for i := range 2 {
			if i > 0 {
				time.Sleep(3 * writeTimeout)
			}
			fmt.Fprintf(w, "event %d\n", i)
			w.(http.Flusher).Flush()
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(cfg, mux)
	go func() { _ = serveHTTP(srv, ln, 8) }()
	t.Cleanup(func() { _ = srv.Close() })

	t.Run("a_client_that_never_reads", func(t *testing.T) {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.(*net.TCPConn).SetReadBuffer(1024)
		fmt.Fprint(conn, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
		select {
		case err := <-writeErr:
			if err == nil {
				t.Fatal("64 MiB were written to a client that read none of it")
			}
		case <-time.After(20 * writeTimeout):
			t.Fatalf("the answer's write still waited %s for a client that never reads (http.write_timeout %s)", 20*writeTimeout, writeTimeout)
		}
	})
	t.Run("a_stream_whose_writes_are_further_apart_than_the_timeout", func(t *testing.T) {
		resp, err := http.Get("http://" + ln.Addr().String() + "/stream")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		if err != nil || string(got) != "event 0\nevent 1\n" {
			t.Fatalf("a stream writing every %s under http.write_timeout %s: %q, %v", 3*writeTimeout, writeTimeout, got, err)
		}
	})
}
