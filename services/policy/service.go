// Package policy is the policy service: it takes every request agents put
// in the intake stream, refuses malformed ones as `invalid`, records each
// accepted call revision as `requested` in the events stream, decides it
// with Rego, and publishes exactly one sealed `allowed`, `denied` or
// `approval_requested` per call revision. It also records the agents'
// reports of gate-only calls they ran themselves (report.go).
package policy

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/consume"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/ids"
	"github.com/airlock-gate/airlock/services/shared/ingress"
	"github.com/airlock-gate/airlock/services/shared/ledger"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// Decider decides one validated call. Implementations fail closed: when
// they cannot decide they return a deny decision, not an error.
type Decider interface {
	Decide(ctx context.Context, call *airlockv1.ToolCall) *airlockv1.Decision
}

// SettledDecider is a Decider that can decide a call in two steps, so the
// policy is evaluated once whether or not the decision is recorded with the
// request: DecideNow evaluates the policy alone, changing nothing, and says
// whether that decision is final (allow or deny: it can be recorded with the
// request in one write); Finish completes it once the revision is recorded
// (a call the policy asks about may spend a standing grant, which only a
// recorded revision may do) and returns the final decision. Decide is
// DecideNow then Finish.
type SettledDecider interface {
	Decider
	DecideNow(ctx context.Context, call *airlockv1.ToolCall) (d *airlockv1.Decision, final bool)
	Finish(ctx context.Context, call *airlockv1.ToolCall, d *airlockv1.Decision) *airlockv1.Decision
}

// Service consumes requests and publishes decisions.
type Service struct {
	deps    svc.Deps
	decider Decider
	pub     *bus.Publisher
	// ledger is where a gate-only call's report is recorded.
	ledger    ledger.Ledger
	decisions seal.Key
	frontend  seal.Key
	alongside []func(ctx context.Context, ready func()) error
	ready     svc.Readiness
	// batch: record a request and a decision that changes nothing as one
	// atomic batch. Only on a replicated events stream: there a batch
	// costs less than the two appends it replaces, while a single server
	// stages every batch in a file store of its own, which costs
	// milliseconds (docs/benchmarks.md, "atomic batch of two").
	batch bool
	// budgets bound each agent's calls and request bytes a minute
	// (limits.agent_calls_per_minute, limits.agent_request_bytes_per_minute).
	budgets *agentBudgets
	// streamWatch reads the events stream's use (NewFromConfig); nil
	// for a service built by New.
	streamWatch *bus.StreamWatch
}

// Durable is the consumer every policy replica shares.
const Durable = "policy"

// New builds the service around decider. Each alongside function runs for
// as long as the service does (the engine's change watchers and endpoints)
// and calls ready once it serves; one that fails stops the service with its
// error. It needs the decision key (to seal what it allows) and the
// front-end key (to recognise what a front-end vouches for).
func New(deps svc.Deps, decider Decider, alongside ...func(ctx context.Context, ready func()) error) (*Service, error) {
	dk, err := deps.DecisionKey()
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	fk, err := deps.FrontendKey()
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	pub := deps.Publisher("policy")
	return &Service{deps: deps, decider: decider, pub: pub, ledger: ledger.NewStream(deps.NC, deps.Config.Stream.Name, pub),
		decisions: dk, frontend: fk, alongside: alongside, batch: deps.Config.Stream.Replicas > 1,
		budgets: newAgentBudgets(deps.Config.Limits, noticesPerMinute(deps.Config))}, nil
}

// Name implements svc.Service.
func (s *Service) Name() string { return "policy" }

// Ready implements svc.Service.
func (s *Service) Ready() <-chan struct{} { return s.ready.Ready() }

// Run implements svc.Service. It is ready once every alongside function
// serves and the intake's consumer is subscribed.
func (s *Service) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	failed := make(chan error, len(s.alongside))
	var starting atomic.Int32
	starting.Store(int32(len(s.alongside)) + 1)
	part := func() func() {
		return sync.OnceFunc(func() {
			if starting.Add(-1) == 0 {
				s.ready.MarkServing(s.deps.NC, s.deps.Log)
			}
		})
	}
	var wg sync.WaitGroup
	for _, f := range s.alongside {
		wg.Add(1)
		ready := part()
		go func() {
			defer wg.Done()
			if err := f(ctx, ready); err != nil && ctx.Err() == nil {
				failed <- err
				cancel()
			}
		}()
	}
	err := consume.Run(ctx, s.deps.JS, consume.Spec{
		Service: "policy", Stream: s.deps.Config.Intake.Name, Durable: Durable,
		FilterSubjects: []string{subject.AllRequests},
		Workers:        s.deps.Config.Policy.Workers,
		// One agent's requests share a subject: up to a quarter of the
		// workers, so that it can never occupy them all. Two requests for one
		// call are safe in parallel: accept is a compare-and-append.
		Lanes: max(1, s.deps.Config.Policy.Workers/4),
		// The intake is a work queue: an ack that empties it makes the
		// server write a new block file. Requests that follow each other
		// within this keep it from emptying (consume.Spec.HoldLastAck).
		HoldLastAck: IntakeAckHold(s.deps.Config.Intake),
		Subscribed:  part(),
	}, s.deps.Log, s.deps.Metrics, s.handle)
	cancel()
	wg.Wait()
	select {
	case ferr := <-failed:
		return ferr
	default:
		return err
	}
}

// intake is one request as it came out of the intake stream.
type intake struct {
	subject  string
	seq      uint64
	received time.Time
	trace    string
	// json: the agent wrote the request as protojson, so every event of the
	// call is stored as protojson too.
	json bool
}

func (s *Service) handle(ctx context.Context, m jetstream.Msg) error {
	meta, err := m.Metadata()
	if err != nil {
		return consume.Permanent(fmt.Errorf("message without JetStream metadata: %w", err))
	}
	// The JSON flag is read from the request as the intake stored it (its
	// Content-Type header), whatever subject it is stored under.
	in := intake{subject: m.Subject(), seq: meta.Sequence.Stream, received: meta.Timestamp, trace: m.Headers().Get(envelope.HeaderTraceparent),
		json: envelope.IsJSON(m.Headers())}
	if agent, callID, ok := subject.RequestTokens(in.subject); ok {
		// Charged before anything is written: an agent over its budget
		// gets a small refusal, or nothing, never its arguments recorded;
		// and, while its notice budget lasts, a notice that is not stored.
		b := s.budgets.take(agent, len(m.Data()), time.Now())
		var rev uint32
		if b.notify || b.verdict == overBudget {
			// The body is read only to be answered (a dropped request
			// costs no decoding): the revision the refusal and the notice
			// name, so that a wait on another revision of the call is not
			// ended by them, and the call id when the subject names none.
			var named string
			named, rev = ingress.BodyCall(m.Data(), m.Headers())
			callID = cmp.Or(callID, named)
		}
		if b.verdict != withinBudget {
			s.noticeOverBudget(agent, callID, rev, b)
		}
		switch b.verdict {
		case overBudget:
			// A repeat of a revision already recorded (Submit is harmless
			// to repeat; REST clients re-POST) changes nothing of it: a
			// refusal stored under the call would be taken for that
			// revision's end by every waiter while it still waits for a
			// decision. The notice alone answers it.
			recorded, err := s.recordedRevision(ctx, agent, callID, max(rev, 1))
			if err != nil {
				return err
			}
			if recorded {
				return nil
			}
			return s.publishRefusal(ctx, in, rev, nil, &ingress.Refusal{Call: callID, Reason: overBudgetReason(agent, s.deps.Config.Limits)})
		case dropped:
			if s.deps.Metrics != nil {
				s.deps.Metrics.Handled.WithLabelValues("policy", "over_budget_dropped").Inc()
			}
			if b.firstDrop {
				s.deps.Log.Warn("agent over its budget: its requests are dropped, answered only by a notice that is not stored, for the rest of the minute", "agent", agent,
					"agent_calls_per_minute", s.deps.Config.Limits.AgentCallsPerMinute, "agent_request_bytes_per_minute", s.deps.Config.Limits.AgentRequestBytesPerMinute,
					"notices_per_minute", s.budgets.notices.Capacity)
			}
			return nil
		}
	}
	callID, err := s.decide(ctx, m, in)
	switch {
	case err == nil:
		return nil
	case isTooLarge(err):
		return s.refuse(ctx, in, 0, m.Data(), &ingress.Refusal{Call: callID,
			Reason: "the request is too large to record once airlock adds what it stores with it: send smaller arguments, or pass large inputs by reference (a path or URL)"})
	case meta.NumDelivered >= maxIntakeDeliveries:
		// Whatever keeps failing, the request must not hold the intake (and
		// its agent's share of it) forever: the agent is told.
		return s.refuse(ctx, in, 0, m.Data(), &ingress.Refusal{Call: callID,
			Reason: fmt.Sprintf("airlock could not record this request in %d attempts (%v): submit it again, and tell the operator if it keeps failing", meta.NumDelivered, err)})
	}
	return err
}

// recordedRevision reports whether revision rev of agent's call is
// recorded (its newest recorded revision is rev or later): one read of the
// call's last `requested` event, made only for the few refusals a minute
// the budget stores. A call id that is not valid names no recorded call.
func (s *Service) recordedRevision(ctx context.Context, agent, call string, rev uint32) (bool, error) {
	if ids.Validate("call id", call) != nil {
		return false, nil
	}
	newest, err := s.lastEvent(ctx, callref.Ref{Agent: agent, Call: call, Rev: rev}, subject.Requested)
	if err != nil {
		return false, fmt.Errorf("read call %s's newest revision before refusing a request over budget: %w", call, err)
	}
	return newest != nil && max(newest.ev.GetRevision(), 1) >= rev, nil
}

// noticeOverBudget tells agent, with a core NATS message on its call's
// republished events (subject.OverBudgetNotice), that its request for
// revision rev of call was not decided because it is over its budget, if
// its notice budget holds one (b.notify); otherwise the request goes
// unanswered and is counted. Nothing is stored: a core publish costs the
// stream nothing. A request whose call id cannot be read is not answered:
// no SDK waits on it.
func (s *Service) noticeOverBudget(agent, call string, rev uint32, b budgetAnswer) {
	if !b.notify || ids.Validate("call id", call) != nil {
		if s.deps.Metrics != nil {
			s.deps.Metrics.Handled.WithLabelValues("policy", "over_budget_unanswered").Inc()
		}
		return
	}
	l := s.deps.Config.Limits
	data, err := json.Marshal(ingress.NewOverBudget(agent, call, rev, l.AgentCallsPerMinute, l.AgentRequestBytesPerMinute, b.retryAfter))
	if err != nil {
		s.deps.Log.Error("encode an over-budget notice", "agent", agent, "call", call, "err", err)
		return
	}
	msg := &nats.Msg{Subject: subject.OverBudgetNotice(agent, call), Data: data, Header: nats.Header{}}
	msg.Header.Set("Content-Type", "application/json")
	if err := s.deps.NC.PublishMsg(msg); err != nil {
		// A notice lost is a request unanswered, as before notices: the
		// agent's SDK times out. Nothing else depends on it.
		s.deps.Log.Warn("could not send an over-budget notice", "agent", agent, "call", call, "err", err)
	}
}

// maxIntakeDeliveries bounds the attempts at one request; with consume's
// back-off they span about two minutes.
const maxIntakeDeliveries = 20

// IntakeAckHold is how long the policy holds the last handled request's
// ack back waiting for the next one's (consume.Spec.HoldLastAck): longer
// than the gap between an agent's calls made one after another, short
// enough that a decided request holds its place in the agent's intake
// share only briefly. A request keeps its place until its ack, which
// follows its decision (an agent that submits as each decision arrives
// holds at least two places, more while the policy is busy); the hold adds
// one. An intake whose share is under 8 holds nothing back, so that the
// hold is never a large part of a small share.
func IntakeAckHold(intake config.Intake) time.Duration {
	if intake.MaxPendingPerAgent < 8 {
		return 0
	}
	return 10 * time.Millisecond
}

// isTooLarge reports a publish the stream refused because the message is
// over its max_msg_size: no retry can succeed.
func isTooLarge(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum
}

// decide records one request and its decision, or one report (report.go);
// it returns the call id the request named (once known) for a refusal.
func (s *Service) decide(ctx context.Context, m jetstream.Msg, in intake) (string, error) {
	call, rep, refusal := ingress.Intake(m.Subject(), m.Data(), m.Headers(), ingress.Limits{MaxBytes: s.deps.Config.Limits.MaxRequestBytes, MaxDepth: s.deps.Config.Limits.MaxArgumentDepth})
	if refusal != nil {
		return refusal.Call, s.refuse(ctx, in, 0, m.Data(), refusal)
	}
	if rep != nil {
		return rep.Ref.Call, s.report(ctx, in, rep)
	}
	// A front-end sealed the subject it published on, which the intake
	// stored under the agent alone; the body names the same call. The seal
	// is checked against the time the request arrived, not how long it
	// waited in the intake.
	published, err := subject.Request(call.AgentId, call.CallId)
	if err != nil {
		return call.CallId, s.refuse(ctx, in, 0, m.Data(), &ingress.Refusal{Reason: err.Error(), Call: call.CallId})
	}
	sealedBy, _ := s.frontend.VerifyRequest(published, m.Headers(), m.Data(), in.received)
	s.vouch(call, sealedBy)
	call.JsonEvents = in.json
	req := &airlockv1.Requested{Call: call, IntakeSeq: in.seq, ReceivedAt: timestamppb.New(in.received), SealedBy: sealedBy}
	ref := callref.Of(call)
	pre, early, err := s.decideNow(ctx, call)
	if err != nil {
		return ref.Call, err
	}
	v, why, err := s.accept(ctx, in, ref, req, early)
	switch {
	case err != nil:
		return ref.Call, err
	case v == refused:
		return ref.Call, s.refuse(ctx, in, ref.Rev, m.Data(), &ingress.Refusal{Reason: why, Call: ref.Call})
	case v == rewrites:
		return ref.Call, s.refuseRewrite(ctx, in, ref, why)
	case v == withdrawn:
		s.deps.Log.Info("a request its agent withdrew before it was decided is dropped", "call", ref.String())
		if s.deps.Metrics != nil {
			s.deps.Metrics.Handled.WithLabelValues("policy", "withdrawn").Inc()
		}
		return ref.Call, nil
	case v == repeated:
		decided, err := s.decided(ctx, ref)
		if err != nil || decided {
			return ref.Call, err // a repeat of a decided revision changes nothing
		}
	}
	// The revision is recorded: finish the decision (a grant may answer an
	// ask; a candidate in shadow sees only recorded calls).
	var d *airlockv1.Decision
	if pre != nil {
		d = s.decider.(SettledDecider).Finish(ctx, call, pre)
	} else {
		d = s.decider.Decide(ctx, call)
	}
	ev := early
	if ev != nil && v != repeated {
		return ref.Call, nil // recorded with its request
	}
	if ev == nil {
		if ev, err = s.sealed(call, d); err != nil {
			return ref.Call, err
		}
	}
	if _, err := s.pub.Publish(ctx, ev, in.trace); err != nil {
		return ref.Call, fmt.Errorf("publish decision for call %s: %w", ref, err)
	}
	return ref.Call, nil
}

// decideNow evaluates the policy before the revision is recorded (batch on):
// pre is the evaluated decision for Finish, early its sealed event when it
// is final and can be recorded with the request; both nil without batch.
func (s *Service) decideNow(ctx context.Context, call *airlockv1.ToolCall) (pre *airlockv1.Decision, early *airlockv1.Event, err error) {
	sd, ok := s.decider.(SettledDecider)
	if !s.batch || !ok {
		return nil, nil, nil
	}
	pre, final := sd.DecideNow(ctx, call)
	if !final {
		return pre, nil, nil
	}
	early, err = s.sealed(call, pre)
	return pre, early, err
}

// sealed is d's decision event, sealed with the decision key.
func (s *Service) sealed(call *airlockv1.ToolCall, d *airlockv1.Decision) (*airlockv1.Event, error) {
	ev := DecisionEvent(call, d)
	if err := s.decisions.SealDecision(ev); err != nil {
		return nil, err
	}
	return ev, nil
}

// vouch sets what only airlock may say about a call: whom it acts for
// (a configured binding wins; a front-end's sealed request is believed; an
// agent's own word is kept, but only to keep that person from approving)
// and whether its tool annotations come from a trusted upstream, and which
// run_code script made it (only a front-end, the MCP gateway, vouches for
// those: an agent's own script is dropped, or it could put its calls under
// another script's digest in the audit trail, or hide them from it).
func (s *Service) vouch(call *airlockv1.ToolCall, sealedBy string) {
	sealed := sealedBy != ""
	call.OnBehalfOfVerified = sealed && call.OnBehalfOf != ""
	call.AnnotationsTrusted = sealed && call.AnnotationsTrusted
	if !sealed {
		call.Script = nil
	}
	if p, ok := s.deps.Config.Policy.OnBehalfOf[call.AgentId]; ok && p != "" {
		call.OnBehalfOf, call.OnBehalfOfVerified = p, true
	}
}

func (s *Service) refuse(ctx context.Context, in intake, rev uint32, data []byte, r *ingress.Refusal) error {
	if err := s.publishRefusal(ctx, in, rev, data, r); err != nil {
		return err
	}
	s.deps.Log.Info("request refused as invalid", "subject", in.subject, "reason", r.Reason)
	return nil
}

// refuseRewrite records a request naming a revision already recorded, with
// other content, as an unauthorized_attempt on the call (why, no
// arguments), never as an `invalid` naming that revision: every waiter
// would take that for the revision's end while it goes on, and the audit
// would keep the other content beside the recorded one. Its event id names
// the revision, so the stream keeps one such record per revision in its
// duplicate window however often the agent tries (each try is charged to
// its budget all the same).
func (s *Service) refuseRewrite(ctx context.Context, in intake, ref callref.Ref, why string) error {
	ev := agentAttempt(ref.EventID("rewrite_refused"), ref, in, "resubmit", why)
	if _, err := s.pub.Publish(ctx, ev, in.trace); err != nil {
		return fmt.Errorf("record the refused resubmission of %s: %w", ref, err)
	}
	s.deps.Log.Info("request refused: it resubmits a recorded revision with other content", "call", ref.String(), "why", why)
	return nil
}

// publishRefusal records r as the request's `invalid` event, unlogged (an
// agent over its budget is logged once a minute, not once a request).
func (s *Service) publishRefusal(ctx context.Context, in intake, rev uint32, data []byte, r *ingress.Refusal) error {
	ev := ingress.InvalidEvent(in.subject, in.seq, rev, data, r)
	ev.Json = in.json
	if _, err := s.pub.Publish(ctx, ev, in.trace); err != nil {
		return fmt.Errorf("record invalid request %s: %w", in.subject, err)
	}
	return nil
}

type verdict int

const (
	accepted  verdict = iota + 1 // the request starts its revision: recorded now
	repeated                     // the same request was recorded before (a redelivery, a retried publish)
	refused                      // it may not start this revision; why says so
	rewrites                     // it names a revision already recorded, with other content: changes nothing of it
	withdrawn                    // its agent withdrew the revision before it was recorded: nothing is decided
)

// maxAcceptAttempts bounds the compare-and-append retries of accept; each
// conflict means another event of the call was stored meanwhile.
const maxAcceptAttempts = 20

// accept records req as `requested` in the events stream, the one place a
// call revision begins. A revision is recorded once: revision 1 only for a
// call id the agent never used, revision n+1 only after changes were
// requested on revision n. The write is a compare-and-append on the call's
// subjects, so two replicas, or a request and its redelivery, can never
// record a revision twice. A decision given (decideNow) is appended with
// the request as one atomic batch: both are stored, or neither.
func (s *Service) accept(ctx context.Context, in intake, ref callref.Ref, req *airlockv1.Requested, decision *airlockv1.Event) (verdict, string, error) {
	ev := envelope.ForCall(req.GetCall(), &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_AGENT, Id: ref.Agent})
	ev.EventId, ev.Body = ref.EventID(subject.Requested), &airlockv1.Event_Requested{Requested: req}
	callSubjects := subject.OfCall(ref.Agent, ref.Call)
	var expect uint64 // the fast path: a new call has no events at all
	if ref.Rev > 1 {
		expect = ^uint64(0) // no guess: read first
	}
	for range maxAcceptAttempts {
		if expect != ^uint64(0) {
			var err error
			if decision != nil {
				_, err = s.pub.AppendAfter(ctx, []*airlockv1.Event{ev, decision}, in.trace, callSubjects, expect)
			} else {
				_, err = s.pub.PublishAfter(ctx, ev, in.trace, callSubjects, expect)
			}
			if err == nil {
				return accepted, "", nil
			}
			if !errors.Is(err, bus.ErrConflict) {
				return 0, "", fmt.Errorf("record request %s: %w", ref, err)
			}
		}
		v, why, last, err := s.sequence(ctx, ref, in, req)
		if err != nil || v != accepted {
			return v, why, err
		}
		expect = last
	}
	return 0, "", fmt.Errorf("record request %s: the call kept changing; will retry", ref)
}

// sequence reads the call's newest recorded revision and says whether req
// may start revision ref.Rev (accepted, with the sequence of the call's last
// event to append after), repeats what is recorded, or is refused. The
// call's last sequence is read first: anything stored after that read makes
// the append fail, and the next attempt reads again.
func (s *Service) sequence(ctx context.Context, ref callref.Ref, in intake, req *airlockv1.Requested) (verdict, string, uint64, error) {
	last, err := s.lastSeq(ctx, subject.OfCall(ref.Agent, ref.Call))
	if err != nil {
		return 0, "", 0, err
	}
	newest, err := s.lastEvent(ctx, ref, subject.Requested)
	if err != nil {
		return 0, "", 0, err
	}
	if newest == nil {
		if ref.Rev != 1 {
			return refused, fmt.Sprintf("call %s has no revision 1: submit revision 1 first (revisions follow a request for changes)", ref.Call), 0, nil
		}
		return s.unlessWithdrawn(ctx, ref, last)
	}
	prev := newest.ev.GetRequested()
	prevRev := max(newest.ev.GetRevision(), 1)
	switch {
	case prevRev == ref.Rev:
		if prev.GetIntakeSeq() == in.seq || sameRequest(prev.GetCall(), req.GetCall()) {
			return repeated, "", 0, nil
		}
		return rewrites, fmt.Sprintf("call id %s revision %d was already submitted with other content: use a new call id for a new call, or submit revision %d of this one after a reviewer requests changes", ref.Call, ref.Rev, ref.Rev+1), 0, nil
	case ref.Rev == prevRev+1:
		cr, err := s.lastEvent(ctx, ref, subject.ChangesRequested)
		if err != nil {
			return 0, "", 0, err
		}
		if cr == nil || max(cr.ev.GetRevision(), 1) != prevRev {
			return refused, fmt.Sprintf("revision %d of call %s can follow only a request for changes to revision %d, and none was made: use a new call id for a new call", ref.Rev, ref.Call, prevRev), 0, nil
		}
		return s.unlessWithdrawn(ctx, ref, last)
	case ref.Rev < prevRev:
		return rewrites, fmt.Sprintf("revision %d of call %s is older than its newest revision %d: submit revision %d after a reviewer requests changes", ref.Rev, ref.Call, prevRev, prevRev+1), 0, nil
	}
	return refused, fmt.Sprintf("revision %d of call %s skips revisions: the newest is %d", ref.Rev, ref.Call, prevRev), 0, nil
}

// unlessWithdrawn accepts ref's revision, not recorded yet, after the
// call's last event (at last), unless its agent withdrew it while its
// request waited in the intake: the approval service then stored a
// `canceled` event of that revision (withdrawUndecided), which tells the
// agent, and nothing is to be decided. A new call has no events, so the
// read is made only when it has some; it is the leader's, as the last
// sequence is: a replica behind could miss an event stored before it.
func (s *Service) unlessWithdrawn(ctx context.Context, ref callref.Ref, last uint64) (verdict, string, uint64, error) {
	if last == 0 {
		return accepted, "", 0, nil
	}
	subj, err := subject.Event(ref.Agent, ref.Call, subject.Canceled)
	if err != nil {
		return 0, "", 0, err
	}
	m, err := s.lastMsg(ctx, subj)
	if err != nil || m == nil {
		return accepted, "", last, err
	}
	c, err := envelope.Decode(m.Data, m.Header)
	if err != nil {
		return 0, "", 0, fmt.Errorf("the event stored on %s: %w", subj, err)
	}
	if max(c.GetRevision(), 1) == ref.Rev {
		return withdrawn, "", 0, nil
	}
	return accepted, "", last, nil
}

// sameRequest reports whether two requests ask for the same thing (the
// agent's timestamps aside): the same request published twice.
func sameRequest(a, b *airlockv1.ToolCall) bool {
	a, b = proto.Clone(a).(*airlockv1.ToolCall), proto.Clone(b).(*airlockv1.ToolCall)
	a.CreatedAt, b.CreatedAt = nil, nil
	return proto.Equal(a, b)
}

// decided reports whether the revision's decision is already stored.
func (s *Service) decided(ctx context.Context, ref callref.Ref) (bool, error) {
	for _, typ := range subject.PolicyOutcomes {
		last, err := s.lastEvent(ctx, ref, typ)
		if err != nil {
			return false, err
		}
		if last != nil && max(last.ev.GetRevision(), 1) == ref.Rev {
			return true, nil
		}
	}
	return false, nil
}

type stored struct {
	ev  *airlockv1.Event
	seq uint64
}

// lastEvent is the call's last stored event of type typ, or nil.
func (s *Service) lastEvent(ctx context.Context, ref callref.Ref, typ string) (*stored, error) {
	subj, err := subject.Event(ref.Agent, ref.Call, typ)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ev, seq, err := bus.LastEvent(rctx, s.deps.NC, s.deps.Config.Stream.Name, subj)
	if err != nil || ev == nil {
		return nil, err
	}
	return &stored{ev: ev, seq: seq}, nil
}

func (s *Service) lastSeq(ctx context.Context, subj string) (uint64, error) {
	m, err := s.lastMsg(ctx, subj)
	if err != nil || m == nil {
		return 0, err
	}
	return bus.StoredSeq(m), nil
}

func (s *Service) lastMsg(ctx context.Context, subj string) (*nats.Msg, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return bus.LastStoredLeader(rctx, s.deps.NC, s.deps.Config.Stream.Name, subj)
}

// DecisionEvent wraps a decision in its event. All three outcomes share the
// event id "<agent>.<call>.<rev>.decision", so however often a request is
// redelivered, and whichever replica decides, the stream keeps one decision
// per call revision.
func DecisionEvent(call *airlockv1.ToolCall, d *airlockv1.Decision) *airlockv1.Event {
	ev := envelope.ForCall(call, &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "policy"})
	ev.EventId = callref.Of(call).EventID("decision")
	switch d.GetAction() {
	case airlockv1.Action_ACTION_ALLOW:
		ev.Body = &airlockv1.Event_Allowed{Allowed: &airlockv1.Allowed{Call: call, Decision: d}}
	case airlockv1.Action_ACTION_ASK:
		ar := &airlockv1.ApprovalRequested{Call: call, Decision: d}
		// Without a timeout the deadline is left to the approval service,
		// which applies approval.default_timeout.
		if d.GetDecidedAt() != nil && d.GetTimeout().AsDuration() > 0 {
			ar.Deadline = timestamppb.New(d.GetDecidedAt().AsTime().Add(d.GetTimeout().AsDuration()))
		}
		ev.Body = &airlockv1.Event_ApprovalRequested{ApprovalRequested: ar}
	default:
		ev.Body = &airlockv1.Event_Denied{Denied: &airlockv1.Denied{Call: call, Decision: d}}
	}
	return ev
}
