package main

import (
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"

	"github.com/airlock-gate/airlock/services/shared/config"
)

// headerTimeout is how long a client may take to send a request's headers.
const headerTimeout = 10 * time.Second

// newHTTPServer is the server every airlock process serves HTTP with,
// bounded against clients that connect and never finish a request, or never
// read its answer (any local process in dev, anyone who reaches the port in
// production): the headers must arrive within headerTimeout and the whole
// request within http.read_timeout, each write of an answer must reach the
// client within http.write_timeout, and an idle kept-alive connection is
// closed after http.idle_timeout. Neither bounds how long an answer takes:
// the server lifts the read deadline once the body is read, and the write
// deadline is set afresh at each write, so live feeds, long-polls and MCP
// calls waiting for a person answer for as long as they need.
func newHTTPServer(cfg config.HTTP, h http.Handler) *http.Server {
	return &http.Server{
		Handler:           writeDeadline(cfg.WriteTimeout, h),
		ReadHeaderTimeout: min(headerTimeout, cfg.ReadTimeout),
		ReadTimeout:       cfg.ReadTimeout,
		IdleTimeout:       cfg.IdleTimeout,
	}
}

// serveHTTP serves srv on ln, holding at most maxConns connections at once
// (http.max_connections): past it a new connection waits to be accepted.
func serveHTTP(srv *http.Server, ln net.Listener, maxConns int) error {
	return srv.Serve(netutil.LimitListener(ln, maxConns))
}

// writeDeadline gives each write of an answer timeout to reach the client.
// http.Server's WriteTimeout cannot: it bounds the whole answer from the
// request's start, which would end every feed and long-poll. A client that
// stops reading (or pipelines requests and reads none of the answers) makes
// a write wait for room in its socket: past timeout the write fails and the
// connection closes, instead of holding it for as long as the client likes.
func writeDeadline(timeout time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		dw := &deadlineWriter{ResponseWriter: w, rc: rc, timeout: timeout}
		_ = rc.SetWriteDeadline(time.Time{}) // a kept-alive connection's last answer set one
		next.ServeHTTP(dw, r)
		dw.arm() // what the server writes after the handler (the buffered rest) too
	})
}

// deadlineWriter sets its connection's write deadline before each write
// and flush.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (d *deadlineWriter) arm() { _ = d.rc.SetWriteDeadline(time.Now().Add(d.timeout)) }

func (d *deadlineWriter) Write(p []byte) (int, error) {
	d.arm()
	return d.ResponseWriter.Write(p)
}

// FlushError is what http.ResponseController.Flush calls.
func (d *deadlineWriter) FlushError() error {
	d.arm()
	return d.rc.Flush()
}

// Flush serves handlers that assert http.Flusher (live feeds, MCP streams).
func (d *deadlineWriter) Flush() { _ = d.FlushError() }

// Unwrap lets http.ResponseController reach the connection's writer.
func (d *deadlineWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }
