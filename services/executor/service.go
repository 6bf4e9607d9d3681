// Package executor is the executor service: it takes every `allowed` and
// `approved` event, checks that the policy or approval service sealed it
// and that the arguments are the ones that were decided on, claims the call
// revision by appending its `started` event, runs the tool through its
// adapter (MCP, webhook, built-in demo), and appends exactly one
// `completed` or `failed`.
//
// Exactly once (ARCHITECTURE.md "Exactly once"): the claim is the `started`
// event, appended with compare-and-append to the call's execution ledger
// (airlock.evt.<agent>.<call>.exec.*), so however
// many messages carry the same call revision and however many replicas
// handle them, one appends it and runs the tool. An owner running for long
// heart-beats a liveness record; a `started` without an end whose owner
// shows no sign of life belonged to an executor that died mid-run: a tool
// declared idempotent is then run again with the same idempotency key, any
// other ends `failed` with outcome `indeterminate`. A terminal event is
// appended only after checking none is stored, again with compare-and-append,
// so the stream holds exactly one per started revision.
package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/canon"
	"github.com/airlock-gate/airlock/services/shared/consume"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/executorapi"
	"github.com/airlock-gate/airlock/services/shared/ids"
	"github.com/airlock-gate/airlock/services/shared/ledger"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// Durable is the consumer every executor replica shares.
const Durable = executorapi.Durable

// maxDeliveries is how many times one decision is handled before the
// executor gives up on it and ends the call `failed` (gave_up) rather than
// letting it be redelivered forever.
const maxDeliveries = 10

// Service consumes allowed and approved calls and runs them.
type Service struct {
	deps      svc.Deps
	reg       *Registry
	claims    *Claimer
	liveness  Liveness
	decisions seal.Key
	pub       *bus.Publisher
	id        string
	ackWait   time.Duration
	heartbeat time.Duration

	running sync.WaitGroup // tools still running after their handler gave up on them
	ready   svc.Readiness  // the tools endpoint answers and the consumer is subscribed
}

// NewFromConfig builds the executor as configured: the tool registry from
// executor.tools_file (the demo tools in executor.sandbox, default
// <dev.data_dir>/sandbox), liveness records in the executions bucket, and
// the decision key that every decision it runs must be sealed with.
func NewFromConfig(ctx context.Context, deps svc.Deps) (*Service, error) {
	cfg := deps.Config
	reg, err := LoadRegistry(cfg.Executor.ToolsFile, RegistryOptions{Sandbox: cfg.SandboxDir(), Config: cfg.Executor, Log: deps.Log})
	if err != nil {
		return nil, err
	}
	kv, err := deps.JS.KeyValue(ctx, cfg.Buckets.Executions)
	if err != nil {
		reg.Close()
		return nil, fmt.Errorf("open executions bucket %s: %w (it is created by provisioning: run `airlock provision`, or `airlock dev`)", cfg.Buckets.Executions, err)
	}
	s, err := New(deps, reg, NewKVLiveness(kv))
	if err != nil {
		reg.Close()
		return nil, err
	}
	return s, nil
}

// New builds the service around a registry and a liveness store; the
// ledger is the events stream. The service owns reg and closes it when Run
// returns.
func New(deps svc.Deps, reg *Registry, liveness Liveness) (*Service, error) {
	dk, err := deps.DecisionKey()
	if err != nil {
		return nil, fmt.Errorf("executor: %w", err)
	}
	ackWait := deps.Config.Executor.AckWait
	pub := deps.Publisher("executor")
	s := &Service{
		deps: deps, reg: reg, pub: pub, id: executorID(), decisions: dk, liveness: liveness,
		ackWait: ackWait, heartbeat: ackWait / 4,
	}
	s.claims = NewClaimer(ledger.NewStream(deps.NC, deps.Config.Stream.Name, pub), liveness, s.heartbeat)
	return s, nil
}

func executorID() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "executor"
	}
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), ids.New("x")[2:10])
}

// ID is this replica's executor id, recorded in `started` events.
func (s *Service) ID() string { return s.id }

// Name implements svc.Service.
func (s *Service) Name() string { return "executor" }

// Ready implements svc.Service.
func (s *Service) Ready() <-chan struct{} { return s.ready.Ready() }

// Run implements svc.Service: it serves the tools endpoint
// (airlock.api.executor.tools), consumes allowed and approved events with
// the durable consumer every replica shares until ctx ends, lets running
// tools finish, and closes the adapters. It is ready once both are up.
func (s *Service) Run(ctx context.Context) error {
	defer s.reg.Close()
	defer s.running.Wait()
	stopTools, err := serveTools(s.deps.NC, s.reg, s.deps.Config.Executor, s.deps.Log)
	if err != nil {
		return err
	}
	defer stopTools()
	return consume.Run(ctx, s.deps.JS, consume.Spec{
		Service: "executor", Stream: s.deps.Config.Stream.Name, Durable: Durable,
		FilterSubjects: []string{subject.OfType(subject.Allowed), subject.OfType(subject.Approved)},
		AckWait:        s.ackWait,
		Workers:        s.deps.Config.Executor.Workers,
		Subscribed:     func() { s.ready.MarkServing(s.deps.NC, s.deps.Log) },
	}, s.deps.Log, s.deps.Metrics, s.handle)
}

// execution is one message's call, as the handler sees it.
type execution struct {
	ref  callref.Ref
	call *airlockv1.ToolCall
	// digest the decision or approval was made about, and who made it.
	digest, by string
	// precondition the approval's preview was made against ("" for none).
	precondition string
	trace        string
	delivered    uint64
	idem         string
}

var errTimeout = errors.New("tool timed out")

func (s *Service) handle(ctx context.Context, m jetstream.Msg) error {
	meta, err := m.Metadata()
	if err != nil {
		return consume.Permanent(fmt.Errorf("%s: message without JetStream metadata: %w", m.Subject(), err))
	}
	ev, err := envelope.Decode(m.Data(), m.Headers())
	if err != nil {
		return consume.Permanent(fmt.Errorf("%s: %w", m.Subject(), err))
	}
	r, err := s.decisions.VerifyDecision(ev)
	if err != nil {
		s.unsealed(ctx, ev, err)
		return consume.Permanent(fmt.Errorf("%s: %w", m.Subject(), err))
	}
	x, err := prepare(m.Subject(), ev, r)
	if err != nil {
		return consume.Permanent(err)
	}
	if x.call.GetAgentRuns() {
		return nil // gate-only: the agent runs the tool itself and reports it
	}
	x.trace = m.Headers().Get(envelope.HeaderTraceparent)
	x.delivered = meta.NumDelivered
	return s.execute(ctx, x)
}

// unsealed records a decision that no policy or approval service sealed:
// it reached the stream by another route (a misconfigured permission, a
// forged publish), runs nothing and leaves the call as it is.
func (s *Service) unsealed(ctx context.Context, ev *airlockv1.Event, why error) {
	s.deps.Log.Error("decision refused: it is not sealed by the policy or approval service; nothing runs",
		"agent", ev.GetAgentId(), "call", ev.GetCallId(), "type", envelope.TypeOf(ev), "err", why)
	if ids.Validate("agent id", ev.GetAgentId()) != nil || ids.Validate("call id", ev.GetCallId()) != nil {
		return
	}
	att := &airlockv1.Event{
		AgentId: ev.GetAgentId(), CallId: ev.GetCallId(), Revision: ev.GetRevision(), ThreadId: ev.GetThreadId(), Json: ev.GetJson(),
		Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "executor"},
		Body: &airlockv1.Event_UnauthorizedAttempt{UnauthorizedAttempt: &airlockv1.UnauthorizedAttempt{
			Action: "run", Why: fmt.Sprintf("an %s event not sealed by the policy or approval service was refused: %v", envelope.TypeOf(ev), why)}},
	}
	if _, err := s.pub.Publish(ctx, att, ""); err != nil {
		s.deps.Log.Error("could not record the refused decision", "err", err)
	}
}

// prepare reads the call out of a verified allowed or approved event. The
// call is ev's own, changed in place: ev was decoded for this handling
// alone and is not used after it (a copy of it cost a reflective clone on
// every call).
func prepare(subj string, ev *airlockv1.Event, r seal.Runnable) (*execution, error) {
	x := &execution{call: r.Call, digest: r.Digest, by: "the policy decision", precondition: r.Precondition}
	if r.Type == subject.Approved {
		x.by = "the approval"
	}
	p, err := subject.Parse(subj)
	if err != nil {
		return nil, err
	}
	if p.Agent != x.call.GetAgentId() || p.Call != x.call.GetCallId() || p.Agent != ev.GetAgentId() || p.Call != ev.GetCallId() ||
		max(ev.GetRevision(), 1) != max(x.call.GetRevision(), 1) {
		return nil, fmt.Errorf("%s: the event's call is %s/%s, not the subject's", subj, x.call.GetAgentId(), x.call.GetCallId())
	}
	if x.call.Server == "" {
		x.call.Server, x.call.Tool, _ = strings.Cut(x.call.Tool, "__")
	}
	x.ref = callref.Of(x.call)
	x.call.Revision = x.ref.Rev
	x.idem = x.ref.IdempotencyKey(x.call.IdempotencyKey)
	return x, nil
}

func (s *Service) execute(ctx context.Context, x *execution) error {
	got, err := canon.Digest(x.call.Arguments)
	switch {
	case err != nil:
		return s.refuse(ctx, x, ReasonArgumentsMismatch, fmt.Sprintf("the arguments cannot be hashed (%v): refusing to run them", err))
	case x.digest == "":
		return s.refuse(ctx, x, ReasonArgumentsMismatch, x.by+" carries no arguments digest: refusing to run arguments nobody approved")
	case got != x.digest:
		return s.refuse(ctx, x, ReasonArgumentsMismatch, fmt.Sprintf("the arguments hash to %.12s… but %s is for %.12s…: refusing to run arguments nobody approved", got, x.by, x.digest))
	}
	tool, ok := s.reg.Lookup(x.call.Server, x.call.Tool)
	if ok {
		has, err := s.reg.Has(ctx, x.call.Server, x.call.Tool)
		if err != nil {
			// The upstream could not be reached (started, listed) within its
			// deadline: the tool was never called.
			reason := ReasonToolError
			if errors.As(err, new(*UpstreamError)) {
				reason = ReasonUpstream
			}
			return s.refuse(ctx, x, reason, err.Error())
		}
		ok = has
	}
	if !ok {
		return s.refuse(ctx, x, ReasonUnknownTool, unknownToolText(x.call))
	}
	if x.delivered > maxDeliveries {
		return s.giveUp(ctx, x, tool)
	}
	token := ids.New("claim")
	cl, err := s.claims.Claim(ctx, x.ref, s.startedEvent(x, 1, token))
	if err != nil {
		return err
	}
	return s.settle(ctx, x, tool, cl, token)
}

// settle acts on a claim's verdict.
func (s *Service) settle(ctx context.Context, x *execution, tool Tool, cl Claim, token string) error {
	switch cl.Verdict {
	case Run:
		attempt := uint32(1)
		if cl.State.Started != nil && cl.State.Started.GetClaim() == token {
			attempt = cl.State.Started.GetAttempt()
		}
		return s.run(ctx, x, tool, attempt, cl.Seq, token)
	case Done:
		return nil
	case Busy:
		return fmt.Errorf("call %s is being run by executor %s; looking again later", x.ref, cl.State.Started.GetExecutorId())
	case Orphaned:
		return s.takeOver(ctx, x, tool, cl.State)
	}
	return fmt.Errorf("call %s: unexpected claim verdict %s", x.ref, cl.Verdict)
}

// takeOver handles a `started` whose owner died: an idempotent tool runs
// again (next attempt, same idempotency key); any other call ends
// indeterminate, because running it again could apply it twice.
func (s *Service) takeOver(ctx context.Context, x *execution, tool Tool, orphan ledger.State) error {
	dead := orphan.Started
	if tool.Idempotent {
		token := ids.New("claim")
		next := dead.GetAttempt() + 1
		s.deps.Log.Warn("executor died while running an idempotent tool; running it again with the same idempotency key",
			"call", x.ref.String(), "tool", tool.Name, "dead_executor", dead.GetExecutorId(), "attempt", next)
		cl, err := s.claims.TakeOver(ctx, orphan, s.startedEvent(x, next, token))
		if err != nil {
			return err
		}
		if cl.Verdict != Run {
			return fmt.Errorf("call %s changed while taking it over; looking again later", x.ref)
		}
		return s.run(ctx, x, tool, next, cl.Seq, token)
	}
	s.deps.Log.Warn("executor died while running a non-idempotent tool; the call ends indeterminate",
		"call", x.ref.String(), "tool", tool.Name, "dead_executor", dead.GetExecutorId())
	failed := s.failedEvent(x, ReasonIndeterminate, calls.FailureIndeterminate,
		fmt.Sprintf("executor %s stopped while running %s; the tool may or may not have run, and it is not declared idempotent, so it was not run again",
			dead.GetExecutorId(), tool.Name), 0, dead.GetAttempt())
	cl, err := s.claims.TakeOver(ctx, orphan, failed)
	if err != nil {
		return err
	}
	if cl.Verdict != Run {
		return fmt.Errorf("call %s changed while ending it; looking again later", x.ref)
	}
	return nil
}

// refuse ends the revision failed without running it, unless it was
// claimed or ended before.
func (s *Service) refuse(ctx context.Context, x *execution, reason, msg string) error {
	cl, err := s.claims.Refuse(ctx, x.ref, s.failedEvent(x, reason, calls.FailureError, msg, 0, 0))
	if err != nil {
		return err
	}
	switch cl.Verdict {
	case Run:
		s.deps.Log.Info("call refused", "call", x.ref.String(), "reason", reason, "message", msg)
		return nil
	case Done:
		return nil
	}
	// The revision is claimed. A message whose arguments do not match must
	// never settle it: the owner's own message will.
	if reason == ReasonArgumentsMismatch {
		s.deps.Log.Warn("message with unapproved arguments ignored: the call is already running", "call", x.ref.String())
		return nil
	}
	if cl.Verdict == Orphaned {
		// The tool is gone from the registry (or unreachable) while a claim
		// on it is open: a dead owner's claim can only end indeterminate.
		return s.takeOver(ctx, x, Tool{Name: x.call.Server + "__" + x.call.Tool}, cl.State)
	}
	return fmt.Errorf("call %s is being run by another executor; looking again later", x.ref)
}

// giveUp ends a call whose decision was handled maxDeliveries times
// without an end: indeterminate if it was started, an error if not.
func (s *Service) giveUp(ctx context.Context, x *execution, tool Tool) error {
	cl, err := s.claims.Inspect(ctx, x.ref)
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("the executor failed on this call %d times; it gave up so the call does not stay pending forever (see the executor's log)", x.delivered-1)
	switch cl.Verdict {
	case Done, Busy:
		return nil
	case Orphaned:
		failed := s.failedEvent(x, ReasonGaveUp, calls.FailureIndeterminate, msg+"; it had started and may or may not have run", 0, cl.State.Started.GetAttempt())
		_, err := s.claims.TakeOver(ctx, cl.State, failed)
		return err
	}
	_, err = s.claims.TakeOver(ctx, cl.State, s.failedEvent(x, ReasonGaveUp, calls.FailureError, msg+"; it never started", 0, 0))
	return err
}

// run starts the tool under a claim this handling owns (the `started` at
// startedSeq) and appends its end.
func (s *Service) run(ctx context.Context, x *execution, tool Tool, attempt uint32, startedSeq uint64, token string) error {
	// The tool and what follows it outlive a shutdown request: a started
	// side effect is finished and reported rather than abandoned.
	base := context.WithoutCancel(ctx)
	// The first attempt runs only against the world its reviewers saw; a
	// retry after a crash does not check again, since the attempt before it
	// may itself have changed what the precondition describes.
	if attempt == 1 {
		if why := s.worldChanged(base, x); why != "" {
			return s.endUnrun(base, x, startedSeq, token, why)
		}
	}
	hb := s.startHeartbeat(base, x, attempt)
	started := time.Now()
	raw, err, timedOut := s.callTool(base, tool, Request{
		Server: x.call.Server, Tool: x.call.Tool, Arguments: x.call.Arguments.AsMap(),
		IdempotencyKey: x.idem, CallID: x.call.CallId, Revision: x.call.Revision, Attempt: attempt,
	})
	latency := time.Since(started)
	// The heartbeat goes on until the end is stored: an owner that holds a
	// result but cannot store it yet (a stalled connection) is alive, and
	// an observer that sees its beats looks again later instead of ending
	// the call indeterminate.
	defer hb.stop()

	var ev *airlockv1.Event
	var toolErr *ToolError
	var upErr *UpstreamError
	switch {
	case err == nil:
		text, truncated := LimitResult(raw, s.deps.Config.Executor.MaxResultBytes)
		ev = s.event(x, &airlockv1.Event_Completed{Completed: &airlockv1.Completed{
			ResultJson: text, Truncated: truncated, Latency: durationpb.New(latency), Attempt: attempt, Claim: token,
		}})
		ev.EventId = x.ref.EventID("result")
	case errors.As(err, &upErr):
		// Before the timeout case: an upstream still starting when the tool
		// timeout ran out never reached the tool (outcome error).
		ev = s.failedEvent(x, ReasonUpstream, upErr.Outcome(), upErr.Error(), latency, attempt)
	case timedOut:
		ev = s.failedEvent(x, ReasonTimeout, calls.FailureIndeterminate,
			fmt.Sprintf("%s did not finish within its %s timeout; it may or may not have applied the call", tool.Name, tool.Timeout), latency, attempt)
	case errors.Is(err, ErrUnknownTool):
		ev = s.failedEvent(x, ReasonUnknownTool, calls.FailureError, unknownToolText(x.call), latency, attempt)
	case errors.As(err, &toolErr):
		o := calls.FailureError
		if toolErr.Indeterminate {
			o = calls.FailureIndeterminate
		}
		ev = s.failedEvent(x, ReasonToolError, o, toolErr.Message, latency, attempt)
		if len(toolErr.Result) > 0 {
			f := ev.GetFailed()
			f.ResultJson, f.Truncated = LimitResult(toolErr.Result, s.deps.Config.Executor.MaxResultBytes)
		}
	default:
		ev = s.failedEvent(x, ReasonToolError, calls.FailureError, err.Error(), latency, attempt)
	}
	if f := ev.GetFailed(); f != nil {
		f.Claim = token
	}
	// End retries within this budget, each attempt bounded on its own.
	pubCtx, cancel := context.WithTimeout(base, endBudget)
	defer cancel()
	mine, err := s.claims.End(pubCtx, x.ref, ev, startedSeq)
	if err != nil {
		// Not stored: the redelivery finds the `started` without an end
		// and its owner gone, and settles it (indeterminate, or a retry
		// of an idempotent tool).
		return fmt.Errorf("call %s: record the end: %w", x.ref, err)
	}
	if !mine {
		s.deps.Log.Warn("another executor took this call over while it ran; the stream keeps its end, not this result", "call", x.ref.String())
	}
	return nil
}

// endUnrun ends a claimed revision `failed` without calling its tool.
func (s *Service) endUnrun(ctx context.Context, x *execution, startedSeq uint64, token, why string) error {
	ev := s.failedEvent(x, ReasonPrecondition, calls.FailureError, why, 0, 1)
	ev.GetFailed().Claim = token
	pubCtx, cancel := context.WithTimeout(ctx, endBudget)
	defer cancel()
	if _, err := s.claims.End(pubCtx, x.ref, ev, startedSeq); err != nil {
		return fmt.Errorf("call %s: record that it was not run: %w", x.ref, err)
	}
	s.deps.Log.Info("approved call not run: its precondition no longer holds", "call", x.ref.String(), "why", why)
	return nil
}

// endBudget bounds recording a call's end, all attempts together.
const endBudget = 30 * time.Second

// callTool runs the adapter with the tool's timeout and returns when it
// returns or, at the latest, shortly after the timeout: an adapter that
// ignores its context must not hold the call (and its liveness record)
// forever.
func (s *Service) callTool(ctx context.Context, tool Tool, req Request) (raw []byte, err error, timedOut bool) {
	runCtx, cancel := context.WithTimeoutCause(ctx, tool.Timeout, errTimeout)
	defer cancel()
	type result struct {
		raw []byte
		err error
	}
	done := make(chan result, 1)
	s.running.Add(1)
	go func() {
		defer s.running.Done()
		raw, err := tool.Adapter.Call(runCtx, req)
		done <- result{raw, err}
	}()
	select {
	case r := <-done:
		return r.raw, r.err, r.err != nil && errors.Is(context.Cause(runCtx), errTimeout)
	case <-runCtx.Done():
	}
	grace := time.NewTimer(2 * time.Second)
	defer grace.Stop()
	select {
	case r := <-done:
		return r.raw, r.err, r.err != nil && errors.Is(context.Cause(runCtx), errTimeout)
	case <-grace.C:
		return nil, errTimeout, true
	}
}

// heartbeat keeps a long execution's liveness record fresh: every
// s.heartbeat, starting one period after the tool started (calls that end
// sooner, most of them, write none). Writes are plain puts that only the
// owner makes, so a write that timed out but landed leaves nothing stale;
// a failed write is retried at the next period.
type heartbeat struct {
	mu      sync.Mutex
	stopped bool
	timer   *time.Timer
}

func (s *Service) startHeartbeat(ctx context.Context, x *execution, attempt uint32) *heartbeat {
	h := &heartbeat{}
	// The record is built at the first beat: most calls end before it.
	startedAt := time.Now()
	var rec *airlockv1.ExecutionRecord
	var beat func()
	beat = func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.stopped {
			return
		}
		if rec == nil {
			rec = &airlockv1.ExecutionRecord{
				AgentId: x.ref.Agent, CallId: x.ref.Call, Revision: x.ref.Rev, State: airlockv1.ExecutionState_EXECUTION_STATE_RUNNING,
				ExecutorId: s.id, Attempt: attempt, IdempotencyKey: x.idem, ArgumentsDigest: x.digest, StartedAt: timestamppb.New(startedAt),
			}
		}
		bctx, cancel := context.WithTimeout(ctx, s.heartbeat)
		if err := s.liveness.Beat(bctx, x.ref, rec); err != nil {
			s.deps.Log.Warn("liveness heartbeat failed; retrying at the next one", "call", x.ref.String(), "err", err)
		}
		cancel()
		h.timer.Reset(s.heartbeat)
	}
	h.mu.Lock()
	h.timer = time.AfterFunc(s.heartbeat, beat)
	h.mu.Unlock()
	return h
}

// stop ends the heartbeat, waiting for one being written.
func (h *heartbeat) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	h.timer.Stop()
}

func (s *Service) event(x *execution, body any) *airlockv1.Event {
	ev := envelope.ForCall(x.call, &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "executor"})
	switch b := body.(type) {
	case *airlockv1.Event_Started:
		ev.Body = b
	case *airlockv1.Event_Completed:
		ev.Body = b
	case *airlockv1.Event_Failed:
		ev.Body = b
	}
	return ev
}

func (s *Service) startedEvent(x *execution, attempt uint32, token string) *airlockv1.Event {
	ev := s.event(x, &airlockv1.Event_Started{Started: &airlockv1.Started{
		ExecutorId: s.id, Attempt: attempt, IdempotencyKey: x.idem, Claim: token,
	}})
	ev.EventId = x.ref.EventID(subject.Started + "." + strconv.FormatUint(uint64(attempt), 10))
	return ev
}

// unknownToolText is the message of a call that ended unknown_tool, as
// executorapi words it everywhere: without the registry's contents, since
// the call's agent reads it and agents may not read the registry.
func unknownToolText(call *airlockv1.ToolCall) string {
	return executorapi.Failure(&airlockv1.UnknownTool{Tool: calls.ToolName(call.GetServer(), call.GetTool()), Server: call.GetServer()},
		func(name string) string { return name })
}

func (s *Service) failedEvent(x *execution, reason, outcome, msg string, latency time.Duration, attempt uint32) *airlockv1.Event {
	f := &airlockv1.Failed{Reason: reason, Outcome: outcome, Message: msg, Attempt: attempt, Claim: ids.New("claim")}
	if latency > 0 {
		f.Latency = durationpb.New(latency)
	}
	ev := s.event(x, &airlockv1.Event_Failed{Failed: f})
	ev.EventId = x.ref.EventID("result")
	return ev
}
