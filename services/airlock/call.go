package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/hooks"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/escape"
	"github.com/airlock-gate/airlock/services/shared/executorapi"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// Exit statuses of `airlock call` and `airlock await`.
const (
	exitNotCompleted = 1 // an outcome other than completed
	exitUsage        = 2 // the call could not be submitted or followed, or is unknown
	exitStillWaiting = 3 // no outcome within --wait: the call may still be decided
)

// unsent is an error that kept a call from being submitted or followed
// (no credential, NATS not reached, the request refused unsent): exit
// status exitUsage, as callExitStatuses says, not that of an outcome.
func unsent(err error) error { return usageError{err.Error()} }

const callExitStatuses = `Exit status 0 means the tool ran and completed; 1 means any other outcome
(denied, rejected, changes requested, failed, expired, ...); 2 means the
command was used wrongly, no such call is known, or the call could not be
submitted or followed; 3 means no outcome came within --wait — the call may
still be decided: follow it with ` + "`airlock await AGENT/CALL_ID`" + `.`

func newCallCmd(g *globals) *cobra.Command {
	var (
		c       airlock.Call
		agent   string
		creds   string
		argsRaw string
		wait    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "call --tool SERVER__TOOL [--args JSON]",
		Short: "Submit a tool call as an agent, say what it waits for, and print its outcome as JSON",
		Long: `Submits a call through the Go SDK and follows it: when the policy asks a
person, it says who may decide, until when, and where (the console page of the
call, or ` + "`airlock approvals`" + `); then it prints the outcome as JSON.

After a reviewer requests changes, submit the revised call as revision 2 of
the same call: --call-id ID --revision 2.

` + callExitStatuses,
		Args: exactArgs(0, "--tool"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c.Tool == "" {
				return usageErr(cmd, "--tool is required")
			}
			if srv, tool, _ := strings.Cut(c.Tool, "__"); srv == "" || tool == "" {
				return usageErr(cmd, "--tool %q names no server and tool: give it as server__tool, such as demo__echo (tools come from executor.tools_file)", c.Tool)
			}
			if argsRaw != "" {
				if err := json.Unmarshal([]byte(argsRaw), &c.Args); err != nil || c.Args == nil {
					return usageErr(cmd, "--args must be a JSON object such as '{\"path\":\"README.md\"}'%s", errSuffix(err))
				}
			}
			if c.Revision > 1 && c.ID == "" {
				return usageErr(cmd, "--revision %d needs --call-id: a revision continues a call a reviewer asked to change", c.Revision)
			}
			cfg, client, err := g.agentClient(cmd.Context(), agent, creds)
			if err != nil {
				return unsent(err)
			}
			defer client.Close()
			if c.ID != "" {
				// A call id names one call: submitting an ended revision again
				// changes nothing, and following it would tell its end as news.
				// A request refused as invalid recorded no call: the same id
				// may be submitted again, corrected (the policy accepts it).
				if out, ended, err := client.Ended(cmd.Context(), c.ID, max(c.Revision, 1)); err == nil && ended && out.Status != airlock.StatusInvalid {
					stderr := cmd.ErrOrStderr()
					// Only changes requested let a next revision be submitted:
					// printOutcome says how then, and after any other end a
					// next revision would be refused as invalid.
					fmt.Fprintf(stderr, "%s\n  nothing was submitted: a call id names one call, and this one has ended. Leave out --call-id for a new call.\n",
						endedText(client.Agent()+"/"+c.ID, out, time.Now()))
					return printOutcome(os.Stdout, stderr, agentArgs(client.Agent(), cfg.Dev.DataDir), c.ID, out)
				}
			}
			id, err := client.Submit(cmd.Context(), c)
			if err != nil {
				return unsent(fmt.Errorf("submit: %w", err))
			}
			name := client.Agent() + "/" + id
			stderr := cmd.ErrOrStderr()
			fmt.Fprintf(stderr, "call %s revision %d submitted as agent %s; waiting up to %s for the policy and, if it asks, a person\n",
				name, max(c.Revision, 1), client.Agent(), wait)
			return follow(cmd.Context(), os.Stdout, stderr, cfg, client, id, max(c.Revision, 1), wait, g.registryCheck(cfg))
		},
	}
	f := cmd.Flags()
	f.StringVar(&agent, "agent", "bot", "`NAME` of the agent to act as: its credential is <data dir>/agents/NAME.creds.json (airlock agents add NAME makes one)")
	f.StringVar(&creds, "creds", "", "agent credential file to act with (overrides --agent)")
	f.Uint32Var(&c.Revision, "revision", 0, "revision to submit: 2 or more after a reviewer requested changes (with --call-id)")
	f.StringVar(&c.Tool, "tool", "", "tool to call, as server__tool (e.g. demo__echo)")
	f.StringVar(&argsRaw, "args", "{}", "arguments as a JSON object")
	f.StringVar(&c.Thread, "thread", "", "thread (conversation) id")
	f.StringVar(&c.Reason, "reason", "", "why the agent needs this call")
	f.StringVar(&c.OnBehalfOf, "on-behalf-of", "", "principal the agent acts for")
	f.StringVar(&c.ID, "call-id", "", "call id (generated when empty)")
	f.DurationVar(&wait, "wait", 5*time.Minute, "how long to wait for the outcome")
	g.dataFlag(cmd)
	return cmd
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return ": " + err.Error()
}

// newAwaitCmd is `airlock await AGENT/CALL_ID`: follow a call submitted
// earlier (by `airlock call` whose --wait ran out, or by any agent) until
// its outcome.
func newAwaitCmd(g *globals) *cobra.Command {
	var (
		creds    string
		revision uint32
		wait     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "await AGENT/CALL_ID",
		Short: "Follow a call submitted earlier until its outcome, and print it as JSON",
		Long: `Follows a call of AGENT (with AGENT's credential, <data dir>/agents/AGENT.creds.json,
or --creds) as ` + "`airlock call`" + ` does after submitting it: it says what the call waits
for and prints its outcome. Use it when ` + "`airlock call`" + `'s --wait ran out.

` + callExitStatuses,
		Args: exactArgs(1, ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			agent, id, ok := strings.Cut(args[0], "/")
			if !ok || agent == "" || id == "" {
				return usageErr(cmd, "name the call as AGENT/CALL_ID, e.g. bot/call_3f9c..., as `airlock call` printed it")
			}
			cfg, client, err := g.agentClient(cmd.Context(), agent, creds)
			d := natsauth.Dev{DataDir: cfg.Dev.DataDir}
			if errors.Is(err, errNoCredential) && creds == "" && fileExists(d.SeedFile(natsauth.RoleAdmin)) {
				// Beside a dev, whose agents all have their credential
				// here, an agent without one is no agent of it: its call
				// is unknown, as a mistyped call id's is.
				fmt.Fprintln(cmd.ErrOrStderr(), unknownAgentText(agent, id, d))
				return exitError{exitUsage}
			}
			if err != nil {
				return unsent(err)
			}
			defer client.Close()
			stderr := cmd.ErrOrStderr()
			name := client.Agent() + "/" + id
			out, ended, err := client.EndedWithin(cmd.Context(), id, revision, min(wait, unknownCallGrace))
			switch {
			case errors.Is(err, airlock.ErrUnknownCall):
				fmt.Fprintln(stderr, unknownCallText(name, client.Agent(), id, cfg))
				return exitError{exitUsage}
			case err != nil:
				fmt.Fprintf(stderr, "call %s: %s\n", name, escape.Terminal(err.Error()))
				return exitError{exitUsage}
			case ended:
				fmt.Fprintln(stderr, endedText(name, out, time.Now()))
				return printOutcome(os.Stdout, stderr, agentArgs(client.Agent(), cfg.Dev.DataDir), id, out)
			}
			fmt.Fprintf(stderr, "following call %s for up to %s\n", name, wait)
			return follow(cmd.Context(), os.Stdout, stderr, cfg, client, id, revision, wait, g.registryCheck(cfg))
		},
	}
	cmd.Flags().StringVar(&creds, "creds", "", "agent credential file (default <data dir>/agents/AGENT.creds.json)")
	cmd.Flags().Uint32Var(&revision, "revision", 0, "revision to follow (default the newest)")
	cmd.Flags().DurationVar(&wait, "wait", 5*time.Minute, "how long to wait for the outcome")
	g.dataFlag(cmd)
	return cmd
}

// agentClient connects as an agent with its credential.
func (g *globals) agentClient(ctx context.Context, agent, creds string) (config.Config, *airlock.Client, error) {
	cfg, err := g.load()
	if err != nil {
		return cfg, nil, err
	}
	file, err := agentCredential(cfg.Dev.DataDir, agent, creds, true)
	if err != nil {
		return cfg, nil, err
	}
	if cfg.HTTP.PublicURL == config.Default().HTTP.PublicURL {
		// Links point at the running dev's console (it may listen on
		// another --http address); without it, at the configured default.
		d := natsauth.Dev{DataDir: cfg.Dev.DataDir}
		if u, err := runningDevFile(d, d.ConsoleURLFile(), ""); err == nil && u != "" {
			cfg.HTTP.PublicURL = u
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	client, err := airlock.Connect(cctx, file, g.natsURL, airlock.WithStream(cfg.Stream.Name), airlock.WithMaxRequestBytes(cfg.Limits.MaxRequestBytes))
	if err != nil {
		return cfg, nil, err
	}
	return cfg, client, nil
}

// unknownCallGrace is how long `airlock await` waits for a call nothing of
// which is recorded before it says so: a call submitted a moment ago is
// recorded once the policy service has read its request.
const unknownCallGrace = 3 * time.Second

// unknownCallText says that airlock knows no call name, and what to check.
func unknownCallText(name, agent, id string, cfg config.Config) string {
	return fmt.Sprintf("no call %s is known: airlock has recorded no request, decision or outcome of a call %s of agent %s. "+
		"Check the call id and the agent: name the call AGENT/CALL_ID as `airlock call` printed it "+
		"(`airlock approvals list%s` lists the calls waiting for a person). "+
		"A call older than the events stream keeps (stream.max_age, %s) is not known any more, "+
		"and one submitted just now is known once airlock's policy service has read it (is airlock running?).",
		escape.Terminal(name), escape.Terminal(id), escape.Terminal(agent), dataArg(cfg.Dev.DataDir), days(cfg.Stream.MaxAge))
}

// unknownAgentText says that the dev of d knows no agent, so no call of
// it, and what to check.
func unknownAgentText(agent, id string, d natsauth.Dev) string {
	known := "it has none"
	if creds, err := natsauth.AgentCredentials(d.AgentsDir()); err == nil && len(creds) > 0 {
		names := make([]string, 0, len(creds))
		for _, c := range creds {
			names = append(names, c.Agent)
		}
		known = "its agents are " + strings.Join(names, ", ")
	}
	return fmt.Sprintf("no call %s/%s is known: the airlock dev on the data dir %s has no agent %s (no credential at %s; %s). "+
		"Check the agent and the call id: name the call AGENT/CALL_ID as `airlock call` printed it "+
		"(`airlock approvals list%s` lists the calls waiting for a person), or name another data dir with --data DIR.",
		escape.Terminal(agent), escape.Terminal(id), d.DataDir, escape.Terminal(agent), escape.Terminal(d.CredentialFile(agent)), escape.Terminal(known), dataArg(d.DataDir))
}

// days is a retention in days when it is whole days (90 days, not 2160h0m0s).
func days(d time.Duration) string {
	if d > 0 && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	return d.String()
}

// endedText says, in the past tense, how and when a call that had ended
// before `airlock await` looked at it ended.
func endedText(name string, o airlock.Outcome, now time.Time) string {
	e := escape.Terminal
	when := "at an unknown time"
	if !o.At.IsZero() {
		when = fmt.Sprintf("at %s (%s ago)", o.At.UTC().Format("2006-01-02 15:04:05 UTC"), now.Sub(o.At).Round(time.Second))
	}
	how := string(o.Status)
	switch o.Status {
	case airlock.StatusCompleted, airlock.StatusFailed:
		switch {
		case o.Status == airlock.StatusCompleted:
			how = "completed: the tool ran"
		case o.FailureOutcome == calls.FailureIndeterminate:
			how = "failed, indeterminate (the tool may have run): " + e(o.Reason)
		default:
			how = "failed: " + e(o.Reason)
		}
		switch {
		case o.DecidedBy == "policy":
			how += "; it was allowed by the policy"
		case o.DecidedBy != "" && o.ArgumentsEdited:
			how += fmt.Sprintf("; it was approved by %s with EDITED arguments, which ran:\n  %s", e(o.DecidedBy), e(string(o.Arguments)))
		case o.DecidedBy != "":
			how += "; it was approved by " + e(o.DecidedBy)
		}
	case airlock.StatusDenied:
		how = "denied by the policy: " + e(o.Reason)
	case airlock.StatusRejected:
		how = fmt.Sprintf("rejected by %s: %s", e(dash(o.DecidedBy)), e(o.Reason))
	case airlock.StatusChangesRequested:
		how = "changes requested by " + e(dash(o.DecidedBy))
	case airlock.StatusExpired:
		how = "expired: nobody decided it before its deadline"
	case airlock.StatusCanceled:
		how = fmt.Sprintf("canceled by %s: %s", e(dash(o.DecidedBy)), e(o.Reason))
	case airlock.StatusInvalid:
		how = "refused as invalid: " + e(o.Reason)
	case airlock.StatusAllowed, airlock.StatusApproved:
		how = fmt.Sprintf("%s by %s (a gate-only call: the agent runs the tool itself)", o.Status, e(dash(o.DecidedBy)))
	}
	return fmt.Sprintf("call %s revision %d already ended %s: %s", e(name), o.Revision, when, how)
}

// follow waits up to wait for the outcome of revision rev (0: the newest)
// of the agent's call id, telling the person at the terminal (on log) what
// it waits for (a progressTeller), and prints the outcome as JSON on out.
func follow(ctx context.Context, out, log io.Writer, cfg config.Config, client *airlock.Client, id string, rev uint32, wait time.Duration, missing toolCheck) error {
	name := client.Agent() + "/" + id
	teller := newProgressTeller(ctx, log, cfg, client.Agent(), id, missing)
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	res, err := client.AwaitProgress(wctx, id, rev, teller.progress)
	teller.stop(res.Status != "")
	if err != nil && res.Status == "" {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			fmt.Fprintf(log, "no outcome for call %s within %s: it may still be decided. Follow it with:\n  airlock await %s --wait 10m%s\n", name, wait, name, dataArg(cfg.Dev.DataDir))
			return exitError{exitStillWaiting}
		}
		fmt.Fprintf(log, "call %s: %s\n", name, escape.Terminal(err.Error()))
		return exitError{exitUsage}
	}
	return printOutcome(out, log, agentArgs(client.Agent(), cfg.Dev.DataDir), id, res)
}

// toolCheck says what stops call from running even approved (a tool the
// registry does not have), or "" (also when it cannot tell by ctx's end).
type toolCheck func(ctx context.Context, call *airlockv1.ToolCall) string

// progressTeller tells the person at the terminal each step of a call
// once. When the policy asks a person, it asks missing whether the call
// can run at all — once, and beside the steps, never holding them up: the
// answer is told when it comes, unless the call has ended by then (stop).
// So the registry is listed only for a call that waits for a person.
type progressTeller struct {
	log       io.Writer
	cfg       config.Config
	agent, id string
	missing   toolCheck
	said      map[string]bool // touched only by progress, which AwaitProgress calls in turn

	mu      sync.Mutex // log's lines, told by progress and by the check
	checks  sync.WaitGroup
	asking  context.Context
	stopped context.CancelFunc
}

func newProgressTeller(ctx context.Context, log io.Writer, cfg config.Config, agent, id string, missing toolCheck) *progressTeller {
	asking, stopped := context.WithCancel(ctx)
	return &progressTeller{log: log, cfg: cfg, agent: agent, id: id, missing: missing, said: map[string]bool{}, asking: asking, stopped: stopped}
}

// progress tells step p, the first time its type is seen. It does not block.
func (t *progressTeller) progress(p airlock.Progress) {
	if t.said[p.Type] {
		return
	}
	t.said[p.Type] = true
	name := t.agent + "/" + t.id
	t.mu.Lock()
	defer t.mu.Unlock()
	switch p.Type {
	case subject.ApprovalRequested:
		d := p.Decision
		fmt.Fprintf(t.log, "waiting for a person: %s (risk %s, rule %s)\n", escape.Terminal(d.GetReason()), calls.RiskName(d.GetRisk()), escape.Terminal(dash(d.GetRuleId())))
		who := escape.Terminal(strings.Join(d.GetApprovers(), ", "))
		if who == "" {
			who = "a reviewer"
		}
		quorum := ""
		if d.GetQuorum() > 1 {
			quorum = fmt.Sprintf(" (%d of them)", d.GetQuorum())
		}
		until := ""
		if !p.Deadline.IsZero() {
			until = " before " + p.Deadline.UTC().Format("15:04:05 UTC")
		}
		// Once a call has several revisions, deciding names the one reviewed.
		decide := "(then approve, reject or changes)"
		if p.Revision > 1 {
			decide = fmt.Sprintf("(then approve, reject or changes with --revision %d)", p.Revision)
		}
		fmt.Fprintf(t.log, "  %s%s may decide%s:\n    %s\n    airlock approvals show %s%s   %s\n", who, quorum, until, consoleLink(t.cfg, t.agent, t.id, p.Revision), name, dataArg(t.cfg.Dev.DataDir), decide)
		if p.Call != nil && t.missing != nil {
			t.checks.Add(1)
			go t.check(p.Call)
		}
	case subject.Approved:
		if p.Arguments != nil {
			fmt.Fprintf(t.log, "approved by %s with EDITED arguments; the executor runs it now with:\n  %s\n", escape.Terminal(dash(p.By)), escape.Terminal(string(p.Arguments)))
			break
		}
		fmt.Fprintf(t.log, "approved by %s; the executor runs it now\n", escape.Terminal(dash(p.By)))
	case subject.Allowed:
		fmt.Fprintln(t.log, "allowed by the policy; the executor runs it now")
	}
}

// check asks whether call can run and tells the answer, unless the call
// ended first (stop): then it is no news.
func (t *progressTeller) check(call *airlockv1.ToolCall) {
	defer t.checks.Done()
	text := t.missing(t.asking, call)
	t.mu.Lock()
	defer t.mu.Unlock()
	if text == "" || t.asking.Err() != nil {
		return
	}
	fmt.Fprintf(t.log, "%s\n  cancel it (airlock approvals cancel %s/%s --reason \"no such tool\"%s) and call a tool the registry has, or add this one to the tools file (executor.tools_file)\n", text, t.agent, t.id, dataArg(t.cfg.Dev.DataDir))
}

// stop returns once nothing more is told: at once when the call has ended
// (a check under way is no news then, and ends untold), else once the
// check under way has told its answer (the call still waits).
func (t *progressTeller) stop(ended bool) {
	if ended {
		t.stopped()
	}
	t.checks.Wait()
	t.stopped()
}

// printOutcome prints a call's outcome as JSON on out, says on log what to
// do after changes were requested (the command it prints names the agent
// and its dev with again, from agentArgs), and is the exit status it means.
func printOutcome(out, log io.Writer, again, id string, res airlock.Outcome) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return fmt.Errorf("print the outcome: %w", err)
	}
	// The same JSON, with what JSON leaves raw (bidi and zero-width
	// characters, tag characters) as \u escapes: a person may read it.
	if _, err := out.Write(escape.JSON(buf.Bytes())); err != nil {
		return fmt.Errorf("print the outcome: %w", err)
	}
	if res.Status == airlock.StatusChangesRequested {
		fmt.Fprintf(log, "a reviewer asked for changes: %s\n  submit the revised call with: airlock call%s --call-id %s --revision %d --tool ... --args ...\n", escape.Terminal(res.Feedback), again, id, res.Revision+1)
	}
	if !res.Completed() {
		return exitError{exitNotCompleted}
	}
	return nil
}

// agentArgs are the flags of a printed `airlock call` that act as agent on
// the dev of dataDir again: --agent always (a revision submitted as
// another agent is another agent's call), --data when not the default.
func agentArgs(agent, dataDir string) string {
	return " --agent " + hooks.ShellQuote(agent) + dataArg(dataDir)
}

// consoleLink is the console page of a call revision.
func consoleLink(cfg config.Config, agent, id string, rev uint32) string {
	base := strings.TrimRight(cfg.HTTP.PublicURL, "/")
	if base == "" {
		base = "http://" + cfg.HTTP.Addr
	}
	link := base + "/calls/" + url.PathEscape(agent) + "/" + url.PathEscape(id)
	if rev > 1 {
		link += fmt.Sprintf("?rev=%d", rev)
	}
	return link
}

// registryCheck asks the tool registry whether it has a call's tool (for a
// few seconds at most): a sentence when the registry has no such tool,
// else "". Agents may not read the registry (airlock.api.executor.tools),
// so it asks with the operator's credential, which `airlock dev` leaves in
// its data dir (or the configured nats credentials); without one it can
// say nothing.
func (g *globals) registryCheck(cfg config.Config) toolCheck {
	return func(ctx context.Context, call *airlockv1.ToolCall) string {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		nc, _, err := g.connect(ctx, cfg)
		if err != nil {
			return ""
		}
		defer nc.Close()
		list, err := executorapi.New(nc).List(ctx)
		if err != nil {
			return ""
		}
		return missingToolText(list, call.GetServer(), call.GetTool())
	}
}

// missingToolText says that the registry list has no tool server__tool, and
// what it has instead (executorapi.Lacks); "" when it has it, or when the
// server could not be listed just now (it may have it).
func missingToolText(list *airlockv1.ToolsListResponse, server, tool string) string {
	if u := executorapi.Lacks(list, server, tool); u != nil {
		return executorapi.Sentence(u, escape.Terminal)
	}
	return ""
}
