package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-gate/airlock/services/audit"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/embedded"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/svc"
	"github.com/airlock-gate/airlock/services/shared/violation"
)

func newDevCmd(g *globals) *cobra.Command {
	var dataDir, httpAddr, heapProfile string
	var natsPort int
	var clickhouseLocal bool
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run everything in one process: embedded NATS, every service, the console",
		Long: `Starts an embedded NATS server with JetStream on a file store under --data,
provisions the events stream and KV buckets, and runs every airlock service
and the HTTP server (console, REST API, /healthz, /metrics). Ctrl-C drains and
exits; starting again keeps all data.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.load()
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("data") {
				cfg.Dev.DataDir = dataDir
			}
			if cmd.Flags().Changed("nats-port") {
				cfg.Dev.NATSPort = natsPort
			}
			if cmd.Flags().Changed("http") {
				cfg.HTTP.Addr = httpAddr
			}
			if cmd.Flags().Changed("clickhouse-local") {
				cfg.ClickHouse.StartLocal = clickhouseLocal
			}
			if heapProfile != "" {
				go heapProfileOnSignal(cmd.Context(), heapProfile, cmd.ErrOrStderr())
			}
			err = runDev(cmd.Context(), g, cfg)
			if err != nil && cmd.Context().Err() != nil && errors.Is(err, context.Canceled) {
				// Ctrl-C while starting is a stop like any other, not a
				// failure to report as "create user admin: context canceled".
				fmt.Fprintln(os.Stdout, "airlock dev stopped before it had started (Ctrl-C); nothing is lost: run it again to start")
				return nil
			}
			return err
		},
	}
	cmd.Flags().StringVar(&dataDir, "data", ".airlock", "data directory (NATS store, tokens, sandbox)")
	cmd.Flags().IntVar(&natsPort, "nats-port", 4222, "port of the embedded NATS server")
	cmd.Flags().StringVar(&httpAddr, "http", "127.0.0.1:8080", "address of the console, REST API, /healthz and /metrics")
	cmd.Flags().StringVar(&heapProfile, "heap-profile", "", "on SIGUSR1, write a heap profile of the running process to this file (what holds memory: go tool pprof -sample_index=inuse_space FILE)")
	cmd.Flags().BoolVar(&clickhouseLocal, "clickhouse-local", false, "start a private clickhouse-server under --data for the audit trail (needs clickhouse-server installed)")
	return cmd
}

// devStartWait is how long airlock dev keeps building a service whose
// JetStream requests go unanswered (buildServices): its own server answers
// at once unless the machine is very busy.
const devStartWait = 30 * time.Second

func runDev(ctx context.Context, g *globals, cfg config.Config) error {
	log, err := g.logger(cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.Dev.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir %s: %w", cfg.Dev.DataDir, err)
	}
	unlock, err := lockDataDir(natsauth.Dev{DataDir: cfg.Dev.DataDir}, log)
	if err != nil {
		return err
	}
	defer unlock()
	interval, _ := config.ParseSync(cfg.Dev.Sync) // validated by Load
	// Secure by default: the embedded server takes only the credentials
	// generated here, with the same accounts and permissions as production.
	creds := natsauth.Dev{DataDir: cfg.Dev.DataDir}
	// The agents' connection bounds must fit under the bound the embedded
	// server really keeps, which the open file limit may lower.
	if bound := embedded.ConnectionBound(cfg.Limits.BusConnections); bound < cfg.Limits.BusConnections {
		log.Warn("the process's open file limit lowers limits.bus_connections; raise it (ulimit -n) to admit more agents",
			"configured", cfg.Limits.BusConnections, "kept", bound)
		cfg.Limits.BusConnections = bound
	}
	if err := creds.Ensure(cfg, fmt.Sprintf("nats://%s:%d", cfg.Dev.NATSHost, cfg.Dev.NATSPort)); err != nil {
		return fmt.Errorf("generate airlock dev's credentials under %s: %w", cfg.Dev.DataDir, err)
	}
	// Every permission violation on the embedded server is recorded as an
	// unauthorized_attempt (and logged), naming the credential the server
	// authenticated; violations wait in the recorder's queue until the
	// services' connection is up.
	var ns *embedded.Server
	violations := violation.NewRecorder(violation.DefaultLimits, func(cid uint64) (violation.Identity, bool) {
		acc, user, ok := ns.Who(cid)
		return violation.Identity{Account: acc, User: user}, ok
	}, creds.Users, log)
	ns, err = embedded.Start(embedded.Options{
		Host: cfg.Dev.NATSHost, Port: cfg.Dev.NATSPort,
		StoreDir:   filepath.Join(cfg.Dev.DataDir, "nats"),
		SyncAlways: interval == 0, SyncInterval: interval,
		ConfigFile: creds.ConfigFile(),
		Logger:     violation.NewLogger(ctx, violations, log),
	})
	if err != nil {
		return err
	}
	defer ns.Stop()
	if err := markLoaded(creds); err != nil {
		return err
	}
	defer os.Remove(creds.LoadedFile())
	// The embedded server listens on loopback without TLS: nats.tls (for
	// an external server, as `airlock serve` and the CLI reach it) would
	// make every connection to it fail.
	cfg.NATS.URL, cfg.NATS.TLS = ns.URL(), config.TLS{}
	if err := os.WriteFile(creds.URLFile(), []byte(ns.URL()+"\n"), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", creds.URLFile(), err)
	}
	defer os.Remove(creds.URLFile())
	moved, skipped := creds.PointAgentsAt(ns.URL())
	if len(moved) > 0 {
		log.Info("agent credentials now name where this dev's NATS listens", "agents", moved, "url", ns.URL())
	}
	for _, err := range skipped {
		log.Warn("an agent credential could not be pointed at where this dev's NATS listens; fix the file, or give its agent --nats", "err", err, "url", ns.URL())
	}
	creds.Apply(&cfg, natsauth.RoleDev)
	if err := devGatewayEndpoint(&cfg, creds); err != nil {
		return err
	}

	var localCH *audit.Local
	auditText := "  audit     read from the stream (no ClickHouse configured; --clickhouse-local starts one)\n"
	switch {
	case cfg.ClickHouse.DSN != "":
		auditText = "  audit     " + cfg.ClickHouse.DSN + "\n"
	case cfg.ClickHouse.StartLocal:
		// The audit CLI finds the local ClickHouse in localDSNFile while dev
		// runs (the address only: it reads the auditor's password from its
		// own file); it is removed while the server is down.
		chLocal, err := audit.SuperviseLocal(ctx, cfg.Dev.DataDir, log, func(base string) {
			if base == "" {
				_ = os.Remove(localDSNFile(cfg.Dev.DataDir))
				return
			}
			if err := os.WriteFile(localDSNFile(cfg.Dev.DataDir), []byte(base+"\n"), 0o600); err != nil {
				log.Warn("write the local ClickHouse's address for the audit CLI", "file", localDSNFile(cfg.Dev.DataDir), "err", err)
			}
		})
		if err != nil {
			return fmt.Errorf("start a local ClickHouse: %w (install it with `apt-get install clickhouse-server`, or run without --clickhouse-local)", err)
		}
		defer chLocal.Stop()
		defer os.Remove(localDSNFile(cfg.Dev.DataDir))
		localCH = chLocal
		dsn, _ := chLocal.Base()
		// The sink writes as the local writer; nobody logs in without a password.
		if cfg.ClickHouse.DSN, err = audit.LocalDSN(cfg.Dev.DataDir, dsn, audit.LocalWriter); err != nil {
			return err
		}
		// The console's audit pages read as the read-only auditor.
		if cfg.ClickHouse.ReaderDSN, err = audit.LocalDSN(cfg.Dev.DataDir, dsn, audit.LocalAuditor); err != nil {
			return err
		}
		auditText = "  audit     " + dsn + "   (local clickhouse-server under " + filepath.Join(cfg.Dev.DataDir, "clickhouse") +
			"; users " + audit.LocalWriter + " and read-only " + audit.LocalAuditor + ", passwords in " + filepath.Dir(audit.LocalPasswordFile(cfg.Dev.DataDir, "")) + "/*.password)\n"
	}

	// The audit chain's key lives beside the data, readable by this user
	// only; ClickHouse never sees it. An existing key is kept.
	if cfg.Audit.Key == "" && cfg.Audit.KeyFile == "" {
		cfg.Audit.KeyFile = filepath.Join(cfg.Dev.DataDir, "audit.key")
		if _, err := audit.EnsureKeyFile(cfg.Audit.KeyFile); err != nil {
			return err
		}
	}

	// One-tap mail links are MAC'd with a key the mailer and the console
	// share: made once beside dev's other keys when the links are on.
	if o := &cfg.Email.OneTap; o.Enabled && o.Key == "" && o.KeyFile == "" {
		o.KeyFile = creds.OneTapKeyFile()
		if _, err := seal.Ensure(o.KeyFile); err != nil {
			return fmt.Errorf("generate the one-tap link key: %w", err)
		}
	}

	ln, err := net.Listen("tcp", cfg.HTTP.Addr)
	if err != nil {
		return httpListenError(cfg.HTTP.Addr, err)
	}
	listening := ln.Addr().(*net.TCPAddr)
	if listening.IP.IsUnspecified() {
		// "--http :8181" reads like a port; it opens the console to the network.
		log.Warn("the console listens on every network interface: anyone who can reach this machine reaches its sign-in page, REST API and MCP endpoints; give --http 127.0.0.1:PORT to keep it to this machine", "addr", ln.Addr().String())
	}
	if cfg.HTTP.PublicURL == config.Default().HTTP.PublicURL {
		// Links to the console (the gateway's URL elicitations, Slack cards)
		// point where this process listens (this machine's loopback when it
		// listens on every interface: [::] is no address to open).
		host := listening.IP.String()
		if listening.IP.IsUnspecified() {
			host = "127.0.0.1"
		}
		cfg.HTTP.PublicURL = "http://" + net.JoinHostPort(host, strconv.Itoa(listening.Port))
	}
	if err := os.WriteFile(creds.ConsoleURLFile(), []byte(cfg.HTTP.PublicURL+"\n"), 0o600); err != nil {
		ln.Close()
		return fmt.Errorf("write %s: %w", creds.ConsoleURLFile(), err)
	}
	defer os.Remove(creds.ConsoleURLFile())

	deps, err := connectDeps(ctx, cfg, log, "airlock-dev")
	if err != nil {
		ln.Close()
		return err
	}
	if localCH != nil {
		// The sink, the console and /healthz ask where the local ClickHouse
		// is now: never its old address once it has exited.
		deps.ClickHouse = func(reader bool) (string, error) {
			if reader {
				return localCH.DSN(audit.LocalAuditor)
			}
			return localCH.DSN(audit.LocalWriter)
		}
	}
	go violations.Run(ctx, violation.StoreWith(deps.Publisher("nats")))
	consoleText, err := bootstrapConsole(ctx, &deps, cfg.Dev.DataDir, ln.Addr().String())
	if err != nil {
		ln.Close()
		return err
	}
	names := serviceNames()
	services, err := buildServices(ctx, deps, slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == "gateway" }), devStartWait)
	if err != nil {
		ln.Close()
		return err
	}
	// The gateway is a front-end: it runs as its own NATS user, as in production.
	gwCfg := cfg
	creds.Apply(&gwCfg, natsauth.RoleGateway)
	gwDeps, err := svc.Connect(ctx, gwCfg, log, "airlock-dev-gateway", false)
	if err != nil {
		ln.Close()
		return err
	}
	defer func() { _ = bus.Drain(gwDeps.NC, cfg.NATS.DrainTimeout) }()
	gw, err := buildServices(ctx, gwDeps, []string{"gateway"}, devStartWait)
	if err != nil {
		ln.Close()
		return err
	}
	services = append(services, gw...)
	e := newHTTP(deps, names, services...)
	agents, err := natsauth.AgentCredentials(creds.AgentsDir())
	if err != nil {
		ln.Close()
		return err
	}
	var agentNames []string
	for _, a := range agents {
		agentNames = append(agentNames, a.Agent)
	}
	agentLines := agentBannerLines(agentNames, creds.CredentialFile)
	fmt.Fprintf(os.Stdout, `airlock dev is running
  NATS      %s   (JetStream store %s, fsync %s; credentials required)
  HTTP      http://%s   (/healthz readiness, /livez liveness, /metrics)
  services  %s
  data      %s
%s%s%s            add an agent: airlock agents add NAME%s   (its credential lands in %s)
%sPress Ctrl-C to stop.
`, ns.URL(), filepath.Join(cfg.Dev.DataDir, "nats"), config.SyncText(cfg.Dev.Sync), ln.Addr(), strings.Join(names, ", "), cfg.Dev.DataDir,
		auditText, consoleText, agentLines, dataArg(cfg.Dev.DataDir), creds.AgentsDir(), gatewayText(cfg, ln.Addr().String()))
	go followAgents(ctx, creds, cfg, ns, log)
	err = run(ctx, deps, services, e, ln)
	fmt.Fprintln(os.Stdout, "airlock dev stopped")
	return err
}

// followAgents re-renders the embedded server's accounts whenever an agent
// credential is added to or removed from the agents dir (`airlock agents
// add`), and reloads the server: no restart needed.
func followAgents(ctx context.Context, creds natsauth.Dev, cfg config.Config, ns *embedded.Server, log *slog.Logger) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		changed, err := creds.Render(cfg)
		if err != nil {
			log.Error("the agents' NATS accounts could not be rendered; the server keeps the previous ones", "dir", creds.AgentsDir(), "err", err)
			continue
		}
		if !changed {
			continue
		}
		if err := ns.Reload(); err != nil {
			log.Error("reloading the NATS accounts failed", "err", err)
			continue
		}
		if err := markLoaded(creds); err != nil {
			log.Error("the agents were reloaded, but not recorded: `airlock agents add` may be refused a few times before it is accepted", "err", err)
		}
		log.Info("agents reloaded", "dir", creds.AgentsDir())
	}
}

// agentBannerLines are the banner's lines naming each agent and its
// credential file, the files lined up however long a name is.
func agentBannerLines(agents []string, credentialFile func(string) string) string {
	width := 10
	for _, a := range agents {
		width = max(width, len(a))
	}
	var b strings.Builder
	for _, a := range agents {
		fmt.Fprintf(&b, "  agent     %-*s %s\n", width, a, credentialFile(a))
	}
	return b.String()
}

// markLoaded records the accounts configuration the server has just loaded
// (only followAgents writes it while dev runs, so what is there now is what
// was loaded).
func markLoaded(creds natsauth.Dev) error {
	conf, err := os.ReadFile(creds.ConfigFile())
	if err != nil {
		return fmt.Errorf("read the NATS accounts loaded: %w", err)
	}
	return creds.MarkLoaded(conf)
}

// connectDeps connects, provisions and returns what services are built from.
func connectDeps(ctx context.Context, cfg config.Config, log *slog.Logger, name string) (svc.Deps, error) {
	return svc.Connect(ctx, cfg, log, name, true)
}

// localDSNFile holds the DSN of the ClickHouse `airlock dev --clickhouse-local`
// started, while it runs.
func localDSNFile(dataDir string) string { return filepath.Join(dataDir, "clickhouse.dsn") }

// lockDataDir takes the data dir for this process, or says which `airlock
// dev` has it. Two on one dir would share one JetStream store (two servers
// writing the same files) and the second would remove the first's nats.url
// and console.url when it stops. The lock is the kernel's (flock), so a
// killed process leaves none behind; the file itself stays, holding the
// last holder's pid.
func lockDataDir(d natsauth.Dev, log *slog.Logger) (unlock func(), err error) {
	f, err := os.OpenFile(d.LockFile(), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", d.LockFile(), err)
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	// A CLI command checking that a dev runs (devHoldsLock) holds a shared
	// lock for a moment: a few tries keep it from passing for a dev.
	for try := 0; try < 10 && errors.Is(err, syscall.EWOULDBLOCK); try++ {
		time.Sleep(20 * time.Millisecond)
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err != nil {
		holder, _ := io.ReadAll(f)
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			// A file system without locks (some network mounts) must not
			// keep dev from starting: it runs unguarded, as it always did.
			log.Warn("the data dir cannot be locked: a second airlock dev on it would not be refused", "file", d.LockFile(), "err", err)
			return func() {}, nil
		}
		who := "another airlock dev"
		if pid := strings.TrimSpace(string(holder)); pid != "" {
			who += " (pid " + pid + ")"
		}
		return nil, fmt.Errorf("%s already runs with the data dir %s: use that one, stop it first (Ctrl-C in its terminal), or run this one with its own --data DIR, --nats-port and --http", who, d.DataDir)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	// No dev held the lock, so the addresses a dev writes while it runs are
	// left by one that ended without its clean-up (killed): the ports they
	// name may be anyone's now, and this dev may not write them all again
	// (clickhouse.dsn only with --clickhouse-local), or not at once.
	for _, stale := range []string{d.URLFile(), d.ConsoleURLFile(), localDSNFile(d.DataDir)} {
		if err := os.Remove(stale); err == nil {
			log.Info("removed an address file an airlock dev that did not stop cleanly left", "file", stale)
		} else if !errors.Is(err, fs.ErrNotExist) {
			f.Close()
			return nil, fmt.Errorf("remove %s, left by an airlock dev that did not stop cleanly: %w", stale, err)
		}
	}
	return func() { f.Close() }, nil
}
