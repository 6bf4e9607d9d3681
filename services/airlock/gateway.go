package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/airlock-gate/airlock/services/gateway"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

func newGatewayCmd(g *globals) *cobra.Command {
	var stdio bool
	var endpoint, dataDir, httpAddr string
	var connectWait time.Duration
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "Serve the MCP gateway: any MCP client becomes a gated airlock agent",
		Long: `Serves the endpoints of the gateway section as MCP servers whose tools are the
tool registry's, each call gated by airlock.

Without flags it serves streamable HTTP on --http, one path per endpoint, each
client authenticated by its endpoint's bearer token. With --stdio it serves one
endpoint on stdin/stdout, for clients that launch their servers:

  claude mcp add airlock -- airlock gateway --stdio --endpoint bot

Next to ` + "`airlock dev`" + ` (its data dir, --data) it needs no configuration: it
connects as dev's gateway user and serves dev's default endpoint "bot".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.load()
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("data") {
				cfg.Dev.DataDir = dataDir
			}
			if cmd.Flags().Changed("http") {
				cfg.HTTP.Addr = httpAddr
			}
			if err := nextToDev(&cfg); err != nil {
				return err
			}
			if len(cfg.Gateway.Endpoints) == 0 {
				return fmt.Errorf("no gateway endpoints are configured: add them under gateway.endpoints in the config file (or run next to `airlock dev` with --data DIR)")
			}
			if stdio {
				return runGatewayStdio(cmd.Context(), g, cfg, endpoint, connectWait, cmd.ErrOrStderr())
			}
			return serveGatewayHTTP(cmd.Context(), g, cfg, connectWait, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.BoolVar(&stdio, "stdio", false, "serve one endpoint (--endpoint) on stdin/stdout instead of HTTP")
	f.StringVar(&endpoint, "endpoint", natsauth.FirstAgent, "the endpoint --stdio serves")
	f.StringVar(&dataDir, "data", ".airlock", "data `DIR` of airlock dev, whose gateway credentials are used when none are configured")
	f.StringVar(&httpAddr, "http", "127.0.0.1:8080", "address of the HTTP endpoints, /healthz and /metrics")
	f.DurationVar(&connectWait, "connect-wait", 30*time.Second, "how long to keep trying to reach NATS before giving up")
	return cmd
}

// nextToDev points cfg at `airlock dev`'s gateway user and default endpoint
// when no NATS credentials are configured and dev's data dir has them.
func nextToDev(cfg *config.Config) error {
	if cfg.NATS.NkeySeedFile != "" || cfg.NATS.Credentials != "" {
		return nil
	}
	d := natsauth.Dev{DataDir: cfg.Dev.DataDir}
	if !fileExists(d.SeedFile(natsauth.RoleGateway)) {
		return nil
	}
	d.Apply(cfg, natsauth.RoleGateway)
	return devGatewayEndpoint(cfg, d)
}

// devGatewayEndpoint gives `airlock dev` its default gateway endpoint when
// none is configured: agent bot at /mcp/bot, with a token generated under
// the data dir.
func devGatewayEndpoint(cfg *config.Config, d natsauth.Dev) error {
	if len(cfg.Gateway.Endpoints) > 0 {
		return nil
	}
	tokenFile := d.GatewayTokenFile(natsauth.FirstAgent)
	if _, err := seal.Ensure(tokenFile); err != nil {
		return fmt.Errorf("generate the gateway token %s: %w", tokenFile, err)
	}
	cfg.Gateway.Endpoints = []config.GatewayEndpoint{{Name: natsauth.FirstAgent, Agent: natsauth.FirstAgent, TokenFile: tokenFile}}
	return cfg.ApplyGatewayBindings()
}

// runGatewayStdio serves one endpoint on stdin/stdout. Nothing else may
// write to stdout: logs and what a person reads go to stderr, where the
// MCP client keeps the server's log.
func runGatewayStdio(ctx context.Context, g *globals, cfg config.Config, endpoint string, connectWait time.Duration, stderr io.Writer) error {
	e, ok := cfg.Gateway.Endpoint(endpoint)
	if !ok {
		return fmt.Errorf("no gateway endpoint %q: choose one of %s (--endpoint)", endpoint, strings.Join(cfg.Gateway.Names(), ", "))
	}
	log, err := g.logger(cfg)
	if err != nil {
		return err
	}
	deps, err := connectSaying(ctx, cfg, log, "airlock-gateway-stdio", connectWait, stderr, gatewayDialer(fmt.Sprintf("endpoint %s (agent %s)", e.Name, e.Agent), true))
	if err != nil {
		return err
	}
	defer func() { _ = bus.Drain(deps.NC, cfg.NATS.DrainTimeout) }()
	gw, err := gateway.New(deps)
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- gw.Run(runCtx) }()
	err = gw.ServeStdio(runCtx, endpoint, nil)
	stop()
	if rerr := <-ran; err == nil {
		err = rerr
	}
	return err
}

// dialer is who connects to NATS, in the words a person reads while it
// tries and when it gives up.
type dialer struct {
	// Who starts the line said before the first attempt ("airlock gateway");
	// For ends it (" for endpoint bot (agent bot)").
	Who, For string
	// Whose credential a refusal names ("the gateway's"), and what to do then.
	Whose, FixCredential string
	// FixUnreachable says what to do when nothing answers.
	FixUnreachable string
}

// gatewayDialer is the gateway connecting for what serves ("endpoint
// bot (agent bot)"); stdio: its MCP client starts it again.
func gatewayDialer(serves string, stdio bool) dialer {
	d := dialer{Who: "airlock gateway", For: " for " + serves, Whose: "the gateway's",
		FixCredential:  "run the gateway with the data dir of the `airlock dev` it serves (--data DIR), or configure nats.nkey_seed_file or nats.credentials",
		FixUnreachable: "start airlock (`airlock dev`, or `go tool task up` in its repository) and run `airlock gateway` again, or point --nats at the NATS airlock runs on"}
	if stdio {
		d.FixUnreachable = "start airlock (`airlock dev`, or `go tool task up` in its repository) and let the MCP client start the gateway again, or point --nats at the NATS airlock runs on (`airlock dev` prints the whole stdio command line)"
	}
	return d
}

// connectSaying connects as svc.Connect does, trying for up to wait. It
// says on stderr before the first attempt where it connects and as whom
// (nothing else shows until the connection is made or given up), and
// when it gives up, what to do.
func connectSaying(ctx context.Context, cfg config.Config, log *slog.Logger, name string, wait time.Duration, stderr io.Writer, d dialer) (svc.Deps, error) {
	fmt.Fprintf(stderr, "%s: connecting to NATS at %s %s%s; trying for up to %s\n", d.Who, bus.Redact(cfg.NATS.URL), credentialText(cfg.NATS), d.For, wait)
	deps, err := svc.ConnectWithin(ctx, wait, cfg, log, name, false)
	if err != nil {
		return svc.Deps{}, connectError(ctx, cfg, wait, d, err)
	}
	return deps, nil
}

// credentialText says what a connection presents to NATS.
func credentialText(n config.NATS) string {
	switch {
	case n.NkeySeedFile != "":
		return "with the nkey in " + n.NkeySeedFile
	case n.Credentials != "":
		return "with the credentials in " + n.Credentials
	}
	return "without credentials"
}

// connectError says why d could not reach NATS within wait, and what to
// do. A stop (ctx ended) is not explained.
func connectError(ctx context.Context, cfg config.Config, wait time.Duration, d dialer, err error) error {
	if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrNoServers) && !isAuthError(err) {
		return err // a TLS or credential file problem says already what to do
	}
	cause := err
	if inner := errors.Unwrap(err); inner != nil {
		cause = inner
	}
	url := bus.Redact(cfg.NATS.URL)
	if isAuthError(err) {
		return fmt.Errorf("the NATS server at %s refused %s credential (%v): %s", url, d.Whose, cause, d.FixCredential)
	}
	return fmt.Errorf("cannot reach NATS at %s within %s (%v): %s", url, wait, cause, d.FixUnreachable)
}

// isAuthError reports a NATS server refusing a credential.
func isAuthError(err error) bool {
	return errors.Is(err, nats.ErrAuthorization)
}

// serveGatewayHTTP is `airlock serve gateway` with the gateway's defaults.
func serveGatewayHTTP(ctx context.Context, g *globals, cfg config.Config, connectWait time.Duration, stderr io.Writer) error {
	d := gatewayDialer("endpoints "+strings.Join(cfg.Gateway.Names(), ", "), false)
	return serveServices(ctx, g, cfg, []string{"gateway"}, connectWait, stderr, d, func(log *slog.Logger, addr string) {
		for _, e := range cfg.Gateway.Endpoints {
			log.Info("gateway endpoint", "endpoint", e.Name, "url", "http://"+addr+e.HTTPPath(), "agent", e.Agent)
		}
	})
}

// gatewayText is what `airlock dev` prints about the gateway: each
// endpoint's URL and a client configuration ready to paste.
func gatewayText(cfg config.Config, httpAddr string) string {
	var b strings.Builder
	self := "airlock"
	if exe, err := os.Executable(); err == nil && !strings.Contains(exe, "go-build") { // not `go run`'s temporary build
		self = exe
	}
	data, _ := filepath.Abs(cfg.Dev.DataDir)
	for _, e := range cfg.Gateway.Endpoints {
		url := "http://" + httpAddr + e.HTTPPath()
		if e.TokenFile == "" && e.Token == "" {
			fmt.Fprintf(&b, "  MCP       endpoint %s (agent %s): stdio only\n", e.Name, e.Agent)
		} else {
			tokenFile, _ := filepath.Abs(e.TokenFile)
			fmt.Fprintf(&b, "  MCP       %s   (gateway endpoint %s, agent %s)\n", url, e.Name, e.Agent)
			if e.TokenFile != "" {
				fmt.Fprintf(&b, "            Claude Code: claude mcp add --transport http airlock-%s %s --header \"Authorization: Bearer $(cat %s)\"\n", e.Name, url, tokenFile)
			}
			tok := e.Token
			if tok == "" {
				if raw, err := os.ReadFile(e.TokenFile); err == nil {
					tok = strings.TrimSpace(string(raw))
				}
			}
			snippet, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"airlock-" + e.Name: map[string]any{
				"type": "http", "url": url, "headers": map[string]string{"Authorization": "Bearer " + tok}}}})
			fmt.Fprintf(&b, "            .mcp.json:   %s   (holds the token: keep it out of version control)\n", snippet)
		}
		fmt.Fprintf(&b, "            stdio:       claude mcp add airlock-%s -- %s gateway --stdio --endpoint %s --data %s --nats %s\n", e.Name, self, e.Name, data, cfg.NATS.URL)
	}
	return b.String()
}
