package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/gateway/codemode"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/escape"
	"github.com/airlock-gate/airlock/services/shared/ids"
	"github.com/airlock-gate/airlock/services/shared/ingress"
)

// Code mode (seed 001): an endpoint with run_code enabled offers a tool
// that runs the model's JavaScript in the codemode sandbox, where each of
// the endpoint's tools is an async function. Every call the script makes
// is submitted here exactly as a tools/call would be — as the endpoint's
// agent, in the session's thread, decided by policy, with the session's
// progress and elicitation — so runtime enforcement is the only gate. The
// static preview of the script's literal tool calls goes with each call as
// context for the person asked (in its reason and in the elicitation), and
// each call names its script (ToolCall.script: digest, run, index; the
// calls of a run carry the text until one is recorded), which the audit
// record keeps.

// runCodeTool is the tool's name; registry tools are always "server__tool".
const runCodeTool = "run_code"

// Bounds of what a call records of its script.
const (
	previewCalls     = 20   // preview entries
	previewArgsBytes = 300  // one entry's arguments
	previewMoreBytes = 64   // the entry that counts the calls left out
	reasonPreview    = 2500 // the preview's share of a call's reason
)

// scriptRun is one run of a script, as its calls name it.
type scriptRun struct {
	digest, id string
	progress   progressCount // the request's progress count, shared by its calls
	text       string        // cut to ingress.MaxScriptText
	// escapedSize is the whole text's length, escaped.
	escapedSize int
	size        int
	preview     []string
	// recorded: a call of the run was taken (recorded as requested), so
	// the text is in the audit; until then every call carries it, since a
	// call refused as malformed (the script may make its first one so) is
	// never recorded.
	recorded atomic.Bool
}

// newScriptRun is a run of src on an endpoint whose scripts can call
// tools. The preview lists only calls of those tools: any other name (one
// the script made up, perhaps to read as more preview) can only throw.
func newScriptRun(src string, tools []string) *scriptRun {
	// The text is recorded as agent text: what would not show as itself
	// escaped (the digest is of the script as sent), then cut.
	r := &scriptRun{digest: codemode.Digest(src), id: ids.New("run"), size: len(src), text: escape.Visible(src)}
	r.escapedSize = len(r.text)
	if len(r.text) > ingress.MaxScriptText {
		r.text = calls.Cut(r.text, ingress.MaxScriptText)
	}
	// Every literal call is read (a script of ingress.MaxScriptText names
	// a few thousand at most), so names that are no tools cannot push the
	// real calls out of the preview; what does not fit is counted.
	planned, _, err := codemode.Preview(src, ingress.MaxScriptText)
	if err != nil {
		return r
	}
	total, more := 0, 0
	for _, p := range planned {
		if !slices.Contains(tools, p.Tool) {
			continue
		}
		// One line each, on every surface: a tool name the script
		// wrote (tools["a\nb"]) cannot add lines to a prompt.
		e := escape.Terminal(fmt.Sprintf("tools.%s(%s) at line %d", p.Tool, cutJSON(p.Args, previewArgsBytes), p.Line))
		if len(r.preview) == previewCalls || total+len(e) > ingress.MaxPreviewBytes-previewMoreBytes {
			more++
			continue
		}
		r.preview = append(r.preview, e)
		total += len(e)
	}
	if more > 0 {
		r.preview = append(r.preview, fmt.Sprintf("… and %d more calls not shown", more))
	}
	return r
}

// ref is what the run's index-th call records of it: the text until a
// call of the run was recorded.
func (r *scriptRun) ref(index int) *airlockv1.Script {
	s := &airlockv1.Script{Digest: r.digest, RunId: r.id, Index: uint32(index), Size: uint32(r.size), Preview: r.preview}
	if !r.recorded.Load() {
		s.Text = r.text
	}
	return s
}

// previewText is the preview as reviewers see it, labelled as what it is.
func previewText(s *airlockv1.Script, most int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Made by run_code script %s…, its call %d. Static preview of the tool calls the script names (read from its text before it ran; may be incomplete: aliased or computed calls appear only when they run):", strings.TrimPrefix(s.GetDigest(), "sha256:")[:12], s.GetIndex())
	if len(s.GetPreview()) == 0 {
		b.WriteString(" none found")
	}
	for i, p := range s.GetPreview() {
		line := fmt.Sprintf(" %d. %s;", i+1, p)
		if b.Len()+len(line) > most {
			b.WriteString(" …")
			break
		}
		b.WriteString(line)
	}
	return b.String()
}

// runCodeDef is the run_code tool as clients see it, naming the tools a
// script can call.
func runCodeDef(names []string, lim codemode.Limits) *mcp.Tool {
	shown := names
	if len(shown) > 100 {
		shown = shown[:100]
	}
	list := strings.Join(shown, ", ")
	if len(shown) < len(names) {
		list += fmt.Sprintf(", and %d more", len(names)-len(shown))
	}
	return &mcp.Tool{
		Name:  runCodeTool,
		Title: "Run a script that calls this endpoint's tools",
		Description: "Run JavaScript in a sandbox where each tool of this endpoint is an async function: " +
			"`const a = await tools.server__tool({...}); return a;`. The script is the body of an async function (use await and return); " +
			"the answer is what it returns, as JSON, with what it wrote by console.log. Each tool call resolves with the tool's result " +
			"(its structured content, or its text) and is decided by airlock's policy exactly as a direct call: a refused call rejects " +
			"with the reason (catch it, or the script fails), and a call that needs a person's approval waits for it. There is no require, " +
			"import, timer, file system, network or process. Limits: " + fmt.Sprintf("%s in all, %s of running between awaits, %d tool calls, %d bytes of script, %d bytes of output.",
			lim.Timeout, lim.Busy, lim.MaxCalls, lim.MaxScriptBytes, lim.MaxOutputBytes) + " Tools: " + list,
		InputSchema: map[string]any{
			"type":     "object",
			"required": []string{"code"},
			"properties": map[string]any{
				"code": map[string]any{"type": "string", "description": "The script: the body of an async function calling tools.server__tool(args)."},
			},
		},
	}
}

// codeLimits are the endpoint's run_code limits.
func (ep *endpoint) codeLimits() codemode.Limits {
	c := ep.cfg.RunCode
	lim := codemode.Limits{Timeout: c.Timeout, Busy: c.Busy, MaxCalls: c.MaxCalls, MaxScriptBytes: c.MaxScriptBytes,
		MaxOutputBytes: c.MaxOutputBytes, MaxMemoryBytes: uint64(max(c.MaxMemoryMB, 0)) << 20, Isolate: ep.g.exe}.WithDefaults()
	// A script runs only when the audit can record it whole (what ran is
	// what an auditor reads, not a benign head of it).
	lim.MaxScriptBytes = min(lim.MaxScriptBytes, ingress.MaxScriptText)
	// A call's arguments are a request's (limits.max_request_bytes).
	lim.MaxArgBytes = min(lim.MaxArgBytes, ep.maxArgs)
	return lim
}

// syncRunCode (with ep.mu held) registers run_code when it is enabled and
// the tools a script can call changed.
func (ep *endpoint) syncRunCode() {
	if !ep.cfg.RunCode.Enabled {
		return
	}
	names := make([]string, 0, len(ep.tools))
	for n := range ep.tools {
		names = append(names, n)
	}
	slices.Sort(names)
	if ep.codeTools != nil && slices.Equal(names, ep.codeTools) {
		return
	}
	ep.codeTools = names
	ep.server.AddTool(runCodeDef(names, ep.codeLimits()), ep.runCode)
}

// runCode is one run_code call: run the script, each of its tool calls
// through the endpoint's own path, and answer with what it returned or why
// it failed.
func (ep *endpoint) runCode(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Code *string `json:"code"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &in); err != nil || in.Code == nil {
		return errorResult("invalid", "", `run_code takes {"code": "<JavaScript>"}: call it again with the script as the string argument code`), nil
	}
	// A script cannot be rejoined: once its client has closed the request
	// that was to carry its answer, it ends, and gives back its place.
	ctx, stop := ep.untilAnswerUnread(ctx, req)
	defer stop()
	// Each script runs in a child process with its own memory and CPU: an
	// agent sending many at once is held to max_running of them.
	select {
	case ep.codeRunning <- struct{}{}:
		defer func() { <-ep.codeRunning }()
	default:
		return errorResult("script_"+codemode.KindLimit, "", fmt.Sprintf("gateway endpoint %s already runs %d scripts, its limit (run_code.max_running): wait for one to finish, then send this one again", ep.cfg.Name, cap(ep.codeRunning))), nil
	}
	// ... and the gateway, all endpoints together, to its own limit, of
	// which the places other agents are sure of stay theirs.
	release, refused := ep.g.scripts.take(ep.cfg.Agent)
	if release == nil {
		return errorResult("script_"+codemode.KindLimit, "", refused), nil
	}
	defer release()
	lim := ep.codeLimits()
	var serr *codemode.Error
	if errors.As(lim.CheckSize(*in.Code), &serr) {
		return errorResult("script_"+serr.Kind, "", serr.Message), nil
	}
	ep.mu.Lock()
	names := slices.Clone(ep.codeTools)
	ep.mu.Unlock()
	run := newScriptRun(*in.Code, names)
	if run.escapedSize > ingress.MaxScriptText {
		out := errorResult("script_"+codemode.KindLimit, "", fmt.Sprintf("the script is %d bytes as airlock records it (characters that do not show as themselves are written escaped), over the %d the audit records whole: send a shorter script", run.escapedSize, ingress.MaxScriptText))
		out.Meta["airlock/script"] = run.digest
		return out, nil
	}
	res, err := codemode.Run(ctx, *in.Code, names, func(cctx context.Context, c codemode.Call) (any, error) {
		return ep.scriptCall(cctx, req, run, c)
	}, lim)
	ep.log.Info("run_code script ran", "script", run.digest, "run", run.id, "calls", res.Calls, "err", err)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	switch {
	case errors.As(err, &serr):
		out := errorResult("script_"+serr.Kind, "", serr.Message)
		out.Meta["airlock/script"] = run.digest
		return out, nil
	case err != nil:
		ep.log.Warn("a script could not be run", "script", run.digest, "err", err)
		return errorResult("unavailable", "", fmt.Sprintf("airlock could not run the script (%v); try again in a moment", err)), nil
	}
	content := []mcp.Content{&mcp.TextContent{Text: string(res.Value)}}
	if len(res.Logs) > 0 {
		content = append(content, &mcp.TextContent{Text: "console.log:\n" + strings.Join(res.Logs, "\n")})
	}
	var value any
	_ = json.Unmarshal(res.Value, &value)
	return &mcp.CallToolResult{
		Meta:              mcp.Meta{"airlock/script": run.digest, "airlock/script_run": run.id, "airlock/script_calls": res.Calls},
		Content:           content,
		StructuredContent: map[string]any{"result": value, "logs": res.Logs, "calls": res.Calls},
	}, nil
}

// scriptCall submits one of a script's calls exactly as a tools/call of
// the same session, and turns its answer into the promise's outcome.
func (ep *endpoint) scriptCall(ctx context.Context, req *mcp.CallToolRequest, run *scriptRun, c codemode.Call) (any, error) {
	ep.mu.Lock()
	t := ep.tools[c.Tool]
	ep.mu.Unlock()
	if t == nil {
		return nil, fmt.Errorf("gateway endpoint %s has no tool %s any more: it was removed while the script ran", ep.cfg.Name, c.Tool)
	}
	sessionID, stdio := sessionOf(req)
	ref := run.ref(c.Index)
	f := &flight{tool: t, submit: true, made: true, fresh: true, call: airlock.Call{
		ID:     hashID("mcp-", ep.cfg.Name, "script", run.id, strconv.Itoa(c.Index)),
		Server: t.up.GetServer(), Tool: t.up.GetTool(), Args: c.Args,
		Thread:      ep.threadOf(sessionID, stdio),
		OnBehalfOf:  ep.cfg.OnBehalfOf,
		Reason:      truncate(reasonOf(req, ep.cfg.Name)+". "+previewText(ref, reasonPreview), ingress.MaxReasonLen-16),
		Annotations: t.annotations, AnnotationsTrusted: t.up.GetTrusted(),
		Script: ref,
	}, progress: &run.progress}
	res, err := ep.follow(ctx, req, f, true)
	if err != nil {
		return nil, err
	}
	if st, _ := res.Meta["airlock/status"].(string); st != "invalid" && st != "unavailable" {
		run.recorded.Store(true)
	}
	if res.IsError {
		return nil, errors.New(resultText(res))
	}
	return resultValue(res), nil
}

// resultValue is what a tool call's promise resolves with: its structured
// content, else its text (one string), else its content as JSON.
func resultValue(res *mcp.CallToolResult) any {
	if res.StructuredContent != nil {
		return res.StructuredContent
	}
	texts := make([]string, 0, len(res.Content))
	for _, c := range res.Content {
		t, ok := c.(*mcp.TextContent)
		if !ok {
			var v any
			raw, _ := json.Marshal(res.Content)
			_ = json.Unmarshal(raw, &v)
			return v
		}
		texts = append(texts, t.Text)
	}
	return strings.Join(texts, "\n")
}

func resultText(res *mcp.CallToolResult) string {
	var texts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, t.Text)
		}
	}
	if len(texts) == 0 {
		return "the tool answered an error without text"
	}
	return strings.Join(texts, "\n")
}
