package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/executorapi"
	"github.com/airlock-gate/airlock/services/shared/ingress"
	"github.com/airlock-gate/airlock/services/shared/quota"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// agentCalls are the agents' use cases of the REST API — submit, await,
// cancel, report — as the Go SDK does them over NATS, for an agent whose
// token the console authenticated. The HTTP handlers (api.go) only
// translate requests and answers; reading the stream lives here, as the
// reviewers' use cases live in useCases.
type agentCalls struct {
	nc        *nats.Conn
	js        jetstream.JetStream
	cfg       config.Config
	frontend  seal.Key
	approvals *approvalapi.Client
	now       func() time.Time
	// waits bounds the open long-polls per agent.
	waits *quota.PerAgent
	// bodies bounds the submits and reports per agent being read and
	// handled at once (maxBodiesPerAgent).
	bodies *quota.PerAgent
	// tools says whether a call waiting for a person can run at all.
	tools *registry
	// overBudget are the policy's over-budget notices this console heard,
	// for every agent: an agent on the REST API submits, then asks, and
	// the notice may come in between.
	overBudget *airlock.OverBudgetNotices
	// follows hands every REST wait its call's events over one
	// subscription per agent on the console's connection, shared by the
	// client each request makes.
	follows *airlock.Follows
}

// client submits as agent, sealing each request as the console: the
// console authenticated the agent's token, and vouches for the person the
// token binds its calls to. It reads the calls' stored events with the
// console's own Direct Gets (its user may).
func (a *agentCalls) client(agent string) (*airlock.Client, error) {
	return airlock.New(a.nc, agent, airlock.WithStream(a.cfg.Stream.Name), airlock.WithMaxRequestBytes(a.cfg.Limits.MaxRequestBytes), airlock.WithDirectReads(),
		airlock.WithRequestSeal(func(m *nats.Msg) { a.frontend.Request(m, Frontend, a.now()) }), airlock.WithOverBudgetNotices(a.overBudget), airlock.WithFollows(a.follows))
}

// holdBody takes one of agent's body slots (maxBodiesPerAgent) before a
// submit or report reads its body, and returns what gives it back.
func (a *agentCalls) holdBody(agent string) (release func(), err error) {
	if !a.bodies.Take(agent) {
		return nil, apierr.New(apierr.Unavailable, "agent %s already has %d submits or reports being handled on this console: wait for one to be answered, then send this one again", agent, maxBodiesPerAgent)
	}
	return func() { a.bodies.Give(agent) }, nil
}

// submit publishes a call as the agent, through the SDK (the same checks
// and envelope as a Go agent); onBehalfOf comes from the agent's token.
// Submitting the same call again is harmless.
func (a *agentCalls) submit(ctx context.Context, agent, onBehalfOf string, req submitRequest) (submitResponse, error) {
	if req.OnBehalfOf != "" && req.OnBehalfOf != onBehalfOf {
		return submitResponse{}, apierr.New(apierr.InvalidRequest, "on_behalf_of comes from the agent token (%q), not the request: leave it out, or ask an admin for a token bound to %q", onBehalfOf, req.OnBehalfOf)
	}
	args, err := a.arguments(req.Arguments)
	if err != nil {
		return submitResponse{}, err
	}
	client, err := a.client(agent)
	if err != nil {
		return submitResponse{}, apierr.Wrap(apierr.InvalidRequest, err, "%s", err.Error())
	}
	call := airlock.Call{
		ID: req.CallID, Revision: req.Revision, Server: req.Server, Tool: req.Tool, Args: args,
		Thread: req.ThreadID, OnBehalfOf: onBehalfOf, Reason: req.Reason, IdempotencyKey: req.IdempotencyKey,
		AgentRuns: req.AgentRuns,
	}
	if err := idStillFree(ctx, client, call, a.cfg.Policy.OnBehalfOf[agent] != ""); err != nil {
		return submitResponse{}, err
	}
	id, err := client.Submit(ctx, call)
	if err != nil {
		return submitResponse{}, sdkError(err, "the call could not be stored: try again")
	}
	return submitResponse{CallID: id, Status: "submitted", Await: "/api/v1/calls/" + url.PathEscape(id) + "?wait=30s"}, nil
}

// idStillFree refuses a call submitted under a call id whose revision is
// recorded with other content (another tool, other arguments), or whose
// newer revision is: the policy service would refuse it without a word to
// the agent, and the client's wait would end with the recorded call's
// outcome as if it were this one's. The same call submitted again passes:
// that is harmless, and how a client that lost the answer retries.
func idStillFree(ctx context.Context, client *airlock.Client, call airlock.Call, boundPerson bool) error {
	if call.ID == "" {
		return nil
	}
	rev := max(call.Revision, 1)
	rec, err := client.Recorded(ctx, call.ID)
	if err != nil {
		return nil // the policy service decides: this is only a kinder answer
	}
	newest := rec.GetRevision() // 0: none recorded
	if rev > newest {
		// Not recorded: withdrawn while its request waited for the policy?
		if withdrawn, err := client.Withdrawn(ctx, call.ID); err == nil && withdrawn == rev {
			return apierr.New(apierr.Conflict, "call %s revision %d was withdrawn by its agent before it was decided: the policy will not decide it. Leave call_id out for a new call", call.ID, rev)
		}
		return nil
	}
	switch {
	case rev < newest:
		return apierr.New(apierr.Conflict, "call %s is at revision %d: revision %d cannot be submitted again. Submit revision %d after a reviewer requests changes, or leave call_id out for a new call", call.ID, newest, rev, newest+1)
	case rev == newest:
		if differs := callDiffers(rec, call, boundPerson); differs != "" {
			return apierr.New(apierr.Conflict, "call_id %s names another call: its revision %d (%s) was submitted with a different %s. A call id names one call: leave call_id out for a new call, or submit revision %d after a reviewer requests changes", call.ID, rev, calls.QualifiedTool(rec), differs, rev+1)
		}
	}
	return nil
}

// callDiffers names what of call differs from rec, a recorded call, among
// what a REST body sets ("" when nothing does), as the policy compares a
// request with the recorded one (services/policy sameRequest). The person
// is left out when the policy binds the agent to one (policy.on_behalf_of),
// which replaces it in both.
func callDiffers(rec *airlockv1.ToolCall, call airlock.Call, boundPerson bool) string {
	args, err := structpb.NewStruct(call.Args)
	switch {
	case calls.QualifiedTool(rec) != calls.ToolName(call.Server, call.Tool):
		return "tool"
	case err != nil || !proto.Equal(rec.GetArguments(), args):
		return "arguments"
	case rec.GetAgentRuns() != call.AgentRuns:
		return "agent_runs"
	case rec.GetThreadId() != call.Thread:
		return "thread_id"
	case rec.GetReason() != call.Reason:
		return "reason"
	case rec.GetIdempotencyKey() != call.IdempotencyKey:
		return "idempotency_key"
	case !boundPerson && rec.GetOnBehalfOf() != call.OnBehalfOf:
		return "person it acts for (the agent token's)"
	}
	return ""
}

// arguments reads a submitted call's arguments, JSON not yet decoded
// (absent or null: none). What cannot fit limits.max_request_bytes once
// encoded is refused before it is decoded: a 512 KiB list of numbers cost
// 40 MB in maps and protobuf before the SDK's size check (R9 F3).
func (a *agentCalls) arguments(raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	if r := ingress.ArgumentsFit(raw, a.cfg.Limits.MaxRequestBytes); r != nil {
		return nil, apierr.New(apierr.InvalidRequest, "%s", r.Reason)
	}
	var args map[string]any
	if err := json.Unmarshal(raw, &args); err != nil {
		return nil, apierr.New(apierr.InvalidRequest, "arguments must be a JSON object such as {\"path\": \"/tmp/x\"} (%v): send them as one", err)
	}
	return args, nil
}

// sdkError is err of the SDK as an API error: an invalid request says what
// to fix, anything else is unavailable with what to do.
func sdkError(err error, unavailable string) error {
	if errors.Is(err, airlock.ErrInvalid) {
		return apierr.New(apierr.InvalidRequest, "%s", strings.TrimPrefix(err.Error(), airlock.ErrInvalid.Error()+": "))
	}
	return apierr.Wrap(apierr.Unavailable, err, "%s", unavailable)
}

// overBudgetError is the API's answer for a call the policy did not decide
// because its agent is over its budget: unavailable (503), with the SDK's
// sentence, which names the budget and when to submit the call again.
func overBudgetError(err error) error {
	return apierr.Wrap(apierr.Unavailable, err, "%s", err.Error())
}

// cancel withdraws the agent's own call while it waits for a decision (the
// agent's cancel, as over NATS) and returns the call's state after it:
// "canceled", or how a call decided already stands (left as is).
func (a *agentCalls) cancel(ctx context.Context, agent, id string, revision uint32, reason string) (string, error) {
	client, err := a.client(agent)
	if err != nil {
		return "", err
	}
	// The cancel's own answer: a call withdrawn while it waited for the
	// policy has no approval record to read afterwards, and a revision 2
	// withdrawn so is not its revision 1's record.
	w, err := client.Withdraw(ctx, id, revision, reason)
	if err != nil {
		if apierr.CodeOf(err) == apierr.Internal {
			return "", apierr.Wrap(apierr.Unavailable, err, "call %s could not be canceled: try again", id)
		}
		return "", err
	}
	return w.State, nil
}

// report records how the agent's gate-only call ended (the SDK's Report):
// only the first report of an allowed or approved revision counts; airlock
// records a refused one as an unauthorized attempt.
func (a *agentCalls) report(ctx context.Context, agent, id string, req reportRequest) error {
	// A report on a call the agent never submitted is answered 404 as the
	// API says, not "reported": the policy would only refuse it later.
	if err := a.exists(ctx, agent, id); err != nil {
		return err
	}
	client, err := a.client(agent)
	if err != nil {
		return err
	}
	err = client.Report(ctx, id, req.Revision, airlock.Report{
		Failed: req.Failed, Result: req.Result, Truncated: req.Truncated, Error: req.Error,
		Latency: time.Duration(req.LatencyMS) * time.Millisecond,
	})
	if err != nil {
		return sdkError(err, "the report could not be stored: try again")
	}
	return nil
}

// await follows revision rev of the agent's call (0: its newest) for up
// to wait and returns its outcome (awaitResponse), or, when wait passes
// first, what it waits for (pendingResponse, with capped set when the wait
// asked for was cut). ok is false when ctx ended (the client went away).
// A request the policy did not decide because the agent is over its
// budget answers 503 when it is about the revision waited for (without
// rev, the agent's newest request) and that revision is not recorded
// (ingress.OverBudget.Answers), as the SDK's AwaitRevision ends.
func (a *agentCalls) await(ctx context.Context, agent, id string, rev uint32, wait time.Duration, capped string) (answer any, ok bool, err error) {
	if wait > 0 {
		if !a.waits.Take(agent) {
			return nil, false, apierr.New(apierr.Unavailable, "agent %s already holds %d waits on this console: wait for one to end, or poll without ?wait=", agent, maxWaitsPerAgent)
		}
		defer a.waits.Give(agent)
	}
	if err := a.exists(ctx, agent, id); err != nil {
		// A call whose only request was not decided is recorded nowhere:
		// the notice heard answers it below.
		if _, heard := a.overBudget.Heard(agent, id); !heard || apierr.CodeOf(err) != apierr.NotFound {
			return nil, false, err
		}
	}
	client, err := a.client(agent)
	if err != nil {
		return nil, false, err
	}
	// Even without waiting, give Await a moment to read the call's history.
	actx, cancel := context.WithTimeout(ctx, max(wait, 500*time.Millisecond))
	defer cancel()
	var mu sync.Mutex
	var asked *airlockv1.ToolCall // the call a person is asked to decide
	pending := pendingResponse{CallID: id, Status: "pending", WaitingFor: "the policy", WaitCappedTo: capped}
	out, err := client.AwaitProgress(actx, id, rev, func(pr airlock.Progress) {
		mu.Lock()
		defer mu.Unlock()
		if pr.Revision < pending.Revision {
			return
		}
		pending.Revision = pr.Revision
		switch pr.Type {
		case subject.ApprovalRequested:
			d := pr.Decision
			pending.WaitingFor, pending.Reason, pending.RuleID = "a person", d.GetReason(), d.GetRuleId()
			pending.Risk, pending.Approvers, pending.Quorum = calls.RiskName(d.GetRisk()), d.GetApprovers(), max(d.GetQuorum(), 1)
			pending.Deadline, asked = pr.Deadline, pr.Call
			if path := callRevPath(agent, id, pr.Revision); path != "" {
				pending.ConsoleURL = strings.TrimRight(a.cfg.HTTP.PublicURL, "/") + path
			}
		case subject.Approved, subject.Allowed, subject.Started:
			pending.WaitingFor, asked = "the tool to finish", nil
		}
	})
	if out.Status != "" {
		return awaitResponse{out}, true, nil
	}
	if ctx.Err() != nil {
		return nil, false, nil
	}
	if errors.Is(err, airlock.ErrOverBudget) {
		// The policy did not decide the request (the agent is over its
		// budget) and said so in a notice that is not stored: heard by
		// this console since, or by this wait.
		return nil, false, overBudgetError(err)
	}
	if err != nil && actx.Err() == nil {
		return nil, false, apierr.Wrap(apierr.Unavailable, err, "follow call %s", id)
	}
	mu.Lock()
	defer mu.Unlock()
	if asked != nil {
		// Without the registry's other tools: agents may not read it.
		pending.UnknownTool = executorapi.Said(executorapi.Bare(a.tools.lacks(ctx, asked)))
	}
	return pending, true, nil
}

// exists checks that the agent submitted the call, so that awaiting a
// mistyped id fails at once instead of after the whole wait: its request is
// recorded in the events stream, or the agent has requests waiting in the
// intake (stored under airlock.req.<agent>, so the call may be one of them:
// reading them all for its id would let one agent make every await cost a
// thousand reads).
func (a *agentCalls) exists(ctx context.Context, agent, id string) error {
	recorded, err := subject.Event(agent, id, subject.Requested)
	if err != nil {
		return apierr.New(apierr.InvalidRequest, "%s", err.Error())
	}
	// A call withdrawn while its request waited for the policy has only
	// its `canceled` event, which its wait reads.
	withdrawn, _ := subject.Event(agent, id, subject.Canceled)
	for _, w := range []struct{ stream, subject string }{{a.cfg.Stream.Name, recorded}, {a.cfg.Intake.Name, subject.AgentRequests(agent)}, {a.cfg.Stream.Name, withdrawn}} {
		if found, err := a.stored(ctx, w.stream, w.subject); found || err != nil {
			return err
		}
	}
	// The policy service may be taking it from the intake right now.
	if m, err := bus.LastStored(ctx, a.nc, a.cfg.Stream.Name, recorded); err == nil && m != nil {
		return nil
	}
	return apierr.New(apierr.NotFound, "agent %s submitted no call %s", agent, id)
}

// stored reports whether stream holds a message on subj.
func (a *agentCalls) stored(ctx context.Context, name, subj string) (bool, error) {
	stream, err := a.js.Stream(ctx, name)
	if err != nil {
		return false, apierr.Wrap(apierr.Unavailable, err, "read stream %s", name)
	}
	_, err = stream.GetLastMsgForSubject(ctx, subj)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return false, nil
	}
	return false, apierr.Wrap(apierr.Unavailable, err, "read stream %s", name)
}

// reportRequest is the body of POST /api/v1/calls/{id}/report: how a
// gate-only call the agent ran itself ended.
type reportRequest struct {
	Revision  uint32          `json:"revision"`
	Failed    bool            `json:"failed"`
	Result    json.RawMessage `json:"result"`
	Truncated bool            `json:"truncated"`
	Error     string          `json:"error"`
	LatencyMS int64           `json:"latency_ms"`
}
