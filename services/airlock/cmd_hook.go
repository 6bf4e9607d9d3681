package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/airlock/internal/snapshot"
	"github.com/airlock-gate/airlock/services/hooks"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/canon"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/escape"
	"github.com/airlock-gate/airlock/services/shared/ids"
)

// hookOptions are the flags of `airlock hook AGENT` (and `hook test`).
type hookOptions struct {
	creds, natsURL, configFile string
	event, onTimeout, stateDir string
	wait                       time.Duration
	// recordResults keeps a tool's result text in its outcome; by default
	// only its size and digest are recorded (hooks.ResultDigest).
	recordResults bool
}

// defaultHookWait is how long a hook waits for a person by default; the
// agent's own hook timeout that `hook install` writes is longer.
const defaultHookWait = 5 * time.Minute

func (o *hookOptions) register(f *pflag.FlagSet) {
	f.StringVar(&o.creds, "creds", os.Getenv("AIRLOCK_AGENT_CREDS"), "the agent's credential file (env AIRLOCK_AGENT_CREDS); its agent id is who asks")
	f.StringVar(&o.natsURL, "nats", "", "NATS URL (default the credential's)")
	f.StringVar(&o.configFile, "config", os.Getenv("AIRLOCK_CONFIG"), "YAML config file (env AIRLOCK_CONFIG), for the stream name and request limit")
	f.StringVar(&o.event, "event", "", "the hook event, for agents whose payload does not name it (GitHub Copilot CLI)")
	f.DurationVar(&o.wait, "wait", defaultHookWait, "how long to wait for a person's decision before denying the call")
	f.StringVar(&o.onTimeout, "on-timeout", "deny", "what to answer when nobody decided within --wait: deny, or ask (let the agent ask its user, where it can; the airlock call is withdrawn)")
	f.BoolVar(&o.recordResults, "record-results", false, "record each tool's result and error text (file contents, command output) in the call's outcome, for every auditor to read; by default only their size and SHA-256 are recorded")
	f.StringVar(&o.stateDir, "state-dir", "", "where to remember the call of a tool use between the pre-tool and post-tool hooks of agents that give tool uses no id (default $XDG_STATE_HOME/airlock/hooks)")
}

func newHookCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hook AGENT",
		Short: "Gate a coding agent's tools: answer its pre-tool hook with airlock's decision, record its post-tool hook",
		Long: `Reads a coding agent's hook payload on stdin (AGENT: claude, cursor, gemini,
copilot or codex) and answers in that agent's format. A pre-tool hook becomes
a gate-only airlock call (decided by policy and people, never run by airlock):
allowed or approved → allow; denied, rejected, expired or no decision within
--wait → deny with the reason the model reads, and the exit status the agent
treats as blocking. Anything that goes wrong (airlock unreachable, a payload
that does not parse) is a deny too: airlock fails closed. A post-tool hook
reports the tool's result, which becomes the call's outcome: its size and
SHA-256 only (a failed tool's error text too), unless --record-results keeps
the text.

Install it with ` + "`airlock hook install AGENT`" + `; try it with ` + "`airlock hook test AGENT`" + `.

Flags:
  --creds FILE        the agent's credential file (env AIRLOCK_AGENT_CREDS)
  --wait DURATION     how long to wait for a person (default 5m)
  --on-timeout deny|ask   the answer when nobody decided in time (default deny)
  --event NAME        the hook event, when the payload does not name it
  --state-dir DIR     where tool uses without an id are remembered between hooks
  --record-results    keep each tool's result and error text (file contents,
                      command output) in the audit trail; by default each is
                      recorded as its size and SHA-256 only
  --nats URL          NATS URL (default the credential's)`,
		// Flags are parsed by runHook itself: a flag this binary does not
		// know must be a deny in the agent's format, never cobra's exit 1
		// (which Claude Code treats as "let the call through").
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
				// Not parsed by cobra, the help flag is ours to answer: with
				// the help the usage line points to.
				return cmd.Help()
			}
			code := runHook(cmd.Context(), args, os.Stdin, os.Stdout, os.Stderr)
			if code != 0 {
				return exitError{code}
			}
			return nil
		},
	}
	cmd.AddCommand(newHookInstallCmd(g), newHookTestCmd())
	return cmd
}

// runHook is `airlock hook AGENT [flags]`: it returns the exit status.
func runHook(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, "usage: airlock hook AGENT [--creds FILE] [--wait 5m] [--on-timeout deny|ask] [--event NAME]   (AGENT: claude, cursor, gemini, copilot, codex; see `airlock hook --help`)")
		return 2
	}
	agent, err := hooks.ParseAgent(args[0])
	if err != nil {
		fmt.Fprintf(stderr, "airlock hook: %v; the call is denied (fail closed)\n", err)
		return 2
	}
	opts := &hookOptions{}
	fs := pflag.NewFlagSet("airlock hook", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	opts.register(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return write(stdout, stderr, failHook(agent, "", fmt.Sprintf("airlock hook could not read its flags (%v): the call is denied (fail closed); fix the hook command (`airlock hook install %s` writes it)", err, agent)))
	}
	payload, err := io.ReadAll(io.LimitReader(stdin, 8<<20))
	if err != nil {
		return write(stdout, stderr, failHook(agent, opts.event, fmt.Sprintf("airlock hook could not read the %s hook payload: %v; the call is denied (fail closed)", agent, err)))
	}
	return write(stdout, stderr, opts.handle(ctx, agent, payload))
}

func write(stdout, stderr io.Writer, out hooks.Output) int {
	_, _ = stdout.Write(out.Stdout)
	_, _ = io.WriteString(stderr, out.Stderr)
	return out.Exit
}

// handle answers one payload.
func (o *hookOptions) handle(ctx context.Context, agent hooks.Agent, payload []byte) hooks.Output {
	ev, err := hooks.Parse(agent, o.event, payload)
	if err != nil {
		return failHook(agent, o.event, fmt.Sprintf("airlock could not read the hook payload (%v), so the call is denied (fail closed)", err))
	}
	if o.onTimeout != "deny" && o.onTimeout != "ask" {
		return failHook(agent, ev.Name, fmt.Sprintf("airlock hook: --on-timeout must be deny or ask, not %q; the call is denied (fail closed)", o.onTimeout))
	}
	if ev.Kind != hooks.Other {
		// Before anything is recorded, so the pre-tool and post-tool hooks
		// name the same arguments.
		if err := ev.InWorkspaceTerms(agentWorkspace()); err != nil {
			if ev.Kind == hooks.Post {
				return hooks.Acknowledge(ev, escape.Terminal(fmt.Sprintf("airlock did not record the result of %s: %v", ev.QualifiedTool(), err)))
			}
			return failHook(agent, ev.Name, err.Error())
		}
	}
	switch ev.Kind {
	case hooks.Pre, hooks.Permission:
		v := o.gate(ctx, ev)
		v.Reason = escape.Terminal(v.Reason)
		return hooks.Respond(ev, v)
	case hooks.Post:
		return hooks.Acknowledge(ev, escape.Terminal(o.report(ctx, ev)))
	}
	return hooks.Acknowledge(ev, "")
}

// agentWorkspace is the agent's machine as hooks.Event.InWorkspaceTerms
// reads it: the hook runs there, as the agent's user.
func agentWorkspace() hooks.Workspace {
	home, _ := os.UserHomeDir() // unknown: no home to refuse as a workspace
	return hooks.Workspace{RealPath: filepath.EvalSymlinks, Home: home}
}

// failHook is hooks.Fail with its reason as one line of terminal text: the
// coding agent shows a hook's reason to its user on a terminal, and what a
// tool, a model or a reviewer wrote may be in it (escape.Terminal, as for
// every verdict handle answers).
func failHook(agent hooks.Agent, event, reason string) hooks.Output {
	return hooks.Fail(agent, event, escape.Terminal(reason))
}

// connect reaches airlock as the credential's agent.
func (o *hookOptions) connect(ctx context.Context) (*airlock.Client, error) {
	if o.creds == "" {
		return nil, errors.New("the hook has no agent credential: pass --creds FILE (`airlock hook install` writes it, `airlock agents add NAME` makes one)")
	}
	cfg, err := config.Load(o.configFile, os.Environ())
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return airlock.Connect(cctx, o.creds, o.natsURL, airlock.WithStream(cfg.Stream.Name), airlock.WithMaxRequestBytes(cfg.Limits.MaxRequestBytes))
}

// gate submits the tool use as a gate-only call and turns airlock's answer
// into a verdict. Whatever fails, the verdict is a deny that says why.
func (o *hookOptions) gate(ctx context.Context, ev hooks.Event) hooks.Verdict {
	deny := func(format string, args ...any) hooks.Verdict {
		return hooks.Verdict{Action: hooks.Deny, Reason: fmt.Sprintf(format, args...)}
	}
	client, err := o.connect(ctx)
	if err != nil {
		return deny("airlock could not be reached, so %s is denied (airlock fails closed): %v. Start airlock (`airlock dev`) or fix the hook's credential, then try again.", ev.QualifiedTool(), err)
	}
	defer client.Close()
	id, fromAgent := ev.CallID()
	if !fromAgent {
		id = ids.New("call")
	}
	call := airlock.Call{ID: id, Server: ev.Server, Tool: ev.Tool, Args: ev.Args, Thread: ev.Thread(), Reason: ev.Reason, AgentRuns: true, Cwd: ev.Cwd}
	// Followed from before it is submitted: that the agent is over its
	// budget is said once, live, and never stored.
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	followed, err := client.SubmitFollowed(sctx, call)
	cancel()
	switch {
	case errors.Is(err, airlock.ErrInvalid):
		return deny("airlock refused %s as invalid: %v", ev.QualifiedTool(), err)
	case err != nil:
		return deny("airlock could not take the call, so %s is denied (airlock fails closed): %v", ev.QualifiedTool(), err)
	}
	defer followed.Close()
	v, out := o.await(ctx, client, followed, ev, call)
	if v.Action == hooks.Allow {
		v.Reason += o.snapshot(ctx, client.Agent(), id, ev, out)
	}
	if v.Action == hooks.Allow && !fromAgent {
		if err := o.remember(ev, id); err != nil {
			fmt.Fprintf(os.Stderr, "airlock hook: %v (the tool's result will not be recorded)\n", err)
		}
	}
	return v
}

// await waits up to --wait for airlock's answer about the call it
// submitted, and allows only what airlock decided for that very call.
func (o *hookOptions) await(ctx context.Context, client *airlock.Client, followed *airlock.Followed, ev hooks.Event, call airlock.Call) (hooks.Verdict, airlock.Outcome) {
	id := call.ID
	deny := func(format string, args ...any) (hooks.Verdict, airlock.Outcome) {
		return hooks.Verdict{Action: hooks.Deny, Reason: fmt.Sprintf(format, args...)}, airlock.Outcome{}
	}
	wctx, cancel := context.WithTimeout(ctx, o.wait)
	out, err := followed.AwaitDecision(wctx)
	cancel()
	if err != nil {
		if errors.Is(err, airlock.ErrOverBudget) {
			return deny("airlock did not take %s, so it is denied: %v", ev.QualifiedTool(), err)
		}
		if ctx.Err() != nil {
			return deny("airlock hook was stopped before airlock decided %s, so it is denied", ev.QualifiedTool())
		}
		out, err = o.giveUp(ctx, client, id)
		if err != nil {
			if o.onTimeout == "ask" {
				return hooks.Verdict{Action: hooks.Ask, Reason: fmt.Sprintf("airlock: nobody decided %s within %s, so it was withdrawn from airlock (call %s/%s) and left to you", ev.QualifiedTool(), o.wait, client.Agent(), id)}, airlock.Outcome{}
			}
			return deny("airlock: nobody decided %s within %s, so it is denied (call %s/%s was withdrawn). Ask the user to watch airlock (the console, Slack or `airlock approvals list`) and try again; they can also remember such calls (`airlock approvals remember`).", ev.QualifiedTool(), o.wait, client.Agent(), id)
		}
	}
	if out.Allowed() && !decidedAsAsked(out.Call, call) {
		return deny("airlock's decision on call %s/%s is about another call (%s, asked with this tool-use id before), and airlock refused this request under the same id. %s is denied: run it again as a new tool use.",
			client.Agent(), id, calls.QualifiedTool(out.Call), ev.QualifiedTool())
	}
	return verdictOf(ev, out), out
}

// decidedAsAsked reports whether the call airlock decided is the one the
// hook submitted: the same tool and arguments, run by the agent.
func decidedAsAsked(decided *airlockv1.ToolCall, asked airlock.Call) bool {
	want, err := structpb.NewStruct(asked.Args)
	if err != nil || decided == nil || !decided.GetAgentRuns() || decided.GetServer() != asked.Server || decided.GetTool() != asked.Tool {
		return false
	}
	a, err1 := canon.Digest(decided.GetArguments())
	b, err2 := canon.Digest(want)
	return err1 == nil && err2 == nil && a == b
}

// giveUp withdraws a call nobody decided in time, then reads it once more:
// a decision that landed meanwhile still counts. The call may not be
// waiting for a person yet (the approval service records it a moment after
// the policy asks), so the cancel is tried until it lands or the call is
// decided: a call left pending would hold its thread's queue.
func (o *hookOptions) giveUp(ctx context.Context, client *airlock.Client, id string) (airlock.Outcome, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	reason := fmt.Sprintf("the agent's hook stopped waiting after %s; the agent was told no", o.wait)
	for client.Cancel(cctx, id, reason) != nil {
		// Not cancelable: decided already, or not recorded yet. Look.
		qctx, qcancel := context.WithTimeout(cctx, 250*time.Millisecond)
		out, err := client.AwaitDecision(qctx, id, 1)
		qcancel()
		if err == nil {
			if out.Status != airlock.StatusCanceled {
				return out, nil
			}
			break
		}
		if cctx.Err() != nil {
			break
		}
	}
	out, err := client.AwaitDecision(cctx, id, 1)
	if err == nil && (out.Allowed() || out.Status != airlock.StatusCanceled) {
		return out, nil
	}
	return airlock.Outcome{}, errors.New("no decision")
}

// verdictOf turns airlock's answer into the hook's verdict, with the
// sentence the model reads.
func verdictOf(ev hooks.Event, out airlock.Outcome) hooks.Verdict {
	tool := ev.QualifiedTool()
	by := out.DecidedBy
	switch out.Status {
	case airlock.StatusAllowed:
		return hooks.Verdict{Action: hooks.Allow, Reason: "airlock allowed " + tool + ": " + out.Reason}
	case airlock.StatusApproved:
		v := hooks.Verdict{Action: hooks.Allow, Reason: "airlock: " + by + " approved " + tool}
		if out.Reason != "" {
			v.Reason += " (" + out.Reason + ")"
		}
		return v
	case airlock.StatusDenied:
		return hooks.Verdict{Reason: "airlock denied " + tool + ": " + out.Reason}
	case airlock.StatusRejected:
		return hooks.Verdict{Reason: fmt.Sprintf("airlock: %s rejected %s: %s. Do not retry it as it is.", by, tool, out.Reason)}
	case airlock.StatusChangesRequested:
		return hooks.Verdict{Reason: fmt.Sprintf("airlock: %s asks for changes to %s: %s. Adjust the call and try again.", by, tool, out.Feedback)}
	case airlock.StatusExpired:
		return hooks.Verdict{Reason: "airlock: nobody decided " + tool + " before its deadline, so it expired and is denied. Ask the user to approve it in airlock, then try again."}
	case airlock.StatusCanceled:
		return hooks.Verdict{Reason: "airlock: " + tool + " was canceled: " + out.Reason}
	case airlock.StatusInvalid:
		return hooks.Verdict{Reason: "airlock refused " + tool + " as invalid: " + out.Reason}
	}
	return hooks.Verdict{Reason: fmt.Sprintf("airlock: %s ended %s, so it is denied", tool, out.Status)}
}

// report records the result of a tool the agent ran; it returns a problem
// to show the user, "" when all went well.
func (o *hookOptions) report(ctx context.Context, ev hooks.Event) string {
	// A call gated without the agent's tool-use id (agents that give none,
	// and Claude Code's PermissionRequest) was remembered; otherwise the
	// tool-use id names it.
	id := o.recall(ev)
	if id == "" {
		if id, _ = ev.CallID(); id == "" {
			return "" // a tool use airlock did not gate (another hook's, or before install)
		}
	}
	client, err := o.connect(ctx)
	if err != nil {
		return fmt.Sprintf("airlock could not record the result of %s: %v", ev.QualifiedTool(), err)
	}
	defer client.Close()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	result, errText := ev.Result, ev.Error
	if !o.recordResults {
		result, errText = hooks.ResultDigest(result), hooks.ErrorDigest(errText)
	}
	r := airlock.Report{Failed: ev.Failed, Result: result, Error: errText, Args: ev.Args}
	problem := ""
	if store, err := o.snapshots(); err == nil {
		if snap, ok, err := store.After(ctx, client.Agent(), id); err != nil {
			problem = fmt.Sprintf("airlock could not record the files after %s (undo will ask for --force): %v", ev.QualifiedTool(), err)
			r.Snapshot = snap
		} else if ok {
			r.Snapshot = snap
		}
	}
	if err := client.Report(rctx, id, 1, r); err != nil {
		return fmt.Sprintf("airlock could not record the result of %s: %v", ev.QualifiedTool(), err)
	}
	return problem
}

// snapshots is where the hook keeps its snapshots: under its state dir,
// bounded by hooks.snapshots.
func (o *hookOptions) snapshots() (snapshot.Store, error) {
	dir, err := o.stateDirectory()
	if err != nil {
		return snapshot.Store{}, err
	}
	cfg, err := config.Load(o.configFile, os.Environ())
	if err != nil {
		return snapshot.Store{}, err
	}
	return snapshot.Store{Dir: filepath.Join(dir, "snapshots"), Limits: snapshot.LimitsOf(cfg.Hooks.Snapshots)}, nil
}

// snapshot saves what an allowed call may change before the agent runs
// it (edits and writes, shell commands the coding profile does not allow
// as read-only), and returns the words added to the allow reason. A
// snapshot that fails does not take back the decision: the person allowed
// the call, and the reason says there is nothing to undo with.
func (o *hookOptions) snapshot(ctx context.Context, agent, call string, ev hooks.Event, out airlock.Outcome) string {
	ch, ok := ev.Changes()
	if !ok || (ch.Shell && out.Status == airlock.StatusAllowed && out.Decision.GetRuleId() == hooks.ReadOnlyShellRule) {
		return ""
	}
	store, err := o.snapshots()
	if err != nil {
		return fmt.Sprintf(" (airlock saved nothing to undo it with: %v)", err)
	}
	snap, err := store.Before(ctx, snapshot.Target{Agent: agent, Call: call, Cwd: ev.Cwd, Paths: ch.Paths, WholeTree: ch.Shell, Command: ch.Command})
	if err != nil {
		return fmt.Sprintf(" (airlock saved nothing to undo it with: %v)", err)
	}
	s := fmt.Sprintf(" (saved first: `airlock undo %s/%s` puts it back", agent, call)
	if snap.GetNote() != "" {
		s += "; " + snap.GetNote()
	}
	return s + ")"
}

// stateDirectory is where tool uses without an id are remembered.
func (o *hookOptions) stateDirectory() (string, error) {
	if o.stateDir != "" {
		return o.stateDir, nil
	}
	if x := os.Getenv("XDG_STATE_HOME"); x != "" {
		return filepath.Join(x, "airlock", "hooks"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no state directory for hooks: set --state-dir or $XDG_STATE_HOME (%v)", err)
	}
	return filepath.Join(home, ".local", "state", "airlock", "hooks"), nil
}

// stateTTL bounds how long a tool use is remembered between its hooks.
const stateTTL = 24 * time.Hour

// remember notes the call id of a tool use whose agent gives it no id, for
// its post-tool hook; old notes are pruned.
func (o *hookOptions) remember(ev hooks.Event, id string) error {
	dir, err := o.stateDirectory()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("remember the call of this tool use: %w", err)
	}
	if entries, err := os.ReadDir(dir); err == nil {
		for _, e := range entries {
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > stateTTL {
				_ = os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ev.StateKey()), []byte(id), 0o600); err != nil {
		return fmt.Errorf("remember the call of this tool use: %w", err)
	}
	return nil
}

// recall returns (and forgets) the call id remembered for the tool use, ""
// when there is none.
func (o *hookOptions) recall(ev hooks.Event) string {
	dir, err := o.stateDirectory()
	if err != nil {
		return ""
	}
	file := filepath.Join(dir, ev.StateKey())
	b, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	_ = os.Remove(file)
	id := strings.TrimSpace(string(b))
	if ids.Validate("call id", id) != nil {
		return ""
	}
	return id
}

func newHookInstallCmd(g *globals) *cobra.Command {
	var (
		user, recordResults bool
		project, home       string
		creds, agent        string
		dataDir             string
		binary              string
		wait                time.Duration
	)
	cmd := &cobra.Command{
		Use:   "install AGENT",
		Short: "Write the agent's hook configuration (merged, with a backup) so airlock gates its tools",
		Long: `Adds airlock's pre-tool and post-tool hooks to the agent's configuration:
Claude Code .claude/settings.local.json (--user: ~/.claude/settings.json),
Codex .codex/hooks.json, Gemini CLI .gemini/settings.json, Cursor
.cursor/hooks.json, GitHub Copilot CLI .github/hooks/airlock.json. Every other
setting and hook is kept, an earlier airlock hook is replaced, and the file as
it was is saved next to it (.airlock-backup). The hook runs this airlock
binary with the agent's credential (written as an absolute path; from your
own project, name airlock's data directory with --data, or give --creds);
the agent's own hook timeout is set
longer than --wait, so the agent never gives up on a hook still waiting.`,
		Args: exactArgs(1, ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := hooks.ParseAgent(args[0])
			if err != nil {
				return err
			}
			cfg, err := g.load()
			if err != nil {
				return err
			}
			if dataDir != "" {
				cfg.Dev.DataDir = dataDir
			}
			if creds, err = agentCredential(cfg.Dev.DataDir, agent, creds, true); err != nil {
				return err
			}
			if creds, err = filepath.Abs(creds); err != nil {
				return err
			}
			if binary == "" {
				if binary, err = os.Executable(); err != nil {
					return fmt.Errorf("find this airlock binary: %w (pass --binary PATH)", err)
				}
				if strings.Contains(binary, "go-build") {
					return fmt.Errorf("this airlock is a temporary `go run` build (%s), which a hook cannot run later: build it (go build -o ~/bin/airlock ./services/airlock) and install with that binary, or pass --binary PATH", binary)
				}
			}
			if home == "" {
				if home, err = os.UserHomeDir(); err != nil {
					return fmt.Errorf("find your home directory: %w (pass --home)", err)
				}
			}
			scope := hooks.Project
			if user {
				scope = hooks.User
			}
			file, err := hooks.ConfigFile(a, scope, home, project)
			if err != nil {
				return err
			}
			words := []string{binary, "hook", string(a), "--creds", creds, "--wait", wait.String()}
			if g.natsURL != "" {
				words = append(words, "--nats", g.natsURL)
			}
			if recordResults {
				words = append(words, "--record-results")
			}
			backup, err := installHook(file, a, hooks.InstallOptions{Command: hooks.ShellQuote(words...), Timeout: wait + 30*time.Second})
			if err != nil {
				return err
			}
			fmt.Printf("airlock gates %s now: its hooks in %s run\n  %s\n", a, file, hooks.ShellQuote(words...))
			if backup != "" {
				fmt.Printf("the file as it was is saved as %s\n", backup)
			}
			fmt.Printf("try it: airlock hook test %s --creds %s\n", a, hooks.ShellQuote(creds))
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&user, "user", false, "install for every project of this user (the agent's user configuration)")
	f.Bool("project", true, "install for this project only (the default)")
	f.StringVar(&project, "dir", ".", "the project directory (with --project)")
	f.StringVar(&home, "home", "", "the home directory (with --user; default yours)")
	f.StringVar(&agent, "agent", "bot", "airlock agent the hook acts as: its credential is <data dir>/agents/AGENT.creds.json")
	f.StringVar(&dataDir, "data", "", "airlock's data `DIR`, where airlock dev keeps agents/ (default dev.data_dir / AIRLOCK_DEV_DATA_DIR, .airlock)")
	f.StringVar(&creds, "creds", "", "the agent's credential file (overrides --agent)")
	f.StringVar(&binary, "binary", "", "the airlock binary the hook runs (default this one)")
	f.DurationVar(&wait, "wait", defaultHookWait, "how long the hook waits for a person before denying")
	f.BoolVar(&recordResults, "record-results", false, "have the hook record each tool's result text in the audit trail (default: its size and SHA-256 only)")
	return cmd
}

// installHook merges airlock's hooks into file, saving the file as it was
// next to it first; it returns the backup's name ("" when there was no file).
func installHook(file string, a hooks.Agent, opt hooks.InstallOptions) (string, error) {
	existing, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read %s: %w", file, err)
	}
	merged, err := hooks.Merge(a, existing, opt)
	if err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", filepath.Dir(file), err)
	}
	mode := os.FileMode(0o644)
	backup := ""
	if existing != nil {
		if info, err := os.Stat(file); err == nil {
			mode = info.Mode().Perm()
		}
		backup = file + ".airlock-backup"
		if _, err := os.Stat(backup); err == nil {
			backup = file + ".airlock-backup-" + time.Now().UTC().Format("20060102T150405Z")
		}
		if err := os.WriteFile(backup, existing, mode); err != nil {
			return "", fmt.Errorf("back up %s: %w (nothing was changed)", file, err)
		}
	}
	tmp := file + ".airlock-tmp"
	if err := os.WriteFile(tmp, merged, mode); err != nil {
		return "", fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, file); err != nil {
		return "", fmt.Errorf("write %s: %w", file, err)
	}
	return backup, nil
}

func newHookTestCmd() *cobra.Command {
	opts := &hookOptions{}
	var payloadFile, sample string
	var list bool
	cmd := &cobra.Command{
		Use:   "test AGENT",
		Short: "Send a sample hook payload through airlock and print what the agent would receive",
		Long: `Runs the hook on a recorded payload of the agent (by default a pre-tool
` + "`git status`" + `; --sample NAME picks another, --list shows them) or on
--payload FILE ("-" for stdin), against the airlock the credential reaches,
and prints the hook's stdout, stderr and exit status, and what the agent does
with them.`,
		Args: exactArgs(1, ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := hooks.ParseAgent(args[0])
			if err != nil {
				return err
			}
			if list {
				for _, n := range hooks.FixtureNames(a) {
					fmt.Println(n)
				}
				return nil
			}
			var payload []byte
			switch {
			case payloadFile == "-":
				payload, err = io.ReadAll(os.Stdin)
			case payloadFile != "":
				payload, err = os.ReadFile(payloadFile)
			default:
				if sample == "" {
					sample = hooks.SampleName(a)
				}
				payload, err = hooks.Fixture(a, sample)
			}
			if err != nil {
				return err
			}
			fmt.Printf("payload:\n%s\n", bytes.TrimSpace(payload))
			out := opts.handle(cmd.Context(), a, payload)
			fmt.Printf("stdout: %s\nstderr: %s\nexit:   %d\n", orNothing(bytes.TrimSpace(out.Stdout)), orNothing([]byte(strings.TrimSpace(out.Stderr))), out.Exit)
			switch {
			case out.Exit == 2:
				fmt.Printf("%s blocks the tool call.\n", a)
			case out.Exit == 0:
				fmt.Printf("%s goes on as the answer says.\n", a)
			default:
				fmt.Printf("%s goes on and shows the warning.\n", a)
			}
			return nil
		},
	}
	opts.register(cmd.Flags())
	cmd.Flags().StringVar(&payloadFile, "payload", "", "a payload file to send (\"-\": stdin) instead of a recorded sample")
	cmd.Flags().StringVar(&sample, "sample", "", "the recorded sample to send (see --list)")
	cmd.Flags().BoolVar(&list, "list", false, "list the recorded samples of the agent")
	return cmd
}

func orNothing(b []byte) string {
	if len(b) == 0 {
		return "(nothing)"
	}
	return string(b)
}
