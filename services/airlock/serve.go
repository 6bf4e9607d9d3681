package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
)

func newServeCmd(g *globals) *cobra.Command {
	var httpAddr string
	var connectWait time.Duration
	cmd := &cobra.Command{
		Use:   "serve SERVICE...",
		Short: "Run one or more services against an external NATS server or cluster",
		Long: "Runs the named services (" + strings.Join(serviceNames(), ", ") + `) against the NATS
given by --nats or nats.url, with /healthz and /metrics on --http. Run as many
replicas as you like: they share durable consumers and KV state. Each service
runs with its own NATS user (nats.nkey_seed_file), which may not create
streams: run ` + "`airlock provision`" + ` once with administrator credentials first.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, names []string) error {
			cfg, err := g.load()
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("http") {
				cfg.HTTP.Addr = httpAddr
			}
			d := dialer{Who: "airlock serve", For: " for " + strings.Join(names, ", "), Whose: "the services'",
				FixCredential:  "configure the NATS user they run as (nats.nkey_seed_file or nats.credentials; `airlock nats keys DIR` makes one per service)",
				FixUnreachable: "start the NATS server airlock runs on and run `airlock serve` again, or point --nats (nats.url) at it"}
			return serveServices(cmd.Context(), g, cfg, names, connectWait, cmd.ErrOrStderr(), d, func(log *slog.Logger, addr string) {
				log.Info("serving", "services", names, "nats", bus.Redact(cfg.NATS.URL), "http", addr)
			})
		},
	}
	cmd.Flags().StringVar(&httpAddr, "http", "127.0.0.1:8080", "address for /healthz and /metrics (and the console if served)")
	cmd.Flags().DurationVar(&connectWait, "connect-wait", 30*time.Second, "how long to keep trying to reach NATS, and its JetStream to answer, before giving up")
	return cmd
}

// serveServices runs the named services in this process, with the HTTP
// server (health, metrics, and whatever the services serve) on
// cfg.HTTP.Addr, until ctx ends, then drains. ready is told the address
// once the services are built. It connects as d, saying so on stderr, and
// gives up after connectWait, as it does building a service while
// JetStream does not answer (buildServices).
func serveServices(ctx context.Context, g *globals, cfg config.Config, names []string, connectWait time.Duration, stderr io.Writer, d dialer, ready func(log *slog.Logger, addr string)) error {
	log, err := g.logger(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.HTTP.Addr)
	if err != nil {
		return httpListenError(cfg.HTTP.Addr, err)
	}
	deps, err := connectSaying(ctx, cfg, log, "airlock-"+strings.Join(names, "-"), connectWait, stderr, d)
	if err != nil {
		ln.Close()
		return err
	}
	services, err := buildServices(ctx, deps, names, connectWait)
	if err != nil {
		ln.Close()
		return err
	}
	ready(log, ln.Addr().String())
	return run(ctx, deps, services, newHTTP(deps, names, services...), ln)
}

// httpListenError says why the HTTP address (--http, http.addr) cannot be
// listened on, and what to do.
func httpListenError(addr string, err error) error {
	if _, _, e := net.SplitHostPort(addr); e != nil {
		return fmt.Errorf("the HTTP address %q (--http, http.addr) is not an address to listen on: give HOST:PORT, such as 127.0.0.1:8080", addr)
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("something already listens on %s (another airlock?): stop it, or pick another address with --http", addr)
	}
	return fmt.Errorf("listen on %s: %w (pick another address with --http)", addr, err)
}
