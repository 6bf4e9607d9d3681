// Package airlock is the Go SDK for agents: submit a tool call, await its
// outcome (even after the agent restarted), cancel it.
//
//	c, err := airlock.Connect(ctx, ".airlock/agents/bot.creds.json", "") // `airlock agents add NAME` makes one
//	defer c.Close()
//	id, err := c.Submit(ctx, airlock.Call{Tool: "fs__read_file", Args: map[string]any{"path": "README.md"}})
//	out, err := c.Await(ctx, id)
//	if out.Status == airlock.StatusCompleted { use(out.Result) }
//
// New makes a Client on a connection of your own (with the agent's nkey and
// its inbox prefix, as Dial makes it).
package airlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/ids"
	"github.com/airlock-gate/airlock/services/shared/ingress"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// Client submits and follows one agent's calls. It is safe for concurrent use.
//
// An agent needs no JetStream access: it publishes a request on
// airlock.req.<agent>.<call> (stored in the intake stream), follows its
// call's events on airlock.out.<agent>.<call>.> (every event the events
// stream stores is republished there), and asks airlock for its call's last
// stored events (airlock.agent.<agent>.events, which the approval service
// answers: package lastevents) when it starts following a call. NATS
// permissions confine an agent to its own ids in all three (deploy/nats,
// ARCHITECTURE.md "Trust boundaries").
type Client struct {
	agent    string
	js       jetstream.JetStream
	nc       *nats.Conn
	stream   string
	maxBytes int
	// seal, set by front-ends that submit for an agent they authenticated
	// (console, gateway), vouches for the request's on_behalf_of.
	seal func(*nats.Msg)
	// Only tests set these (export_test.go), so that a test of the live
	// path cannot pass through the periodic re-read: resync replaces
	// resyncEvery, and storedRead is called after each read of a followed
	// call's stored events (and after EndedWithin's first read).
	resync     time.Duration
	storedRead func()
	// tls, set by WithTLS, is what Connect dials with.
	tls *config.TLS
	// notices are the agent's over-budget notices heard since its first
	// Submit (hearNotices), or, with WithOverBudgetNotices, by the
	// front-end that made the client; noticesHeard: they are heard.
	notices      *OverBudgetNotices
	noticesMu    sync.Mutex
	noticesHeard bool
	// follows hands the followed calls' events over one subscription
	// (Follows); its own unless WithFollows shares one.
	follows *Follows
	// directReads: read stored events with Direct Get (WithDirectReads).
	directReads bool
}

// Option adjusts a Client.
type Option func(*Client)

// WithStream names the events stream (default AIRLOCK_EVENTS).
func WithStream(name string) Option { return func(c *Client) { c.stream = name } }

// WithMaxRequestBytes matches the server's limits.max_request_bytes, so an
// oversized call is refused before it is sent.
func WithMaxRequestBytes(n int) Option { return func(c *Client) { c.maxBytes = n } }

// WithDirectReads makes the client read its calls' stored events with
// JetStream Direct Get over its connection, as the console and the MCP
// gateway do with a service user allowed the Direct Get of every call's
// events. An agent's own connection is not: without this option the client
// asks airlock for them (the approval service's airlock.agent.<agent>.events).
func WithDirectReads() Option { return func(c *Client) { c.directReads = true } }

// WithRequestSeal lets a front-end seal each request it submits for the
// agent (see package seal); agents themselves never need it.
func WithRequestSeal(seal func(*nats.Msg)) Option { return func(c *Client) { c.seal = seal } }

// WithTLS is what Connect verifies the NATS server with and, for a server
// that requires mutual TLS, the client certificate it presents: CAFile (a
// private CA's PEM; alone it turns TLS on), CertFile and KeyFile. It
// overrides the credential file's "tls". New ignores it (the connection is
// already made); to Dial, set the Credential's TLS.
func WithTLS(t config.TLS) Option { return func(c *Client) { c.tls = &t } }

// New returns a client that acts as agentID over nc. The connection must be
// the agent's own (its credentials decide what it may do); see Connect.
// The calls it awaits share one subscription to the agent's events
// (Follows), held while any is awaited. At its first Submit the client
// subscribes to the agent's over-budget
// notices, for as long as nc lasts (OverBudgetNotices): make one client
// per agent and connection, not one per call, or use
// WithOverBudgetNotices.
func New(nc *nats.Conn, agentID string, opts ...Option) (*Client, error) {
	if err := ids.ValidateAgent(agentID); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	def := config.Default()
	c := &Client{agent: agentID, js: js, nc: nc, stream: def.Stream.Name, maxBytes: def.Limits.MaxRequestBytes, notices: NewOverBudgetNotices(nil)}
	for _, o := range opts {
		o(c)
	}
	if c.follows == nil {
		c.follows = NewFollows(nc)
	}
	return c, nil
}

// Agent is the agent id the client acts as.
func (c *Client) Agent() string { return c.agent }

// Call is what an agent asks to run.
type Call struct {
	// ID of the call; generated when empty. Reuse it with Revision+1 to
	// submit a revised call after changes were requested.
	ID       string
	Revision uint32
	// Tool as "server__tool", or Server and Tool separately.
	Server, Tool string
	Args         map[string]any
	Thread       string
	// OnBehalfOf is the person the agent acts for; they cannot approve it.
	// A binding in airlock's configuration takes precedence.
	OnBehalfOf     string
	Reason         string
	IdempotencyKey string
	// AgentRuns marks a gate-only call: airlock decides it, the agent runs
	// the tool itself (coding-agent hooks).
	AgentRuns bool
	// Cwd is the working directory the agent runs the tool in (a coding
	// agent's hook gives it), shown to reviewers.
	Cwd string
	// Annotations are the tool's MCP annotations (readOnlyHint, ...), for
	// the policy's input. AnnotationsTrusted claims they come from an
	// upstream the registry trusts; the policy believes the claim only on a
	// request a front-end sealed (the MCP gateway).
	Annotations        map[string]any
	AnnotationsTrusted bool
	// Script names the run_code script that made the call (the MCP
	// gateway sets it); reviewers see it, the policy never trusts it.
	Script *airlockv1.Script
}

// ErrInvalid is returned when airlock refused a request as malformed.
var ErrInvalid = errors.New("airlock refused the request as invalid")

// Submit validates and publishes the call and returns its id. Publishing the
// same call again is harmless: the policy service records a revision once,
// and a repeated request with the same content changes nothing. The
// client hears the agent's over-budget notices from before it publishes,
// so that Await after Submit ends with an *OverBudgetError when the policy
// did not decide the request, even when the notice came first.
func (c *Client) Submit(ctx context.Context, call Call) (string, error) {
	tc, err := c.toolCall(call)
	if err != nil {
		return "", err
	}
	if err := c.hearNotices(ctx); err != nil {
		return "", fmt.Errorf("submit call %s: %w", tc.CallId, err)
	}
	c.notices.Forget(c.agent, tc.CallId) // submitted again: decided anew
	ev := &airlockv1.Event{
		AgentId: c.agent, CallId: tc.CallId, Revision: tc.Revision, ThreadId: tc.ThreadId,
		Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_AGENT, Id: c.agent},
		Body:  &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: tc}},
	}
	msg, err := bus.EncodeRequest(ev, "agent/"+c.agent, "")
	if err != nil {
		return "", fmt.Errorf("submit call %s: %w", tc.CallId, err)
	}
	if size := len(msg.Data); size > c.maxBytes { // the encoded request, measured once
		return "", fmt.Errorf("%w: request is %d bytes, over the %d-byte limit: pass large inputs by reference", ErrInvalid, size, c.maxBytes)
	}
	if c.seal != nil {
		c.seal(msg)
	}
	if _, err := bus.PublishSync(ctx, c.js, msg); err != nil {
		return "", fmt.Errorf("submit call %s: %w%s", tc.CallId, err, hint(err))
	}
	return tc.CallId, nil
}

// hint says what to do about the commonest submit failures.
func hint(err error) string {
	switch {
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse):
		return " (no intake stream answers: is airlock running, and is this connection an airlock agent's?)"
	case strings.Contains(err.Error(), "maximum messages per subject"):
		return " (this agent already has as many requests waiting for airlock's policy service as it may (intake.max_pending_per_agent): wait for some to be decided, then submit again)"
	case strings.Contains(err.Error(), "maximum bytes"), strings.Contains(err.Error(), "message size exceeds"):
		return " (airlock's intake is full or the request is too large: try again later, or pass large inputs by reference)"
	}
	return ""
}

func (c *Client) toolCall(call Call) (*airlockv1.ToolCall, error) {
	if call.ID == "" {
		call.ID = ids.New("call")
	}
	args, err := structpb.NewStruct(call.Args)
	if err != nil {
		return nil, fmt.Errorf("%w: arguments must be a JSON object of plain values: %v", ErrInvalid, err)
	}
	tc := &airlockv1.ToolCall{
		CallId: call.ID, AgentId: c.agent, ThreadId: call.Thread, OnBehalfOf: call.OnBehalfOf,
		Server: call.Server, Tool: call.Tool, Arguments: args, Reason: call.Reason,
		IdempotencyKey: call.IdempotencyKey, Revision: call.Revision, CreatedAt: timestamppb.Now(),
		AgentRuns: call.AgentRuns, AnnotationsTrusted: call.AnnotationsTrusted, Cwd: call.Cwd,
		Script: call.Script,
	}
	if call.Annotations != nil {
		if tc.Annotations, err = structpb.NewStruct(call.Annotations); err != nil {
			return nil, fmt.Errorf("%w: annotations must be a JSON object of plain values: %v", ErrInvalid, err)
		}
	}
	if r := ingress.Call(tc); r != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, r.Reason)
	}
	return tc, nil
}

// Report is how a gate-only call the agent ran ended (see Client.Report).
type Report struct {
	// Failed: the tool failed; Error says how (and Result may hold its output).
	Failed bool
	// Result is the tool's result as JSON (nil: none).
	Result json.RawMessage
	// Truncated: Result was cut to fit.
	Truncated bool
	Error     string
	Latency   time.Duration
	// Args, when set, are the arguments the agent ran the tool with; airlock
	// records whether they differ from the ones it decided on.
	Args map[string]any
	// Snapshot, when set, is what the agent's hook saved before the call
	// and saw after it (`airlock hook`), recorded with the outcome.
	Snapshot *airlockv1.Snapshot
}

// MaxReportResultBytes is the largest result a report carries; Report cuts
// a longer one and marks it truncated.
const MaxReportResultBytes = ingress.MaxReportResultBytes

// Report tells airlock how revision rev (0: 1) of a gate-only call the
// agent ran itself ended. airlock records it as the call's outcome
// (Outcome.AgentRan) if the call is this agent's own gate-only call and was
// allowed or approved, and only the first report of a revision counts; a
// refused report is recorded as an unauthorized attempt. Report returns once
// the intake stream stored the report: Await shows the outcome.
func (c *Client) Report(ctx context.Context, callID string, rev uint32, r Report) error {
	if err := ids.Validate("call id", callID); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	body := &airlockv1.Reported{Failed: r.Failed, Truncated: r.Truncated, Error: r.Error, Snapshot: r.Snapshot}
	if len(r.Result) > 0 {
		body.ResultJson = string(r.Result)
		if len(r.Result) > MaxReportResultBytes || !json.Valid(r.Result) {
			body.ResultJson, body.Truncated = cutJSON(r.Result), body.Truncated || len(r.Result) > MaxReportResultBytes
		}
	}
	if len(body.Error) > ingress.MaxReasonLen {
		body.Error = strings.ToValidUTF8(body.Error[:ingress.MaxReasonLen], "")
	}
	if r.Latency > 0 {
		body.Latency = durationpb.New(r.Latency)
	}
	if r.Args != nil {
		args, err := structpb.NewStruct(r.Args)
		if err != nil {
			return fmt.Errorf("%w: reported arguments must be a JSON object of plain values: %v", ErrInvalid, err)
		}
		body.Arguments = args
	}
	ev := &airlockv1.Event{
		AgentId: c.agent, CallId: callID, Revision: max(rev, 1),
		Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_AGENT, Id: c.agent},
		Body:  &airlockv1.Event_Reported{Reported: body},
	}
	if size := proto.Size(ev); size > c.maxBytes {
		return fmt.Errorf("%w: report is %d bytes, over the %d-byte limit: report a shorter result", ErrInvalid, size, c.maxBytes)
	}
	msg, err := bus.EncodeRequest(ev, "agent/"+c.agent, "")
	if err != nil {
		return fmt.Errorf("report call %s: %w", callID, err)
	}
	if _, err := bus.PublishSync(ctx, c.js, msg); err != nil {
		return fmt.Errorf("report call %s: %w%s", callID, err, hint(err))
	}
	return nil
}

// cutJSON keeps as much of a result as fits in MaxReportResultBytes, as a
// JSON string (a cut JSON document is not JSON any more).
func cutJSON(raw []byte) string {
	text := strings.ToValidUTF8(string(raw), "?")
	for n := min(len(text), MaxReportResultBytes); ; n /= 2 {
		q, _ := json.Marshal(strings.ToValidUTF8(text[:n], ""))
		if len(q) <= MaxReportResultBytes {
			return string(q)
		}
	}
}

// Cancel withdraws a call waiting for a person, or its first revision
// while it waits for the policy (its request not decided yet: it then
// never runs). Only the agent that submitted it can. An answer of
// apierr.Unavailable ("cancel again in a moment": the policy is deciding
// the call) is worth trying again.
func (c *Client) Cancel(ctx context.Context, callID, reason string) error {
	_, err := c.Withdraw(ctx, callID, 0, reason)
	return err
}

// Withdrawal is what a cancel did: the call's revision it is about, its
// state after the cancel ("canceled", or how a call decided already
// stands), whether the cancel changed it, and, when not, why.
type Withdrawal struct {
	Revision uint32 `json:"revision"`
	State    string `json:"state"`
	Changed  bool   `json:"changed"`
	Message  string `json:"message,omitempty"`
}

// Withdraw is Cancel of the revision the agent submitted (0: its first),
// answering what the cancel did. A call waiting for a person is withdrawn
// whatever revision is named; one waiting for the policy only when it is
// that revision, so that a cancel of a call sent back for changes never
// withdraws a revision it did not name.
//
// A cancel answered "cancel again in a moment" (apierr.Unavailable: the
// policy is deciding the call, or the approval service is busy) is sent
// again for up to withdrawRetryFor, so that a call the policy is putting
// to people as it is withdrawn does not stay waiting for them.
func (c *Client) Withdraw(ctx context.Context, callID string, revision uint32, reason string) (Withdrawal, error) {
	w, err := c.withdrawOnce(ctx, callID, revision, reason)
	deadline := time.Now().Add(withdrawRetryFor)
	for wait := 20 * time.Millisecond; apierr.CodeOf(err) == apierr.Unavailable && time.Now().Add(wait).Before(deadline); wait = min(2*wait, 500*time.Millisecond) {
		select {
		case <-ctx.Done():
			return w, err
		case <-time.After(wait):
		}
		w, err = c.withdrawOnce(ctx, callID, revision, reason)
	}
	return w, err
}

// withdrawRetryFor is how long Withdraw sends a cancel again while it is
// answered "cancel again in a moment".
const withdrawRetryFor = 3 * time.Second

func (c *Client) withdrawOnce(ctx context.Context, callID string, revision uint32, reason string) (Withdrawal, error) {
	body, _ := json.Marshal(map[string]any{"call_id": callID, "reason": reason, "revision": revision})
	msg, err := c.nc.RequestWithContext(ctx, subject.AgentCancel(c.agent), body)
	if errors.Is(err, nats.ErrNoResponders) {
		return Withdrawal{}, fmt.Errorf("cancel call %s: no approval service is running to take the request", callID)
	}
	if err != nil {
		return Withdrawal{}, fmt.Errorf("cancel call %s: %w", callID, err)
	}
	if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" && code != "200" {
		return Withdrawal{}, fmt.Errorf("cancel call %s: %w", callID, apierr.FromCode(code, msg.Header.Get("Nats-Service-Error")))
	}
	var w Withdrawal
	if err := json.Unmarshal(msg.Data, &w); err != nil {
		return Withdrawal{}, fmt.Errorf("cancel call %s: the answer is not the approval service's: %w", callID, err)
	}
	return w, nil
}

// Do submits call and awaits the outcome of the revision it submitted.
// A call airlock did not decide because the agent is over its budget ends
// at once with an *OverBudgetError (errors.Is ErrOverBudget), which says
// when to submit it again; only a notice about the submitted revision ends
// it. Do follows the call before it submits it, so the notice, which is
// not stored, reaches the wait directly (Await after Submit reads it from
// the notices the client kept).
func (c *Client) Do(ctx context.Context, call Call) (Outcome, error) {
	if call.ID == "" {
		call.ID = ids.New("call")
	}
	if err := ids.Validate("call id", call.ID); err != nil {
		return Outcome{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	live, stop, err := c.subscribeCall(ctx, call.ID, followBuffer)
	if err != nil {
		return Outcome{}, fmt.Errorf("follow call %s: %w", call.ID, err)
	}
	defer stop()
	id, err := c.Submit(ctx, call)
	if err != nil {
		return Outcome{}, err
	}
	return c.followLive(ctx, id, newFollower(id, max(call.Revision, 1)), live)
}

// Followed is a call submitted while already followed live (SubmitFollowed),
// so what airlock says of it without storing it — that its agent is over
// its budget, for the submitted revision — is heard as well as its stored
// events. Close it when done.
type Followed struct {
	c    *Client
	id   string
	rev  uint32
	live chan *nats.Msg
	stop func()
}

// SubmitFollowed is Submit for a caller that awaits the call later with
// the returned Followed: it follows the call before it submits it, as Do
// does. submitCtx bounds the submit only; the follow lasts until Close.
func (c *Client) SubmitFollowed(submitCtx context.Context, call Call) (*Followed, error) {
	if call.ID == "" {
		call.ID = ids.New("call")
	}
	if err := ids.Validate("call id", call.ID); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	live, stop, err := c.subscribeCall(submitCtx, call.ID, followBuffer) // lasts until Close
	if err != nil {
		return nil, fmt.Errorf("follow call %s: %w", call.ID, err)
	}
	id, err := c.Submit(submitCtx, call)
	if err != nil {
		stop()
		return nil, err
	}
	return &Followed{c: c, id: id, rev: max(call.Revision, 1), live: live, stop: stop}, nil
}

// ID is the call's id.
func (f *Followed) ID() string { return f.id }

// AwaitDecision is Client.AwaitDecision of the submitted revision, ending
// at once with an *OverBudgetError when the agent was over its budget.
func (f *Followed) AwaitDecision(ctx context.Context) (Outcome, error) {
	fl := newFollower(f.id, f.rev)
	fl.decision = true
	return f.c.followLive(ctx, f.id, fl, f.live)
}

// Close stops following the call.
func (f *Followed) Close() { f.stop() }

// requestTimeout bounds one Direct Get.
const requestTimeout = 5 * time.Second

// resyncEvery is how often Await re-reads a quiet call's last events, in
// case a republished event was missed (core NATS delivers at most once).
const resyncEvery = 5 * time.Second

// resyncInterval is resyncEvery, unless a test changed it.
func (c *Client) resyncInterval() time.Duration {
	if c.resync > 0 {
		return c.resync
	}
	return resyncEvery
}

// reconnectCheck is how often Await looks for a reconnect, after which it
// reads what it missed from the stream.
const reconnectCheck = 250 * time.Millisecond
