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
// bounded against clients that connect and never finish a request (any
// local process in dev, anyone who reaches the port in production): the
// headers must arrive within headerTimeout and the whole request within
// http.read_timeout, and an idle kept-alive connection is closed after
// http.idle_timeout. The read deadline ends with the request: the server
// lifts it once the body is read, so live feeds, long-polls and MCP calls
// waiting for a person answer for as long as they need (no write timeout).
func newHTTPServer(cfg config.HTTP, h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: min(headerTimeout, cfg.ReadTimeout),
		ReadTimeout:       cfg.ReadTimeout,
		IdleTimeout:       cfg.IdleTimeout,
	}
}

// serveHTTP serves srv on ln, holding at most max connections at once
// (http.max_connections): past it a new connection waits to be accepted.
func serveHTTP(srv *http.Server, ln net.Listener, max int) error {
	return srv.Serve(netutil.LimitListener(ln, max))
}
