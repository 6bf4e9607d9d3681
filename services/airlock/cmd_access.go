package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/console"
	"github.com/airlock-gate/airlock/services/shared/lastevents"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// newProvisionCmd creates or updates the streams and buckets. Services run
// with least-privilege NATS users that cannot; an operator runs this once
// (and after a configuration change) with administrator credentials.
func newProvisionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "provision",
		Short: "Create or update the streams and KV buckets (needs administrator NATS credentials)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.load()
			if err != nil {
				return err
			}
			log, err := g.logger(cfg)
			if err != nil {
				return err
			}
			deps, err := svc.Connect(cmd.Context(), cfg, log, "airlock-provision", true)
			if err != nil {
				return err
			}
			deps.NC.Close()
			fmt.Println("streams and buckets are provisioned")
			return nil
		},
	}
}

func newAgentsCmd(g *globals) *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "agents",
		Short: "Manage the agents of `airlock dev` (credentials under its data dir)",
		Long: `Each agent authenticates with its own credential (an nkey) and may only
submit and follow its own calls. ` + "`airlock dev`" + ` picks up added agents
within a second, without a restart. For a production NATS, render the
accounts with ` + "`airlock nats config`" + ` instead.`,
	}
	cmd.PersistentFlags().StringVar(&dataDir, "data", "", "data `DIR` of airlock dev (default dev.data_dir / AIRLOCK_DEV_DATA_DIR, .airlock)")
	// The data dir the other commands use (`airlock call`, `approvals`,
	// `hook install`) unless --data names another: the configuration is
	// read only when --data does not name one.
	load := sync.OnceValues(g.load) // add may need it twice
	devData := func() (string, error) {
		if dataDir != "" {
			return dataDir, nil
		}
		cfg, err := load()
		if err != nil {
			return "", err
		}
		return cfg.Dev.DataDir, nil
	}
	add := &cobra.Command{
		Use:   "add NAME",
		Short: "Create an agent and write its credential file",
		Args:  exactArgs(1, ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			dataDir, err := devData()
			if err != nil {
				return err
			}
			d := natsauth.Dev{DataDir: dataDir}
			file := d.CredentialFile(args[0])
			// An agent whose connections would not fit beside the others'
			// is refused here, before `airlock dev` would refuse to load it.
			cfg, err := load()
			if err != nil {
				return err
			}
			existing, err := natsauth.AgentCredentials(d.AgentsDir())
			if err != nil {
				return err
			}
			if err := natsauth.FitAgents(cfg, len(existing)+1); err != nil {
				return fmt.Errorf("agent %s not added: %w", args[0], err)
			}
			// The running dev's own address, else where it listens as configured.
			var url string
			// A nats.url no dev holds the lock for is left from one that stopped.
			running := false
			if u, err := runningDevFile(d, d.URLFile(), ""); err == nil && u != "" {
				running, url = true, u
			} else {
				url = fmt.Sprintf("nats://%s:%d", cfg.Dev.NATSHost, cfg.Dev.NATSPort)
			}
			cred, err := natsauth.NewCredential(file, args[0], url)
			if err != nil {
				return err
			}
			fmt.Printf("agent %s created; its credential is %s (keep it secret)\n", args[0], file)
			if running {
				err = awaitAccepted(cmd.Context(), d, cred)
			}
			switch {
			case !running || errors.Is(err, errDevNotRunning):
				fmt.Printf("airlock dev is not running with --data %s: it accepts the credential when it starts\n", dataDir)
			case err != nil:
				return err
			default:
				fmt.Printf("airlock dev at %s accepts it now\n", cred.URL)
			}
			fmt.Printf("  try it:   airlock call --agent %s%s --tool demo__echo --args '{\"text\":\"hi\"}'\n", args[0], dataArg(dataDir))
			fmt.Printf("  from Go:  airlock.Connect(ctx, %q, \"\")\n", file)
			return nil
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the agents and their credential files",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dataDir, err := devData()
			if err != nil {
				return err
			}
			d := natsauth.Dev{DataDir: dataDir}
			creds, err := natsauth.AgentCredentials(d.AgentsDir())
			if err != nil {
				return err
			}
			if len(creds) == 0 {
				fmt.Printf("no agents under %s: if airlock dev runs elsewhere, name its data dir with --data DIR; else start `airlock dev` once (it makes agent bot), or run `airlock agents add NAME%s`\n", d.AgentsDir(), dataArg(dataDir))
			}
			for _, c := range creds {
				fmt.Printf("%s\t%s\n", c.Agent, d.CredentialFile(c.Agent))
			}
			return nil
		},
	}
	cmd.AddCommand(add, list)
	return cmd
}

func newNATSCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "nats",
		Short: "Render airlock's NATS accounts and permissions, and make keys for them",
	}
	var out string
	var agents []string
	config := &cobra.Command{
		Use:   "config",
		Short: "Print the shipped nats-server configuration (deploy/nats/airlock.conf)",
		Long: `Prints the nats-server configuration airlock ships: the AIRLOCK account with
one least-privilege user per service, and an account of its own for each
agent (AGENT_<agent>: its four imports, its connection bound
limits.agent_connections), every public key read from the environment
($AIRLOCK_<ROLE>_NKEY, $AIRLOCK_AGENT_<AGENT>_NKEY). Without --agent it
renders one example agent, bot: ` + "`go tool task generate`" + ` writes that to
deploy/nats/airlock.conf. Agents whose connections would not fit under
limits.bus_connections beside limits.service_connections are refused.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.load()
			if err != nil {
				return err
			}
			var text string
			if len(agents) == 0 {
				text, err = natsauth.Shipped(cfg)
			} else {
				text, err = natsauth.ShippedFor(cfg, agents...)
			}
			if err != nil {
				return err
			}
			if out == "" {
				fmt.Print(text)
				return nil
			}
			return os.WriteFile(out, []byte(text), 0o644)
		},
	}
	config.Flags().StringVarP(&out, "output", "o", "", "write to this file instead of stdout")
	config.Flags().StringSliceVar(&agents, "agent", nil, "render an account for agent `NAME` (repeat it); without it, the example agent bot")
	keys := &cobra.Command{
		Use:   "keys DIR",
		Short: "Write an nkey seed per service role into DIR and print the variables the server reads",
		Long: `Writes DIR/<role>.nk (an nkey seed, mode 0600) for the admin and every service
role, keeping seeds that exist, and DIR/` + natsauth.PublicKeysFile + ` with the public keys as
the NATS servers read them (AIRLOCK_<ROLE>_NKEY=...; an env file for compose,
a Secret for Kubernetes). Give each service only its own seed (nats.nkey_seed_file).`,
		Args: exactArgs(1, ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := natsauth.WriteServiceKeys(args[0])
			if err != nil {
				return err
			}
			for _, kv := range env {
				fmt.Printf("export %s\n", kv)
			}
			fmt.Printf("# seeds: %s/<role>.nk (give each service its own as nats.nkey_seed_file); public keys: %s\n", args[0], filepath.Join(args[0], natsauth.PublicKeysFile))
			return nil
		},
	}
	var hosts, clients []string
	var days int
	certs := &cobra.Command{
		Use:   "certs DIR",
		Short: "Write a private CA and the NATS nodes' TLS certificate into DIR (the nats-tls Secret)",
		Long: `Writes DIR/` + natsauth.TLSCAFile + ` and DIR/` + natsauth.TLSCAKeyFile + ` (a private CA, kept when DIR already
holds one; keep its key with the operator) and DIR/` + natsauth.TLSCertFile + `, DIR/` + natsauth.TLSKeyFile + ` (the NATS
nodes' certificate, for server and client use, naming --host), which
deploy/nats/cluster.conf serves to clients and routes: a route is accepted
only with a certificate the CA signed for one of its hosts. With --client
NAME it also writes DIR/NAME.crt and DIR/NAME.key, a client certificate
naming no host, for nodes that require mutual TLS (verify: true). Services
verify the nodes with ca.crt (nats.tls.ca_file); agents with their
credential file's "tls". Keys are mode 0600.`,
		Args: exactArgs(1, ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			if days < 1 {
				return fmt.Errorf("--days is %d: give how many days the certificates are valid, at least 1", days)
			}
			if err := natsauth.WriteClusterTLS(args[0], hosts, clients, time.Duration(days)*24*time.Hour); err != nil {
				return err
			}
			fmt.Printf("# CA: %s (its key %s stays with you); nodes: %s, %s for %s\n", filepath.Join(args[0], natsauth.TLSCAFile),
				filepath.Join(args[0], natsauth.TLSCAKeyFile), natsauth.TLSCertFile, natsauth.TLSKeyFile, strings.Join(hosts, ", "))
			fmt.Printf("kubectl create secret generic nats-tls --from-file=%[1]s/ca.crt --from-file=%[1]s/tls.crt --from-file=%[1]s/tls.key\n", args[0])
			return nil
		},
	}
	certs.Flags().StringSliceVar(&hosts, "host", natsauth.NodeHosts(), "a name (or IP address) clients and routes reach the nodes by; repeat it, a leading *. for a wildcard")
	certs.Flags().StringSliceVar(&clients, "client", nil, "also write NAME.crt and NAME.key, a client certificate for mutual TLS; repeat it")
	certs.Flags().IntVar(&days, "days", 365, "how many days the certificates are valid")
	cmd.AddCommand(config, keys, certs)
	return cmd
}

func newKeysCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Make the seal keys (security.decision_key_file, security.frontend_key_file), the one-tap link key (email.one_tap.key_file) and the Web Push key",
	}
	gen := &cobra.Command{
		Use:   "generate FILE",
		Short: "Write a new random key to FILE (mode 0600); refuses to overwrite one",
		Args:  exactArgs(1, ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := os.Stat(args[0]); err == nil {
				return fmt.Errorf("%s exists: keep it (services sealing and checking with it must agree) or remove it first", args[0])
			}
			if _, err := seal.Ensure(args[0]); err != nil {
				return err
			}
			fmt.Printf("key written to %s\n", args[0])
			return nil
		},
	}
	vapid := &cobra.Command{
		Use:   "vapid FILE",
		Short: "Write a new Web Push (VAPID) key to FILE (mode 0600) for console.webpush.vapid_private_key_file; refuses to overwrite one",
		Args:  exactArgs(1, ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			pub, err := console.NewVAPIDKey(args[0])
			if err != nil {
				return err
			}
			fmt.Printf("key written to %s (public key %s)\n", args[0], pub)
			return nil
		},
	}
	cmd.AddCommand(gen, vapid)
	return cmd
}

// agentCredential is the credential file `airlock call` acts with: --creds,
// else the agent's file under the dev data dir; dataFlag says the command
// takes --data, for the error that says where else to look.
func agentCredential(dataDir, agent, creds string, dataFlag bool) (string, error) {
	if creds != "" {
		return creds, nil
	}
	file := natsauth.Dev{DataDir: dataDir}.CredentialFile(agent)
	if _, err := os.Stat(file); err != nil {
		if abs, aerr := filepath.Abs(file); aerr == nil {
			file = abs
		}
		how := "AIRLOCK_DEV_DATA_DIR=DIR"

		if dataFlag {
			how = "--data DIR (or AIRLOCK_DEV_DATA_DIR=DIR)"
		}
		return "", fmt.Errorf("%w for agent %s at %s: name airlock's data directory (where `airlock dev` keeps agents/) with %s, "+
			"pass the credential with --creds FILE, or create one with `airlock agents add %s%s` (airlock dev, `go tool task up`, makes agent bot the first time it starts)", errNoCredential, agent, file, how, agent, dataArg(dataDir))
	}
	return file, nil
}

// loadedWait bounds how long awaitLoaded waits for dev to record that it
// loaded a credential: it looks every second, and a dev that stopped
// without removing its record never will.
const loadedWait = 5 * time.Second

// awaitLoaded returns once the running dev records that its server loaded
// cred, when it records what it loaded, or after loadedWait or ctx; then
// connecting tells the rest.
func awaitLoaded(ctx context.Context, d natsauth.Dev, cred natsauth.Credential) {
	pub, err := cred.PublicKey()
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, loadedWait)
	defer cancel()
	for {
		if loaded, marked := d.Loaded(pub); loaded || !marked {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// errNoCredential: the data dir has no credential of the agent named.
var errNoCredential = errors.New("no credential")

// errDevNotRunning: nothing listens at the credential's NATS address.
var errDevNotRunning = errors.New("airlock dev is not running")

// acceptWait bounds how long `agents add` waits for a running `airlock dev`
// to take a new credential (it looks at its agents folder every second).
const acceptWait = 15 * time.Second

// awaitAccepted returns once the NATS server the credential names accepts
// it and its account's imports answer (the read of a call's stored
// events finds a responder), so that a call made right after
// `airlock agents add` is not refused; errDevNotRunning when no server
// answers there at all. It connects only once the server has loaded the
// credential, as far as dev records it (natsauth.Dev.LoadedFile), so that
// no attempt is refused and logged as an authentication error.
func awaitAccepted(ctx context.Context, d natsauth.Dev, cred natsauth.Credential) error {
	ctx, cancel := context.WithTimeout(ctx, acceptWait)
	defer cancel()
	awaitLoaded(ctx, d, cred)
	for {
		actx, stop := context.WithTimeout(ctx, 2*time.Second)
		nc, err := airlock.Dial(actx, cred, cred.URL)
		if err == nil {
			// Only "no responders" says the import is not wired yet (or
			// dev's approval service, which answers the read, not started);
			// any other answer, a refusal included, proves the import.
			_, err = lastevents.Read(actx, nc, cred.Agent, "accepted", []string{subject.Requested})
			if !errors.Is(err, nats.ErrNoResponders) {
				err = nil
			}
			nc.Close()
		}
		stop()
		switch {
		case err == nil:
			return nil
		case errors.Is(err, nats.ErrNoServers):
			return errDevNotRunning
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("airlock dev at %s has not accepted agent %s's credential within %s (%w): is it running with the same --data directory?", cred.URL, cred.Agent, acceptWait, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
