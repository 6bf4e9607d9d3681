package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/airlock-gate/airlock/services/airlock/internal/bench"
	"github.com/airlock-gate/airlock/services/hooks"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
	"github.com/airlock-gate/airlock/services/shared/obs"
)

// globals are the flags every command takes.
type globals struct {
	configFile string
	natsURL    string
	logLevel   string
	// dataDir is --data of the commands that act on a running `airlock
	// dev` (call, await, approvals, policy rules, policy shadow): its data
	// dir, over dev.data_dir and AIRLOCK_DEV_DATA_DIR.
	dataDir string
}

// dataFlag gives a command that finds `airlock dev` by its data dir the
// --data flag `airlock dev` and `airlock agents` take, so that a second dev
// (`airlock dev --data /tmp/d3`) is named the same way everywhere; a
// group's subcommands take it too.
func (g *globals) dataFlag(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&g.dataDir, "data", "", "data `DIR` of the airlock dev to act on (default dev.data_dir / AIRLOCK_DEV_DATA_DIR, .airlock)")
}

// dataArg is what a printed command adds to act on the dev of dataDir: ""
// for the default data dir, else a --data flag as a shell reads it.
func dataArg(dataDir string) string {
	if dataDir == "" || dataDir == config.Default().Dev.DataDir {
		return ""
	}
	return " --data " + hooks.ShellQuote(dataDir)
}

func newRootCmd() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "airlock",
		Short: "A human-in-the-loop gate for AI-agent tool calls",
		Long: `A human-in-the-loop gate for AI-agent tool calls.

Start here: ` + "`airlock dev`" + ` runs everything on this machine (NATS, every service,
the console on http://127.0.0.1:8080); in airlock's repository ` + "`go tool task up`" + `
builds and runs it. Then ` + "`airlock call`" + ` submits a call as an agent and
` + "`airlock approvals`" + ` decides as a reviewer: README.md's 5-minute tour walks
through them.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.configFile, "config", os.Getenv("AIRLOCK_CONFIG"), "YAML config file (env AIRLOCK_CONFIG); every setting has a default")
	root.PersistentFlags().StringVar(&g.natsURL, "nats", "", "NATS URL (default the config's nats.url; nats://127.0.0.1:4222 for airlock dev)")
	// A mistyped flag is a usage error like any other: exit status 2.
	root.SetFlagErrorFunc(flagErr)
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "", "debug, info, warn or error")
	root.AddCommand(
		newDevCmd(g),
		newServeCmd(g),
		newCallCmd(g),
		newAwaitCmd(g),
		bench.NewCmd(bench.Env{Load: g.load, LogLevelSet: func() bool { return g.logLevel != "" }}),
		newApprovalsCmd(g),
		newUsersCmd(g),
		newAuditCmd(g),
		newPolicyCmd(g),
		newProvisionCmd(g),
		newAgentsCmd(g),
		newNATSCmd(g),
		newKeysCmd(),
		newChaosCmd(),
		newGatewayCmd(g),
		newHookCmd(g),
		newUndoCmd(g),
	)
	rejectUnknownCommands(root)
	// A group made runnable by rejectUnknownCommands is no command of its
	// own: its usage lists only its commands, not "airlock approvals [flags]".
	root.SetUsageTemplate(strings.Replace(root.UsageTemplate(), "{{if .Runnable}}",
		`{{if and .Runnable (ne (index .Annotations "`+groupAnnotation+`") "true")}}`, 1))
	return root
}

// groupAnnotation marks a command that only groups others.
const groupAnnotation = "airlock.group"

// rejectUnknownCommands makes a word that names no subcommand of a command
// group (`airlock approvals lst`) a usage error, exit status 2, that names
// the group's commands — cobra would print the group's help and exit 0, or
// (at the top) exit 1, so a typo in a script would pass for success.
func rejectUnknownCommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		rejectUnknownCommands(sub)
	}
	if check := c.Args; check != nil {
		// cobra's own checks (NoArgs, ExactArgs, ...) answer a plain error,
		// exit status 1: a wrong argument is a usage error like a wrong flag.
		c.Args = func(cmd *cobra.Command, args []string) error {
			err := check(cmd, args)
			var usage usageError
			if err == nil || errors.As(err, &usage) {
				return err
			}
			return usageErr(cmd, "%v", err)
		}
	}
	if !c.HasSubCommands() || c.Runnable() {
		return
	}
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[groupAnnotation] = "true"
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 || args[0] == "help" {
			return cmd.Help()
		}
		var names []string
		for _, sub := range cmd.Commands() {
			if sub.IsAvailableCommand() {
				names = append(names, sub.Name())
			}
		}
		hint := ""
		cmd.SuggestionsMinimumDistance = 2 // cobra's own default for its "Did you mean"
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			hint = fmt.Sprintf(" (did you mean %s?)", strings.Join(s, " or "))
		}
		return usageErr(cmd, "%s has no command %q%s: its commands are %s", cmd.CommandPath(), args[0], hint, strings.Join(names, ", "))
	}
}

// load reads the configuration and applies the global flags over it.
func (g *globals) load() (config.Config, error) {
	cfg, err := config.Load(g.configFile, os.Environ())
	if err != nil {
		return cfg, err
	}
	if g.natsURL != "" {
		cfg.NATS.URL = g.natsURL
	}
	if g.logLevel != "" {
		cfg.Log.Level = g.logLevel
	}
	if g.dataDir != "" {
		cfg.Dev.DataDir = g.dataDir
	}
	return cfg, nil
}

func (g *globals) logger(cfg config.Config) (*slog.Logger, error) {
	return obs.NewLogger(cfg.Log, os.Stderr)
}

// connect dials NATS for a short-lived CLI command, logging as configured:
// it gives up after 5s.
func (g *globals) connect(ctx context.Context, cfg config.Config) (*nats.Conn, jetstream.JetStream, error) {
	log, err := g.logger(cfg)
	if err != nil {
		return nil, nil, err
	}
	// noDevCredentials: no credentials were configured, and none of
	// `airlock dev` were found in the data dir.
	noDevCredentials := false
	if cfg.NATS.NkeySeedFile == "" && cfg.NATS.Credentials == "" {
		// Next to `airlock dev`, act as its operator without being told,
		// where it listens (a dev on another --nats-port is found by its
		// --data alone) unless a NATS URL was given.
		d := natsauth.Dev{DataDir: cfg.Dev.DataDir}
		noDevCredentials = true
		if seed := d.SeedFile(natsauth.RoleAdmin); fileExists(seed) {
			noDevCredentials = false
			cfg.NATS.NkeySeedFile = seed
			if g.natsURL == "" && cfg.NATS.URL == config.Default().NATS.URL {
				u, err := runningDevFile(d, d.URLFile(), ", or pass --nats URL")
				if err != nil && !errors.Is(err, fs.ErrNotExist) {
					return nil, nil, err
				}
				if u != "" {
					cfg.NATS.URL = u
				}
			}
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	nc, err := bus.Connect(cctx, cfg.NATS, "airlock-cli", log)
	if err != nil && noDevCredentials && errors.Is(err, nats.ErrAuthorization) {
		return nil, nil, fmt.Errorf("connect to NATS at %s: %w: this command has no credentials, and `airlock dev` keeps none in %s: "+
			"run it in the directory where `airlock dev` was started, name its data dir with --data DIR (or AIRLOCK_DEV_DATA_DIR=DIR), "+
			"or give the server's credentials (nats.credentials)", bus.Redact(cfg.NATS.URL), nats.ErrAuthorization, cfg.Dev.DataDir)
	}
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	return nc, js, nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// heapProfileOnSignal writes the live heap (after a collection) to path
// each time the process gets SIGUSR1, until ctx ends. The file is written
// whole or not at all (renamed into place), so a reader waiting for it
// never reads half a profile.
func heapProfileOnSignal(ctx context.Context, path string, stderr io.Writer) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	defer signal.Stop(sig)
	for {
		select {
		case <-ctx.Done():
			return
		case <-sig:
			if err := writeHeapProfile(path); err != nil {
				fmt.Fprintln(stderr, "airlock:", err)
			}
		}
	}
}

func writeHeapProfile(path string) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".heap-*")
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	defer os.Remove(f.Name())
	// Two collections: the first moves sync.Pool buffers (the embedded NATS
	// server's block buffers) to the pools' victim caches, the second frees
	// them, so the profile shows what is held, not what is pooled.
	runtime.GC()
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("heap profile: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	return os.Rename(f.Name(), path)
}

// usageError is a mistake in how a command was called: the process exits
// with status 2, as every command's help says.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// usageErr is a usage mistake, with where to read the command's help.
// flagErr is a flag the command does not take, as a usage error naming the
// flag a typo was likely meant for (--wiat: did you mean --wait?).
func flagErr(cmd *cobra.Command, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return usageErr(cmd, "%v", err)
	}
	var known []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) { known = append(known, f.Name) })
	if best := config.Nearest(name, known, 2); best != "" {
		return usageErr(cmd, "%v: did you mean --%s?", err, best)
	}
	return usageErr(cmd, "%v", err)
}

func usageErr(cmd *cobra.Command, format string, args ...any) error {
	return usageError{fmt.Sprintf("%s (see `%s --help`)", fmt.Sprintf(format, args...), cmd.CommandPath())}
}

// exactArgs is cobra.ExactArgs whose complaint is a usage error that says
// what the arguments are (named like the command's Use line), and, for a
// text given where a flag was expected, which flag takes it.
func exactArgs(n int, textFlag string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) == n:
			return nil
		case len(args) > n && textFlag != "":
			return usageErr(cmd, "unexpected %q: give the text with %s %q", strings.Join(args[n:], " "), textFlag, strings.Join(args[n:], " "))
		case len(args) > n:
			return usageErr(cmd, "unexpected %q: %s takes %d argument(s): %s", strings.Join(args[n:], " "), cmd.CommandPath(), n, cmd.Use)
		}
		return usageErr(cmd, "missing argument: %s", cmd.Use)
	}
}

// operatorName is who an operator command records as its actor: by (its
// --by), else the login name ($USER, else the account the process runs
// as). An action recorded with no actor would say nobody did it, so a
// name is required.
func operatorName(by string) (string, error) {
	if by = strings.TrimSpace(by); by != "" {
		return by, nil
	}
	if name := strings.TrimSpace(os.Getenv("USER")); name != "" {
		return name, nil
	}
	if u, err := user.Current(); err == nil && strings.TrimSpace(u.Username) != "" {
		return strings.TrimSpace(u.Username), nil
	}
	return "", errors.New("say who you are with --by NAME: it is recorded as who did it, and neither $USER nor the account this runs as names anyone")
}
