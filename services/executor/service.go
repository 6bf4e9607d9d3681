// Package executor is the executor service: it takes every `allowed` and
// `approved` event, checks that the arguments are the ones that were
// decided on, claims the call revision in the executions bucket, runs the
// tool through its adapter (MCP, webhook, built-in demo), and publishes
// `started` then exactly one of `completed` or `failed`.
//
// Exactly once: the claim (a KV create of "<call>.<revision>") happens
// before the tool starts, so however many messages carry the same call
// revision and however many replicas handle them, one of them runs it.
// The owner heart-beats its claim while the tool runs; a claim that stops
// changing belonged to an executor that died mid-run: a tool declared
// idempotent is then run again with the same idempotency key, any other
// ends `failed` with outcome `indeterminate`. `completed` and `failed` of
// one revision share the event id "<call>.<revision>.result", so the
// stream can never hold both.
package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/canon"
	"github.com/airlock-gate/airlock/services/shared/consume"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/ids"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// Durable is the consumer every executor replica shares.
const Durable = "executor"

// ResultEventType is the suffix of the event id that `completed` and
// `failed` of one call revision share.
const ResultEventType = "result"

// Service consumes allowed and approved calls and runs them.
type Service struct {
	deps      svc.Deps
	reg       *Registry
	claims    *Claimer
	pub       *envelope.Publisher
	id        string
	ackWait   time.Duration
	heartbeat time.Duration
}

// NewFromConfig builds the executor as configured: the tool registry from
// executor.tools_file (the demo tools in executor.sandbox, default
// <dev.data_dir>/sandbox) and claims in the executions bucket.
func NewFromConfig(ctx context.Context, deps svc.Deps) (*Service, error) {
	cfg := deps.Config
	reg, err := LoadRegistry(cfg.Executor.ToolsFile, RegistryOptions{Sandbox: cfg.SandboxDir(), DefaultTimeout: cfg.Executor.DefaultTimeout})
	if err != nil {
		return nil, err
	}
	kv, err := deps.JS.KeyValue(ctx, cfg.Buckets.Executions)
	if err != nil {
		reg.Close()
		return nil, fmt.Errorf("open executions bucket %s: %w (it is created by provisioning; run airlock dev or serve once against this NATS)", cfg.Buckets.Executions, err)
	}
	return New(deps, reg, NewKVStore(kv)), nil
}

// New builds the service around a registry and a claim store. The service
// owns reg and closes it when Run returns.
func New(deps svc.Deps, reg *Registry, store ClaimStore) *Service {
	ackWait := deps.Config.Executor.AckWait
	if ackWait <= 0 {
		ackWait = 10 * time.Second
	}
	id := executorID()
	return &Service{
		deps: deps, reg: reg, pub: deps.Publisher("executor"), id: id,
		ackWait: ackWait, heartbeat: ackWait / 4,
		claims: NewClaimer(store, id, ackWait/4),
	}
}

func executorID() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "executor"
	}
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), ids.New("x")[2:10])
}

// ID is this replica's executor id, recorded in claims and `started` events.
func (s *Service) ID() string { return s.id }

// Name implements svc.Service.
// ClaimKey is the executions-bucket key of a call revision: "<agent>.<call>.<revision>".
func ClaimKey(call *airlockv1.ToolCall) string {
	return fmt.Sprintf("%s.%s.%d", call.GetAgentId(), call.GetCallId(), max(call.GetRevision(), 1))
}

func (s *Service) Name() string { return "executor" }

// Run implements svc.Service: it consumes allowed and approved events with
// the durable consumer every replica shares until ctx ends, lets running
// tools finish, and closes the adapters.
func (s *Service) Run(ctx context.Context) error {
	defer s.reg.Close()
	return consume.Run(ctx, s.deps.JS, consume.Spec{
		Service: "executor", Stream: s.deps.Config.Stream.Name, Durable: Durable,
		FilterSubjects: []string{subject.OfType(subject.Allowed), subject.OfType(subject.Approved)},
		AckWait:        s.ackWait,
		Workers:        s.deps.Config.Executor.Workers,
	}, s.deps.Log, s.deps.Metrics, s.handle)
}

// execution is one message's call, as the handler sees it.
type execution struct {
	call *airlockv1.ToolCall
	// digest the decision or approval was made about, and who made it.
	digest, by string
	trace      string
	req        ClaimRequest
}

var (
	errTimeout   = errors.New("tool timed out")
	errLostClaim = errors.New("claim taken over by another executor")
)

func (s *Service) handle(ctx context.Context, m jetstream.Msg) error {
	ev, err := envelope.Decode(m.Data(), m.Headers())
	if err != nil {
		return consume.Permanent(fmt.Errorf("%s: %w", m.Subject(), err))
	}
	x, err := prepare(m.Subject(), ev)
	if err != nil {
		return consume.Permanent(err)
	}
	x.trace = m.Headers().Get(envelope.HeaderTraceparent)
	return s.execute(ctx, x)
}

// prepare reads the call out of an allowed or approved event.
func prepare(subj string, ev *airlockv1.Event) (*execution, error) {
	x := &execution{}
	switch b := ev.Body.(type) {
	case *airlockv1.Event_Allowed:
		x.call, x.digest, x.by = b.Allowed.GetCall(), b.Allowed.GetDecision().GetArgumentsDigest(), "the policy decision"
	case *airlockv1.Event_Approved:
		x.call, x.digest, x.by = b.Approved.GetCall(), b.Approved.GetArgumentsDigest(), "the approval"
	default:
		return nil, fmt.Errorf("%s: the executor takes allowed and approved events, not %q", subj, envelope.TypeOf(ev))
	}
	if x.call == nil {
		return nil, fmt.Errorf("%s: the %s event has no call", subj, envelope.TypeOf(ev))
	}
	p, err := subject.Parse(subj)
	if err != nil {
		return nil, err
	}
	if p.Agent != x.call.GetAgentId() || p.Call != x.call.GetCallId() {
		return nil, fmt.Errorf("%s: the event's call is %s/%s, not the subject's", subj, x.call.GetAgentId(), x.call.GetCallId())
	}
	x.call = proto.Clone(x.call).(*airlockv1.ToolCall)
	if x.call.Server == "" {
		x.call.Server, x.call.Tool, _ = strings.Cut(x.call.Tool, "__")
	}
	if x.call.Revision == 0 {
		x.call.Revision = 1 // as ingress numbers a first submission
	}
	// The agent is part of the key: call ids are chosen by agents, and one
	// agent reusing another's call id must never take over its claim.
	key := ClaimKey(x.call)
	idem := x.call.IdempotencyKey
	if idem == "" {
		idem = key
	}
	x.req = ClaimRequest{Key: key, CallID: x.call.CallId, Revision: x.call.Revision, Digest: x.digest, IdempotencyKey: idem}
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
			return s.refuse(ctx, x, ReasonToolError, err.Error())
		}
		ok = has
	}
	if !ok {
		return s.refuse(ctx, x, ReasonUnknownTool, fmt.Sprintf("no tool %s__%s in the registry (servers: %s): add it to the tools file (executor.tools_file)",
			x.call.Server, x.call.Tool, strings.Join(s.reg.Servers(), ", ")))
	}
	cl, err := s.claims.Claim(ctx, x.req)
	if err != nil {
		return err
	}
	return s.settle(ctx, x, tool, cl)
}

// settle acts on a claim's verdict.
func (s *Service) settle(ctx context.Context, x *execution, tool Tool, cl Claim) error {
	switch cl.Verdict {
	case Run:
		return s.run(ctx, x, tool, cl)
	case Done:
		return s.ensureResult(ctx, x, cl.Record)
	case Busy:
		return fmt.Errorf("call %s is being handled by executor %s; looking again later", x.req.Key, cl.Record.GetExecutorId())
	case Orphaned:
		if done, err := s.reconcile(ctx, x, cl); done || err != nil {
			return err
		}
		if tool.Idempotent {
			s.deps.Log.Warn("executor died while running an idempotent tool; running it again with the same idempotency key",
				"call", x.req.Key, "tool", tool.Name, "dead_executor", cl.Record.GetExecutorId(), "attempt", cl.Record.GetAttempt()+1)
			next, err := s.claims.Retry(ctx, x.req.Key, cl)
			if err != nil {
				return err
			}
			return s.settle(ctx, x, tool, next)
		}
		next, err := s.claims.Abandon(ctx, x.req.Key, cl)
		if err != nil {
			return err
		}
		if next.Verdict != Run {
			return s.settle(ctx, x, tool, next)
		}
		s.deps.Log.Warn("executor died while running a non-idempotent tool; the call ends indeterminate",
			"call", x.req.Key, "tool", tool.Name, "dead_executor", cl.Record.GetExecutorId())
		_, err = s.publish(ctx, x, s.failedEvent(x, ReasonIndeterminate, OutcomeIndeterminate,
			fmt.Sprintf("executor %s stopped while running %s; the tool may or may not have run, and it is not declared idempotent, so it was not run again",
				cl.Record.GetExecutorId(), tool.Name), 0, cl.Record.GetAttempt()))
		return err
	}
	return fmt.Errorf("call %s: unexpected claim verdict %s", x.req.Key, cl.Verdict)
}

// refuse ends the call revision failed without running it, unless it was
// claimed before.
func (s *Service) refuse(ctx context.Context, x *execution, reason, msg string) error {
	cl, err := s.claims.Refuse(ctx, x.req, reason)
	if err != nil {
		return err
	}
	if cl.Verdict == Run {
		s.deps.Log.Info("call refused", "call", x.req.Key, "reason", reason, "message", msg)
		_, err := s.publish(ctx, x, s.failedEvent(x, reason, OutcomeError, msg, 0, 0))
		return err
	}
	if Terminal(cl.Record) {
		return s.ensureResult(ctx, x, cl.Record)
	}
	// The revision is claimed and running. A message whose arguments do not
	// match must never settle it: the owner's own message will.
	if reason == ReasonArgumentsMismatch {
		s.deps.Log.Warn("message with unapproved arguments ignored: the call is already running", "call", x.req.Key)
		return nil
	}
	// The tool is gone from the registry (or unreachable) while a claim on it
	// is open: a dead owner's claim can only end indeterminate.
	insp, err := s.claims.Inspect(ctx, x.req.Key)
	if err != nil {
		return err
	}
	return s.settle(ctx, x, Tool{Name: x.call.Server + "__" + x.call.Tool}, insp)
}

// run starts the tool under a claim this executor owns and publishes its end.
func (s *Service) run(ctx context.Context, x *execution, tool Tool, cl Claim) error {
	attempt := cl.Record.GetAttempt()
	// `started` is stored before the result (its ack is awaited before the
	// result is published) but the tool does not wait for it: the claim, not
	// the event, is what makes the start exclusive. If `started` cannot be
	// stored the message is retried and finds the claim orphaned, exactly as
	// if this executor had died mid-run.
	startedMsg, err := envelope.Encode(s.startedEvent(x, cl.Record), "airlock/executor", x.trace)
	if err != nil {
		return consume.Permanent(err)
	}
	startedAck, err := s.deps.JS.PublishMsgAsync(startedMsg)
	if err != nil {
		return fmt.Errorf("call %s: publish started: %w", x.req.Key, err)
	}
	// The tool and what follows it outlive a shutdown request: a started
	// side effect is finished and reported rather than abandoned.
	base := context.WithoutCancel(ctx)
	owned, lose := context.WithCancelCause(base)
	runCtx, cancel := context.WithTimeoutCause(owned, tool.Timeout, errTimeout)
	hb := s.startHeartbeat(base, x.req.Key, cl, lose)

	started := time.Now()
	raw, err := tool.Adapter.Call(runCtx, Request{
		Server: x.call.Server, Tool: x.call.Tool, Arguments: x.call.Arguments.AsMap(),
		IdempotencyKey: cl.Record.GetIdempotencyKey(), CallID: x.call.CallId, Revision: x.call.Revision, Attempt: attempt,
	})
	latency := time.Since(started)
	timedOut := errors.Is(context.Cause(runCtx), errTimeout)
	cancel()
	cl.Rev = hb.stop()
	if errors.Is(context.Cause(owned), errLostClaim) {
		s.deps.Log.Warn("another executor took over this call while it ran; its result is theirs to report", "call", x.req.Key)
		return nil
	}

	var ev *airlockv1.Event
	state, outcome := airlockv1.ExecutionState_EXECUTION_STATE_FAILED, ""
	var toolErr *ToolError
	switch {
	case err == nil:
		text, truncated := LimitResult(raw, s.deps.Config.Executor.MaxResultBytes)
		ev = s.event(x, &airlockv1.Event_Completed{Completed: &airlockv1.Completed{
			ResultJson: text, Truncated: truncated, Latency: durationpb.New(latency), Attempt: attempt,
		}})
		ev.EventId = envelope.EventID(x.call.CallId, x.call.Revision, ResultEventType)
		state, outcome = airlockv1.ExecutionState_EXECUTION_STATE_COMPLETED, outcomeCompleted
	case timedOut:
		outcome = ReasonTimeout
		ev = s.failedEvent(x, ReasonTimeout, OutcomeIndeterminate,
			fmt.Sprintf("%s did not finish within its %s timeout; it may or may not have applied the call", tool.Name, tool.Timeout), latency, attempt)
	case errors.Is(err, ErrUnknownTool):
		outcome = ReasonUnknownTool
		ev = s.failedEvent(x, ReasonUnknownTool, OutcomeError, err.Error(), latency, attempt)
	case errors.As(err, &toolErr):
		o := OutcomeError
		if toolErr.Indeterminate {
			o = OutcomeIndeterminate
		}
		outcome = ReasonToolError
		ev = s.failedEvent(x, ReasonToolError, o, toolErr.Message, latency, attempt)
	default:
		outcome = ReasonToolError
		ev = s.failedEvent(x, ReasonToolError, OutcomeError, err.Error(), latency, attempt)
	}
	// Encoded before waiting for started's ack, so that the result goes
	// out as soon as the ack is in.
	resultMsg, err := envelope.Encode(ev, "airlock/executor", x.trace)
	if err != nil {
		return consume.Permanent(err)
	}
	pubCtx, pcancel := context.WithTimeout(base, 30*time.Second)
	defer pcancel()
	select {
	case <-startedAck.Ok():
		s.deps.Metrics.Published.WithLabelValues("executor", subject.Started).Inc()
	case err := <-startedAck.Err():
		return fmt.Errorf("call %s: publish started: %w", x.req.Key, err)
	case <-pubCtx.Done():
		return fmt.Errorf("call %s: publish started: %w", x.req.Key, pubCtx.Err())
	}
	if _, err := s.deps.JS.PublishMsg(pubCtx, resultMsg); err != nil {
		// Not acknowledged: the redelivery finds the claim orphaned and
		// settles it (indeterminate, or a retry of an idempotent tool).
		return fmt.Errorf("call %s: publish %s: %w", x.req.Key, resultMsg.Subject, err)
	}
	s.deps.Metrics.Published.WithLabelValues("executor", envelope.TypeOf(ev)).Inc()
	if _, _, err := s.claims.Finish(pubCtx, x.req.Key, cl, state, outcome); err != nil {
		if errors.Is(err, ErrClaimChanged) {
			return nil // taken over meanwhile; the stream keeps the first result
		}
		return err // the redelivery reconciles the record from the published result
	}
	return nil
}

// heartbeat keeps a running claim alive: every s.heartbeat it rewrites the
// claim so that observers see its owner is alive. It runs on a timer, not
// a goroutine of its own, so a tool that ends within one period (most do)
// costs no heartbeat at all, and stopping it needs no hand-off.
type heartbeat struct {
	s    *Service
	ctx  context.Context
	key  string
	lose context.CancelCauseFunc

	mu      sync.Mutex // held while a heartbeat is written, so stop waits for it
	cl      Claim
	stopped bool
	timer   *time.Timer
}

// startHeartbeat starts heart-beating cl. Losing the claim cancels the run
// with errLostClaim.
func (s *Service) startHeartbeat(ctx context.Context, key string, cl Claim, lose context.CancelCauseFunc) *heartbeat {
	h := &heartbeat{s: s, ctx: ctx, key: key, lose: lose, cl: cl}
	h.mu.Lock()
	h.timer = time.AfterFunc(s.heartbeat, h.beat)
	h.mu.Unlock()
	return h
}

func (h *heartbeat) beat() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return
	}
	began := time.Now()
	hctx, cancel := context.WithTimeout(h.ctx, h.s.heartbeat)
	rev, err := h.s.claims.Heartbeat(hctx, h.key, h.cl)
	cancel()
	switch {
	case err == nil:
		h.cl.Rev = rev
	case errors.Is(err, ErrClaimChanged):
		h.lose(errLostClaim)
		return // no more heartbeats: the claim is someone else's
	default:
		h.s.deps.Log.Warn("claim heartbeat failed; retrying", "call", h.key, "err", err)
	}
	// Keep the period from start to start, as observers expect.
	h.timer.Reset(max(h.s.heartbeat-time.Since(began), time.Millisecond))
}

// stop ends the heartbeat (waiting for one being written) and returns the
// claim's last revision.
func (h *heartbeat) stop() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	h.timer.Stop()
	return h.cl.Rev
}

// reconcile handles an orphaned claim whose owner published its result but
// died before recording it: the record is brought in line with the stream.
func (s *Service) reconcile(ctx context.Context, x *execution, cl Claim) (bool, error) {
	ev, err := s.findResult(ctx, x)
	if err != nil || ev == nil {
		return false, err
	}
	state, outcome := airlockv1.ExecutionState_EXECUTION_STATE_COMPLETED, outcomeCompleted
	if f := ev.GetFailed(); f != nil {
		state, outcome = airlockv1.ExecutionState_EXECUTION_STATE_FAILED, f.GetReason()
	}
	if _, _, err := s.claims.Finish(ctx, x.req.Key, cl, state, outcome); err != nil && !errors.Is(err, ErrClaimChanged) {
		return true, err
	}
	return true, nil
}

// ensureResult makes sure an ended record has its terminal event: a
// refusal or an abandonment records the claim first and publishes second,
// and a crash in between must not leave the agent without an answer.
func (s *Service) ensureResult(ctx context.Context, x *execution, rec *airlockv1.ExecutionRecord) error {
	if rec.GetState() != airlockv1.ExecutionState_EXECUTION_STATE_FAILED {
		return nil // completed records are written after their event
	}
	ev, err := s.findResult(ctx, x)
	if err != nil || ev != nil {
		return err
	}
	outcome := OutcomeError
	if rec.GetOutcome() == ReasonIndeterminate || rec.GetOutcome() == ReasonTimeout {
		outcome = OutcomeIndeterminate
	}
	_, err = s.publish(ctx, x, s.failedEvent(x, rec.GetOutcome(), outcome,
		fmt.Sprintf("recorded by executor %s", rec.GetExecutorId()), 0, rec.GetAttempt()))
	return err
}

// findResult returns the completed or failed event of the call revision, if stored.
func (s *Service) findResult(ctx context.Context, x *execution) (*airlockv1.Event, error) {
	var filters []string
	for _, typ := range []string{subject.Completed, subject.Failed} {
		subj, err := subject.Event(x.call.AgentId, x.call.CallId, typ)
		if err != nil {
			return nil, err
		}
		filters = append(filters, subj)
	}
	var found *airlockv1.Event
	err := bus.ReadStored(ctx, s.deps.JS, s.deps.Config.Stream.Name, filters, func(m jetstream.Msg) bool {
		ev, err := envelope.Decode(m.Data(), m.Headers())
		if err == nil && max(ev.GetRevision(), 1) == x.call.Revision {
			found = ev
			return false
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("look up the result of %s: %w", x.req.Key, err)
	}
	return found, nil
}

func (s *Service) event(x *execution, body any) *airlockv1.Event {
	ev := &airlockv1.Event{
		AgentId: x.call.AgentId, CallId: x.call.CallId, Revision: x.call.Revision, ThreadId: x.call.ThreadId,
		Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "executor"},
	}
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

func (s *Service) startedEvent(x *execution, rec *airlockv1.ExecutionRecord) *airlockv1.Event {
	ev := s.event(x, &airlockv1.Event_Started{Started: &airlockv1.Started{
		ExecutorId: s.id, Attempt: rec.GetAttempt(), IdempotencyKey: rec.GetIdempotencyKey(),
	}})
	typ := subject.Started
	if rec.GetAttempt() > 1 {
		typ = fmt.Sprintf("%s-%d", subject.Started, rec.GetAttempt())
	}
	ev.EventId = envelope.EventID(x.call.CallId, x.call.Revision, typ)
	return ev
}

func (s *Service) failedEvent(x *execution, reason, outcome, msg string, latency time.Duration, attempt uint32) *airlockv1.Event {
	f := &airlockv1.Failed{Reason: reason, Outcome: outcome, Message: msg, Attempt: attempt}
	if latency > 0 {
		f.Latency = durationpb.New(latency)
	}
	ev := s.event(x, &airlockv1.Event_Failed{Failed: f})
	ev.EventId = envelope.EventID(x.call.CallId, x.call.Revision, ResultEventType)
	return ev
}

func (s *Service) publish(ctx context.Context, x *execution, ev *airlockv1.Event) (*jetstream.PubAck, error) {
	ack, err := s.pub.Publish(ctx, ev, x.trace)
	if err != nil {
		return nil, fmt.Errorf("call %s: %w", x.req.Key, err)
	}
	s.deps.Metrics.Published.WithLabelValues("executor", envelope.TypeOf(ev)).Inc()
	return ack, nil
}
