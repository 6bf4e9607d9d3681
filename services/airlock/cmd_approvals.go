package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/escape"
	"github.com/airlock-gate/airlock/services/shared/executorapi"
	"github.com/airlock-gate/airlock/services/shared/lookalike"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
	"github.com/airlock-gate/airlock/services/shared/preview"
)

// apiClient is the reviewer CLI's client of the console's REST API.
type apiClient struct {
	base  string
	token string
	http  *http.Client
}

// apiFlags are the flags every `airlock approvals` command takes.
type apiFlags struct {
	api       string
	tokenFile string
	json      bool
}

// apiFlagHelp is the help of --api wherever a command sends an API token.
// Its one backticked word is the value's name in the help (pflag's
// UnquoteUsage): "airlock dev" in backticks showed as `--api airlock dev`.
const apiFlagHelp = "`URL` of the console / REST API (env AIRLOCK_API; default the console of the data dir's running airlock dev, from <data dir>/console.url)"

func (f *apiFlags) client(g *globals) (*apiClient, error) {
	base := f.api
	if base == "" {
		base = os.Getenv("AIRLOCK_API")
	}
	path := f.tokenFile
	var dataDir string
	if path == "" || base == "" {
		cfg, err := g.load()
		if err != nil {
			return nil, err
		}
		dataDir = cfg.Dev.DataDir
	}
	if path == "" {
		path = filepath.Join(dataDir, "admin.token")
	}
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && f.tokenFile == "" {
		return nil, fmt.Errorf("no API token at %s: run this in the directory where `airlock dev` was started, name its data dir with --data DIR (or AIRLOCK_DEV_DATA_DIR=DIR), "+
			"or pass --token-file FILE with a personal token made in the console (Tokens)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("read the API token: %w (create a personal token in the console under Tokens and pass --token-file, or run `airlock dev`, which writes %s)", err, path)
	}
	if base == "" {
		// A token goes only where its console is known to listen: never to
		// a default address, where another person's process may listen.
		if base, err = devConsoleURL(dataDir); err != nil {
			return nil, err
		}
	}
	return &apiClient{base: strings.TrimRight(base, "/"), token: strings.TrimSpace(string(raw)), http: &http.Client{Timeout: 60 * time.Second}}, nil
}

// devConsoleURL is where the `airlock dev` running on dataDir serves its
// console, read from the file it writes while it runs.
func devConsoleURL(dataDir string) (string, error) {
	d := natsauth.Dev{DataDir: dataDir}
	file := d.ConsoleURLFile()
	u, err := runningDevFile(d, file, ", or pass --api URL (or set AIRLOCK_API) naming the console the API token belongs to")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if u == "" {
		return "", fmt.Errorf("no console address: %s is not there, so no `airlock dev` runs on the data dir %s. "+
			"Start `airlock dev` there, name the right data dir with --data DIR (or AIRLOCK_DEV_DATA_DIR=DIR), "+
			"or pass --api URL (or set AIRLOCK_API) naming the console the API token belongs to", file, dataDir)
	}
	return u, nil
}

// apiError is the REST API's error reply: its sentence and code.
type apiError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *apiError) Error() string {
	if e.Code == "" {
		return e.Message
	}
	return fmt.Sprintf("%s (%s)", e.Message, e.Code)
}

// refusal makes the API's refusal of a request (a 4xx reply other than a
// rate limit: a revision not named, no such call, not allowed) a usage
// error, exit status 2, as the decide commands' help says; anything else
// (unreachable, unavailable) stays an error, exit status 1.
func refusal(err error) error {
	var e *apiError
	if errors.As(err, &e) && e.Status >= 400 && e.Status < 500 && e.Status != http.StatusTooManyRequests {
		return usageError{err.Error()}
	}
	return err
}

// protoBody sends a protobuf message as its protojson.
type protoBody struct{ proto.Message }

// do sends a request and decodes a successful reply into out (a proto
// message or any JSON value). An error reply becomes the API's sentence.
func (c *apiClient) do(ctx context.Context, method, path string, body any, out any) error {
	var r io.Reader
	if body != nil {
		var data []byte
		var err error
		if pb, ok := body.(protoBody); ok {
			data, err = protojson.Marshal(pb.Message)
		} else {
			data, err = json.Marshal(body)
		}
		if err != nil {
			return err
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-Airlock-Channel", "cli")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("nothing answers at %s (connection refused): start airlock (`go tool task up`, or `airlock dev`), or name where its console listens with --api or AIRLOCK_API", c.base)
	}
	if err != nil {
		return fmt.Errorf("reach the airlock API at %s: %w (is `airlock dev` running? set --api)", c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		e := &apiError{Status: resp.StatusCode}
		if json.Unmarshal(data, e) != nil || e.Message == "" {
			e.Message = "the API answered " + resp.Status
		}
		return e
	}
	switch o := out.(type) {
	case nil:
		return nil
	case proto.Message:
		return envelope.JSONRead.Unmarshal(data, o)
	default:
		return json.Unmarshal(data, out)
	}
}

func newApprovalsCmd(g *globals) *cobra.Command {
	f := &apiFlags{}
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List and decide pending calls through the REST API (as a reviewer)",
		Long: `Reviewer commands on top of the console's REST API. They act as the owner of
the API token: by default the admin token that ` + "`airlock dev`" + ` writes to
<data dir>/admin.token; create a personal token in the console (Tokens) for
anyone else. The approval service decides whether that person may decide.

Each command exits 2 when it was used wrongly or the API refused it (no such
call, a state that is none, not yours to decide, ...) and 1 when the API
could not be reached; the decide commands say more in their help.`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.api, "api", "", apiFlagHelp)
	pf.StringVar(&f.tokenFile, "token-file", "", "file holding an API token (default <data dir>/admin.token)")
	pf.BoolVar(&f.json, "json", false, "print the API's JSON")
	g.dataFlag(cmd)
	cmd.AddCommand(
		approvalsListCmd(g, f), approvalsShowCmd(g, f),
		approvalsDecideCmd(g, f, "approve", "Approve a pending call"),
		approvalsDecideCmd(g, f, "reject", "Reject a pending call; the agent receives the reason"),
		approvalsDecideCmd(g, f, "changes", "Request changes; the agent receives the feedback and may submit a revision"),
		approvalsDecideCmd(g, f, "edit", "Approve a pending call with edited arguments"),
		approvalsRememberCmd(g, f), approvalsGrantsCmd(g, f), approvalsRevokeCmd(g, f),
		approvalsCancelCmd(g, f), approvalsInDoubtCmd(g, f), approvalsResolveCmd(g, f),
	)
	return cmd
}

func printJSON(m proto.Message) {
	if err := printProtoJSON(os.Stdout, m); err != nil {
		fmt.Fprintln(os.Stderr, "airlock:", err)
	}
}

func approvalsListCmd(g *globals, f *apiFlags) *cobra.Command {
	var state, agent, tool, risk string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List pending calls (or --state decided, approved, rejected, ...)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client(g)
			if err != nil {
				return err
			}
			q := url.Values{}
			for k, v := range map[string]string{"state": state, "agent": agent, "tool": tool, "risk": risk} {
				if v != "" {
					q.Set(k, v)
				}
			}
			var out listReply
			if err := c.do(cmd.Context(), http.MethodGet, "/api/v1/approvals?"+q.Encode(), nil, &out); err != nil {
				return refusal(fmt.Errorf("list approvals: %w", err))
			}
			if f.json {
				b, err := json.MarshalIndent(out, "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Printf("%s\n", escape.JSON(b)) // the same JSON, nothing hidden
				return err
			}
			printList(os.Stdout, out, time.Now())
			return nil
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "pending (default), decided, or a state such as approved, rejected")
	cmd.Flags().StringVar(&agent, "agent", "", "only this agent's calls")
	cmd.Flags().StringVar(&tool, "tool", "", "only this tool (server__tool)")
	cmd.Flags().StringVar(&risk, "risk", "", "only calls of at least this risk (low, medium, high, critical)")
	return cmd
}

// listReply is GET /api/v1/approvals: each record is decoded on its own, so
// one the CLI cannot read is named and the others still print.
type listReply struct {
	Records  []json.RawMessage `json:"records"`
	Problems []struct {
		AgentID  string `json:"agent_id"`
		CallID   string `json:"call_id"`
		Revision uint32 `json:"revision"`
		Problem  string `json:"problem"`
	} `json:"problems,omitempty"`
}

// printList prints the records as a table, then what could not be shown.
func printList(w io.Writer, out listReply, now time.Time) {
	if len(out.Records) == 0 && len(out.Problems) == 0 {
		fmt.Fprintln(w, "no calls")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "CALL\tREV\tTOOL\tRISK\tSTATE\tASKED\tPOLICY")
	var unreadable, lookAlikes []string
	for _, raw := range out.Records {
		r := &airlockv1.ApprovalRecord{}
		if err := envelope.JSONRead.Unmarshal(raw, r); err != nil {
			unreadable = append(unreadable, fmt.Sprintf("a record cannot be read (%v): %s", err, cliOneLine(string(raw), 80)))
			continue
		}
		asked := ""
		if r.GetCreatedAt() != nil {
			asked = now.Sub(r.GetCreatedAt().AsTime()).Round(time.Second).String() + " ago"
		}
		flag := ""
		warnings := lookalike.Warnings(r.GetCall(), nil, escape.Terminal)
		if len(r.GetProblems()) > 0 || len(warnings) > 0 {
			flag = " (!)"
		}
		for _, w := range warnings {
			lookAlikes = append(lookAlikes, escape.Terminal(r.GetCall().GetAgentId()+"/"+r.GetCall().GetCallId())+": "+w)
		}
		fmt.Fprintf(tw, "%s%s\t%d\t%s\t%s\t%s\t%s\t%s\n", escape.Terminal(r.GetCall().GetAgentId()+"/"+r.GetCall().GetCallId()), flag, max(r.GetCall().GetRevision(), 1), escape.Terminal(calls.QualifiedTool(r.GetCall())),
			calls.RiskName(r.GetDecision().GetRisk()), calls.StateName(r.GetState()), asked, cliOneLine(r.GetDecision().GetReason(), 60))
	}
	_ = tw.Flush()
	for _, l := range lookAlikes {
		fmt.Fprintf(w, "(!) %s\n", l)
	}
	for _, p := range out.Problems {
		fmt.Fprintf(w, "(!) %s/%s revision %d: %s\n", escape.Terminal(p.AgentID), escape.Terminal(p.CallID), p.Revision, escape.Terminal(p.Problem))
	}
	for _, u := range unreadable {
		fmt.Fprintf(w, "(!) %s\n", escape.Terminal(u))
	}
}

// callArg reads a call named on the command line as AGENT/CALL_ID (call ids
// are chosen by agents and unique only per agent) and returns its API path.
func callArg(cmd *cobra.Command, s string) (string, error) {
	agent, call, ok := strings.Cut(s, "/")
	if !ok {
		return "", usageErr(cmd, "name the call as AGENT/CALL_ID (e.g. bot/call_3f9c...), as `airlock approvals list` shows it")
	}
	ref, err := callref.New(agent, call, 0)
	if err != nil {
		return "", usageErr(cmd, "%v", err)
	}
	return "/api/v1/approvals/" + url.PathEscape(ref.Agent) + "/" + url.PathEscape(ref.Call), nil
}

// cliOneLine is s as one line of at most about n bytes on a terminal, its
// whitespace runs as single spaces (escape.Terminal).
func cliOneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = calls.Cut(s, n-3) + "..."
	}
	return escape.Terminal(s)
}

// getCall reads the approval record of AGENT/CALL_ID arg through the
// console's API, and returns the client and the call's API path for what the
// command does next (verb names the command in an error).
func getCall(cmd *cobra.Command, g *globals, f *apiFlags, arg, verb string) (*airlockv1.GetResponse, *apiClient, string, error) {
	path, err := callArg(cmd, arg)
	if err != nil {
		return nil, nil, "", err
	}
	c, err := f.client(g)
	if err != nil {
		return nil, nil, "", err
	}
	var raw json.RawMessage
	if err := c.do(cmd.Context(), http.MethodGet, path, nil, &raw); err != nil {
		return nil, nil, "", refusal(fmt.Errorf("%s %s: %w", verb, arg, err))
	}
	out := &airlockv1.GetResponse{}
	if err := envelope.JSONRead.Unmarshal(raw, out); err != nil {
		return nil, nil, "", fmt.Errorf("%s %s: the API's answer: %w", verb, arg, err)
	}
	return out, c, path, nil
}

func approvalsShowCmd(g *globals, f *apiFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "show AGENT/CALL_ID",
		Short: "Show one call: tool, arguments (edited ones too), policy reason, votes, state, timeline",
		Args:  exactArgs(1, ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			out, c, path, err := getCall(cmd, g, f, args[0], "show")
			if err != nil {
				return err
			}
			if f.json {
				printJSON(out)
				return nil
			}
			printRecord(os.Stdout, out.Record)
			if u := out.GetUnknownTool(); u != nil && out.Record.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_PENDING {
				fmt.Printf("warning   %s\n", executorapi.Warning(u, escape.Terminal))
			}
			var tl struct {
				Events []struct {
					Type, Actor, Detail string
					Time                time.Time
				}
				// The console shows a call's first and last 100 events
				// and counts those between (timelineEnds).
				Omitted   int    `json:"omitted"`
				AllEvents string `json:"all_events"`
			}
			if err := c.do(cmd.Context(), http.MethodGet, path+"/events", nil, &tl); err != nil {
				return fmt.Errorf("events of %s: %w", args[0], err)
			}
			fmt.Println("timeline")
			for i, e := range tl.Events {
				if i == len(tl.Events)/2 && tl.Omitted > 0 {
					fmt.Printf("  … %d more events not shown here: %s lists every one\n", tl.Omitted, escape.Terminal(tl.AllEvents))
				}
				fmt.Printf("  %s  %-20s %-24s %s\n", e.Time.UTC().Format(time.TimeOnly), escape.Terminal(e.Type), escape.Terminal(e.Actor), cliOneLine(e.Detail, 80))
			}
			return nil
		},
	}
}

// printRecord prints one call: what it is, why the policy asked, its
// state, and its arguments — the edited ones too, which are what runs.
// Every string an agent, a reviewer or a tool wrote is one line of
// terminal text (escape.Terminal): none can clear the screen or draw lines
// that pass for the record's own.
func printRecord(w io.Writer, r *airlockv1.ApprovalRecord) {
	c, t := r.GetCall(), escape.Terminal
	fmt.Fprintf(w, "call      %s/%s (revision %d)\ntool      %s\nagent     %s", t(c.GetAgentId()), t(c.GetCallId()), max(c.GetRevision(), 1), t(calls.QualifiedTool(c)), t(c.GetAgentId()))
	if c.GetOnBehalfOf() != "" {
		fmt.Fprintf(w, " on behalf of %s", calls.OnBehalfOfText(c, t))
	}
	fmt.Fprintln(w)
	for _, l := range lookalike.Warnings(c, nil, t) {
		fmt.Fprintf(w, "(!)       %s\n", l)
	}
	if c.GetThreadId() != "" {
		fmt.Fprintf(w, "thread    %s\n", t(c.GetThreadId()))
	}
	// The agent's reason is labelled as its words, as every other surface
	// labels it ("Agent's reason"): plain "reason" under the policy's read
	// as the policy's own.
	fmt.Fprintf(w, "state     %s\nrisk      %s\npolicy    %s (rule %s)\nagent's reason %s\nvotes     %d of %d\n",
		calls.StateText(r.GetState()), calls.RiskName(r.GetDecision().GetRisk()), t(r.GetDecision().GetReason()), t(dash(r.GetDecision().GetRuleId())),
		t(dash(c.GetReason())), len(r.GetVotes()), max(r.GetDecision().GetQuorum(), 1))
	// Who may decide and until when, as `airlock call` and the console say.
	if a := r.GetDecision().GetApprovers(); len(a) > 0 {
		fmt.Fprintf(w, "approvers %s\n", t(strings.Join(a, ", ")))
	}
	if d := r.GetDeadline(); d != nil && r.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_PENDING {
		fmt.Fprintf(w, "deadline  %s\n", d.AsTime().UTC().Format("2006-01-02 15:04:05 UTC"))
	}
	if r.GetEditedArguments() != nil {
		fmt.Fprintf(w, "arguments as the agent asked (not run)\n          %s\n", indentJSON(c.GetArguments(), c))
		fmt.Fprintf(w, "arguments as edited by a reviewer (these run)\n          %s\n", indentJSON(r.GetEditedArguments(), c))
	} else {
		fmt.Fprintf(w, "arguments %s\n", indentJSON(c.GetArguments(), c))
	}
	if c.GetCwd() != "" { // the agent's choice, where a relative path in the arguments takes effect
		fmt.Fprintf(w, "cwd       %s\n", t(c.GetCwd()))
	}
	fmt.Fprintf(w, "preview   %s\n", t(preview.SummaryOf(r)))
	if p := r.GetPreview(); preview.Has(p) && p.GetText() != "" {
		fmt.Fprintf(w, "          made against %s\n          %s\n", t(p.GetPrecondition()),
			escape.TerminalLines(strings.ReplaceAll(strings.TrimSuffix(p.GetText(), "\n"), "\n", "\n          ")))
	}
	for _, p := range r.GetProblems() {
		fmt.Fprintf(w, "(!)       %s\n", t(p))
	}
	if r.GetDecidedBy() != nil {
		by := t(r.GetDecidedBy().GetId())
		if note := calls.ActorNote(r.GetDecidedBy()); note != "" {
			by += " (" + t(note) + ")"
		}
		fmt.Fprintf(w, "decided   by %s: %s\n", by, t(r.GetReason()))
	}
}

// indentJSON is s indented under printRecord's labels, bounded as every
// surface bounds arguments (calls.JSONText): past calls.ShownArgumentsBytes
// it says how much it shows and how to read the whole of c's arguments.
func indentJSON(s *structpb.Struct, c *airlockv1.ToolCall) string {
	text, whole := calls.JSONText(s, "  ", calls.ShownArgumentsBytes)
	if !whole {
		text += "\n" + calls.CutMarker(calls.ShownArgumentsBytes, s, fmt.Sprintf("airlock approvals show --json %s/%s", c.GetAgentId(), c.GetCallId()))
	}
	// no bidi override reorders what a reviewer reads
	return escape.TerminalLines(strings.ReplaceAll(text, "\n", "\n          ")) // JSON keeps bidi overrides and C1 controls raw
}

func approvalsDecideCmd(g *globals, f *apiFlags, name, short string) *cobra.Command {
	var reason, argsJSON string
	var revision uint32
	textFlag := map[string]string{"approve": "--comment", "edit": "--comment", "reject": "--reason", "changes": "--feedback"}[name]
	cmd := &cobra.Command{
		Use:   name + " AGENT/CALL_ID",
		Short: short,
		Long: short + `.

Exit status 0 when the decision changed the call (with a quorum, when your
vote was counted); 1 when it changed nothing (the call was already decided,
you had already voted, ...) or the API could not be reached; 2 when the
command was used wrongly or the API refused the decision (no such call, a
call with several revisions decided without --revision, not yours to
decide, ...).`,
		Args: exactArgs(1, textFlag),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{"revision": revision}
			path, err := callArg(cmd, args[0])
			if err != nil {
				return err
			}
			path += "/"
			switch name {
			case "approve":
				path += "approve"
				body["reason"] = reason
			case "edit":
				path += "approve"
				var edited map[string]any
				if err := json.Unmarshal([]byte(argsJSON), &edited); err != nil || edited == nil {
					return usageErr(cmd, "--args must be a JSON object such as '{\"path\":\"/tmp/x\"}'")
				}
				body["reason"], body["arguments"] = reason, edited
			case "reject":
				if strings.TrimSpace(reason) == "" {
					return usageErr(cmd, "--reason is required: the agent receives it")
				}
				path += "reject"
				body["reason"] = reason
			case "changes":
				if strings.TrimSpace(reason) == "" {
					return usageErr(cmd, "--feedback is required: the agent receives it")
				}
				path += "changes"
				body["feedback"] = reason
			}
			c, err := f.client(g)
			if err != nil {
				return err
			}
			var out airlockv1.DecideResponse
			if err := c.do(cmd.Context(), http.MethodPost, path, body, &out); err != nil {
				return refusal(fmt.Errorf("%s %s: %w", name, args[0], err))
			}
			return reportChange(f, args[0], &out, out.GetMessage(), out.GetRecord(), out.GetChanged())
		},
	}
	switch name {
	case "changes":
		cmd.Flags().StringVar(&reason, "feedback", "", "what the agent should change (required)")
	case "reject":
		cmd.Flags().StringVar(&reason, "reason", "", "why (required; the agent receives it)")
	default:
		cmd.Flags().StringVar(&reason, "comment", "", "a comment recorded with the approval")
	}
	if name == "edit" {
		cmd.Flags().StringVar(&argsJSON, "args", "", "the arguments to run with, as a JSON object (required)")
		_ = cmd.MarkFlagRequired("args")
	}
	cmd.Flags().Uint32Var(&revision, "revision", 0, "the call revision you reviewed (required once a call has more than one)")
	return cmd
}

// reportChange prints what a decision or a cancel did to call (the API's
// JSON with --json): msg, or else the state of rec it left. Nothing
// changed is exit status 1.
func reportChange(f *apiFlags, call string, out proto.Message, msg string, rec *airlockv1.ApprovalRecord, changed bool) error {
	if f.json {
		printJSON(out)
	} else {
		if msg == "" {
			msg = calls.StateText(rec.GetState())
		}
		if !changed && !strings.Contains(msg, "nothing changed") {
			msg += "; nothing changed"
		}
		fmt.Printf("%s: %s\n", call, escape.Terminal(msg))
	}
	if !changed {
		return exitError{1}
	}
	return nil
}

func approvalsCancelCmd(g *globals, f *apiFlags) *cobra.Command {
	var reason string
	short := "Cancel a pending call without deciding it; the agent receives the reason"
	cmd := &cobra.Command{
		Use:   "cancel AGENT/CALL_ID",
		Short: short,
		Long: short + `.

The call never runs. Its approvers and the person it acts for may cancel it;
anyone else is refused, and the attempt is recorded.

Exit status 0 when the call was canceled; 1 when it changed nothing (the
call was already decided) or the API could not be reached; 2 when the
command was used wrongly or the API refused the cancel (no such call, not
yours to cancel, ...).`,
		Args: exactArgs(1, "--reason"),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := callArg(cmd, args[0])
			if err != nil {
				return err
			}
			if strings.TrimSpace(reason) == "" {
				return usageErr(cmd, "--reason is required: the agent receives it")
			}
			c, err := f.client(g)
			if err != nil {
				return err
			}
			var out airlockv1.CancelResponse
			if err := c.do(cmd.Context(), http.MethodPost, path+"/cancel", map[string]any{"reason": reason}, &out); err != nil {
				return refusal(fmt.Errorf("cancel %s: %w", args[0], err))
			}
			msg := ""
			if !out.GetChanged() {
				msg = "already " + calls.StateText(out.GetRecord().GetState())
			}
			return reportChange(f, args[0], &out, msg, out.GetRecord(), out.GetChanged())
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (required; the agent receives it)")
	return cmd
}
