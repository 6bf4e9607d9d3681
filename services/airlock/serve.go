package main

import (
	"fmt"
	"net"
	"strings"

	"github.com/spf13/cobra"

	"github.com/airlock-gate/airlock/services/shared/bus"
)

func newServeCmd(g *globals) *cobra.Command {
	var httpAddr string
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
			log, err := g.logger(cfg)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", cfg.HTTP.Addr)
			if err != nil {
				return fmt.Errorf("listen on %s: %w (pick another address with --http)", cfg.HTTP.Addr, err)
			}
			deps, err := connect(cmd.Context(), cfg, log, "airlock-"+strings.Join(names, "-"), false)
			if err != nil {
				ln.Close()
				return err
			}
			services, err := buildServices(cmd.Context(), deps, names)
			if err != nil {
				ln.Close()
				return err
			}
			log.Info("serving", "services", names, "nats", bus.Redact(cfg.NATS.URL), "http", ln.Addr().String())
			return run(cmd.Context(), deps, services, newHTTP(deps, names, services...), ln)
		},
	}
	cmd.Flags().StringVar(&httpAddr, "http", "127.0.0.1:8080", "address for /healthz and /metrics (and the console if served)")
	return cmd
}
