package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/escape"
)

// confirmKey names the gateway's confirmation among a 2026-07-28 result's
// input requests.
const confirmKey = "airlock_confirm"

// confirmMode is how a client can ask its person.
type confirmMode int

const (
	noMode      confirmMode = iota // the client cannot ask
	formMode                       // an accept/decline form in the client
	urlMode                        // a link to the call's console page
	consoleMode                    // the client could ask, but not about these arguments: the console decides
)

// confirmModeOf reads what the client said it supports: a form where it
// can (a client naming neither mode supports forms, per the spec), else a
// URL. A form shows at most summaryKeys arguments, each cut to a length,
// so a call it cannot show whole is sent to the console page (a URL, where
// the client supports one), where every argument is shown: accepting a
// form must never approve an argument the person was not shown.
func confirmModeOf(req *mcp.CallToolRequest, args *structpb.Struct) confirmMode {
	caps := req.ClientCapabilities()
	if caps == nil || caps.Elicitation == nil {
		return noMode
	}
	e := caps.Elicitation
	switch {
	case (e.Form != nil || e.URL == nil) && argumentsWhole(args):
		return formMode
	case e.URL != nil:
		return urlMode
	default:
		return consoleMode
	}
}

// confirmation is an elicitation in flight on the calling session.
type confirmation struct {
	rev     uint32
	digest  string
	mode    confirmMode
	id      string
	session *mcp.ServerSession
	answers chan elicitAnswer
	cancel  context.CancelFunc
}

type elicitAnswer struct {
	res *mcp.ElicitResult
	err error
}

// ask puts the confirmation to the person of the session that made the
// call (req.Session: never another session's), on the call's own stream.
func (ep *endpoint) ask(ctx context.Context, req *mcp.CallToolRequest, f *flight, ev *airlockv1.Event, mode confirmMode) *confirmation {
	ar := ev.GetApprovalRequested()
	c := &confirmation{
		rev: max(ev.GetRevision(), 1), digest: ar.GetDecision().GetArgumentsDigest(), mode: mode, id: f.call.ID,
		session: req.Session, answers: make(chan elicitAnswer, 1),
	}
	ectx, cancel := context.WithCancel(ctx)
	c.cancel = cancel
	params := ep.elicitParams(f, ar, mode)
	go func() {
		res, err := req.Session.Elicit(ectx, params)
		c.answers <- elicitAnswer{res, err}
	}()
	return c
}

// stop withdraws the prompt (the call ended or the client went away).
func (c *confirmation) stop() { c.cancel() }

// finish ends the prompt once the call has its outcome; a URL-mode prompt
// is told it completed.
func (c *confirmation) finish(ctx context.Context) {
	if c.mode == urlMode {
		nctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_ = c.session.NotifyElicitationComplete(nctx, &mcp.ElicitationCompleteParams{ElicitationID: c.id})
		cancel()
	}
	c.cancel()
}

// inputRequired answers a 2026-07-28 tools/call with the question for its
// person; the client calls again with the answer and the sealed state.
func (ep *endpoint) inputRequired(f *flight, ev *airlockv1.Event, mode confirmMode) (*mcp.CallToolResult, error) {
	ar := ev.GetApprovalRequested()
	token, err := sealState(ep.g.frontend, state{
		Endpoint: ep.cfg.Name, Call: f.call.ID, Rev: max(ev.GetRevision(), 1), Tool: f.tool.def.Name,
		Digest: ar.GetDecision().GetArgumentsDigest(), Expires: time.Now().Add(stateFor).Unix(),
	})
	if err != nil {
		return nil, fmt.Errorf("seal the confirmation state: %w", err)
	}
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{confirmKey: ep.elicitParams(f, ar, mode)},
		RequestState:  token,
	}, nil
}

// answer records the person's answer as their decision, through the
// approval service (which alone authorizes it: the rule must name the
// requester and the call must act for this person).
func (ep *endpoint) answer(ctx context.Context, f *flight, rev uint32, res *mcp.ElicitResult, digest string, mode confirmMode) {
	user := ep.cfg.OnBehalfOf
	req := &airlockv1.DecideRequest{
		AgentId: ep.cfg.Agent, CallId: f.call.ID, Revision: rev, ArgumentsDigest: digest,
		Principal: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: user, Channel: Channel},
	}
	note := ""
	if res != nil {
		if s, ok := res.Content["note"].(string); ok {
			note = strings.TrimSpace(truncate(s, 1000))
		}
	}
	switch {
	case res == nil:
		req.Kind, req.Reason = airlockv1.DecisionKind_DECISION_KIND_REJECT, fmt.Sprintf("%s's confirmation came back without an answer", user)
	case res.Action == "accept" && mode == urlMode:
		return // they decide on the console page they were sent to
	case res.Action == "accept":
		req.Kind, req.Reason = airlockv1.DecisionKind_DECISION_KIND_APPROVE, note
	case res.Action == "decline":
		req.Kind, req.Reason = airlockv1.DecisionKind_DECISION_KIND_REJECT, withNote(fmt.Sprintf("%s declined it when asked to confirm", user), note)
	default:
		req.Kind, req.Reason = airlockv1.DecisionKind_DECISION_KIND_REJECT, fmt.Sprintf("%s dismissed the confirmation without approving", user)
	}
	if user == "" {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	var resp *airlockv1.DecideResponse
	err := untilRecorded(dctx, func() (err error) {
		resp, err = ep.g.approvals.Decide(dctx, req)
		return err
	})
	if err != nil {
		ep.log.Warn("a confirmation could not be recorded; the call waits for the other channels", "call", f.call.ID, "err", err)
		return
	}
	ep.log.Info("confirmation recorded", "call", f.call.ID, "by", user, "kind", req.Kind.String(), "result", resp.GetMessage())
}

// untilRecorded runs fn until it stops answering not_found or ctx ends: a
// person (or the gateway) may act on an approval_requested event before the
// approval service has stored the record that event creates.
func untilRecorded(ctx context.Context, fn func() error) error {
	return retryWhile(ctx, fn, apierr.NotFound)
}

// retryWhile runs fn until it answers other than with one of codes, or ctx
// ends, waiting longer each time (up to a second).
func retryWhile(ctx context.Context, fn func() error, codes ...apierr.Code) error {
	err := fn()
	for wait := 20 * time.Millisecond; err != nil && slices.Contains(codes, apierr.CodeOf(err)); wait = min(2*wait, time.Second) {
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		err = fn()
	}
	return err
}

func withNote(s, note string) string {
	if note == "" {
		return s
	}
	return s + ": " + note
}

// elicitParams is the prompt: what would run, why a person is asked, and
// what accepting does. The arguments are quoted JSON: what the model wrote
// is shown as data. A client may print the prompt on a terminal: it is
// escaped as terminal text (escape.TerminalLines), each field on its line.
func (ep *endpoint) elicitParams(f *flight, ar *airlockv1.ApprovalRequested, mode confirmMode) *mcp.ElicitParams {
	d := ar.GetDecision()
	var b strings.Builder
	fmt.Fprintf(&b, "airlock asks %s to confirm a tool call before it runs.\n", ep.cfg.OnBehalfOf)
	fmt.Fprintf(&b, "Tool: %s (risk %s)\n", escape.Terminal(calls.ToolName(f.call.Server, f.call.Tool)), calls.RiskName(d.GetRisk()))
	if d.GetReason() != "" {
		fmt.Fprintf(&b, "Why you are asked: %s\n", escape.Terminal(d.GetReason()))
	}
	b.WriteString("Arguments:\n")
	summary, _ := argumentSummary(ar.GetCall().GetArguments().AsMap())
	b.WriteString(summary)
	if sc := f.call.Script; sc != nil {
		b.WriteString(previewText(sc, reasonPreview) + "\n")
	}
	if mode == urlMode {
		b.WriteString("Open the call in airlock's console to approve or reject it.")
		return &mcp.ElicitParams{Mode: "url", Message: escape.TerminalLines(b.String()), URL: ep.consoleURL(f.call.ID, max(ar.GetCall().GetRevision(), 1)), ElicitationID: f.call.ID}
	}
	b.WriteString("Accept runs it once, as you; Decline refuses it.")
	return &mcp.ElicitParams{Mode: "form", Message: escape.TerminalLines(b.String()), RequestedSchema: map[string]any{
		"type": "object",
		"properties": map[string]any{
			"note": map[string]any{"type": "string", "title": "Note (optional)",
				"description": "Recorded with your decision; when you decline, the model is told it."},
		},
	}}
}

// consoleURL is the page of the call's revision rev in the console: the
// revision the person is asked about, not whichever is newest.
func (ep *endpoint) consoleURL(callID string, rev uint32) string {
	base := strings.TrimSuffix(ep.g.deps.Config.HTTP.PublicURL, "/")
	return fmt.Sprintf("%s/calls/%s/%s?rev=%d", base, url.PathEscape(ep.cfg.Agent), url.PathEscape(callID), rev)
}

// Limits of the argument summary in a prompt.
const (
	summaryKeys  = 20
	summaryName  = 64
	summaryValue = 200
)

// argumentSummary lists the top-level arguments, one per line, each name
// and value as JSON cut to summaryName and summaryValue bytes (with the
// whole length), at most summaryKeys of them; whole says whether it shows
// every argument whole (no argument left out, no name or value cut).
func argumentSummary(args map[string]any) (text string, whole bool) {
	if len(args) == 0 {
		return "  (none)\n", true
	}
	keys := slices.Sorted(maps.Keys(args))
	var b strings.Builder
	whole = true
	for i, k := range keys {
		if i == summaryKeys {
			fmt.Fprintf(&b, "  … and %d more (every argument is on the call's console page)\n", len(keys)-summaryKeys)
			return b.String(), false
		}
		name, value := summaryJSON(k, args[k])
		whole = whole && len(name) <= summaryName && len(value) <= summaryValue
		fmt.Fprintf(&b, "  %s: %s\n", cutJSON(name, summaryName), cutJSON(value, summaryValue))
	}
	return b.String(), whole
}

// argumentsWhole reports whether the form's summary shows every argument whole.
func argumentsWhole(args *structpb.Struct) bool {
	_, whole := argumentSummary(args.AsMap())
	return whole
}

// summaryJSON is an argument's name and value as JSON: what the model wrote,
// shown as data, with what would not show as itself escaped.
func summaryJSON(k string, v any) (name, value string) {
	n, _ := json.Marshal(k)
	val, _ := json.Marshal(v)
	// JSON keeps bidi overrides and zero-width spaces raw: escape them.
	return escape.Visible(string(n)), escape.Visible(string(val))
}

// cutJSON cuts s to n bytes, saying how long it was.
func cutJSON(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s (%d bytes)", truncate(s, n), len(s))
}

// informer keeps a waiting client informed: progress notifications when it
// gave a progress token, else a ping on the call's stream (sessions before
// 2026-07-28), so proxies and clients keep the stream open.
type informer struct {
	req   *mcp.CallToolRequest
	token any
	// n counts the request's progress notifications: shared by the calls
	// of one run_code request, whose progress must still only increase.
	n       *progressCount
	last    string
	canPing bool
	every   time.Duration
}

// progressCount is a request's progress notifications so far.
type progressCount struct {
	mu sync.Mutex
	n  float64
}

// newInformer informs req's client; n is the request's progress count
// (nil: this call's own).
func newInformer(req *mcp.CallToolRequest, every time.Duration, n *progressCount) *informer {
	if n == nil {
		n = &progressCount{}
	}
	return &informer{req: req, token: req.Params.GetProgressToken(), n: n, canPing: !modern(req) && req.Session != nil, every: every,
		last: "waiting for the call's outcome"}
}

func (in *informer) progress(ctx context.Context, msg string) {
	in.last = msg
	if in.token == nil || in.req.Session == nil {
		return
	}
	// Counted and sent under one lock: the client sees the count increase.
	in.n.mu.Lock()
	defer in.n.mu.Unlock()
	in.n.n++
	_ = in.req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: in.token, Progress: in.n.n, Message: escape.Terminal(msg)})
}

func (in *informer) beat(ctx context.Context) {
	switch {
	case in.token != nil:
		in.progress(ctx, in.last)
	case in.canPing:
		go func() {
			pctx, cancel := context.WithTimeout(ctx, in.every)
			defer cancel()
			_ = in.req.Session.Ping(pctx, nil)
		}()
	}
}
