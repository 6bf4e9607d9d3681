// Package policy is the policy service: it takes every `requested` event,
// refuses malformed ones as `invalid`, decides the rest with Rego, and
// publishes exactly one of `allowed`, `denied` or `approval_requested` per
// call revision.
package policy

import (
	"context"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/consume"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/ingress"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// Decider decides one validated call. Implementations fail closed: when
// they cannot decide they return a deny decision, not an error.
type Decider interface {
	Decide(ctx context.Context, call *airlockv1.ToolCall) *airlockv1.Decision
}

// Service consumes requests and publishes decisions.
type Service struct {
	deps      svc.Deps
	decider   Decider
	pub       *envelope.Publisher
	alongside []func(context.Context) error
}

// Durable is the consumer every policy replica shares.
const Durable = "policy"

// New builds the service around decider. Each alongside function runs for
// as long as the service does (the engine's change watchers and endpoints);
// one that fails stops the service with its error.
func New(deps svc.Deps, decider Decider, alongside ...func(context.Context) error) *Service {
	return &Service{deps: deps, decider: decider, pub: deps.Publisher("policy"), alongside: alongside}
}

// Name implements svc.Service.
func (s *Service) Name() string { return "policy" }

// Run implements svc.Service.
func (s *Service) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	failed := make(chan error, len(s.alongside))
	var wg sync.WaitGroup
	for _, f := range s.alongside {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && ctx.Err() == nil {
				failed <- err
				cancel()
			}
		}()
	}
	err := consume.Run(ctx, s.deps.JS, consume.Spec{
		Service: "policy", Stream: s.deps.Config.Stream.Name, Durable: Durable,
		FilterSubjects: []string{subject.OfType(subject.Requested)},
		Workers:        s.deps.Config.Policy.Workers,
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

func (s *Service) handle(ctx context.Context, m jetstream.Msg) error {
	trace := m.Headers().Get(envelope.HeaderTraceparent)
	call, refusal := ingress.Request(m.Subject(), m.Data(), m.Headers(), s.deps.Config.Limits.MaxRequestBytes)
	if refusal != nil {
		// The stream sequence names the invalid event (its request has no usable id).
		meta, err := m.Metadata()
		if err != nil {
			return consume.Permanent(fmt.Errorf("message without JetStream metadata: %w", err))
		}
		ev, _ := ingress.InvalidEvent(m.Subject(), meta.Sequence.Stream, m.Data(), refusal)
		if _, err := s.pub.Publish(ctx, ev, trace); err != nil {
			return fmt.Errorf("record invalid request %s: %w", m.Subject(), err)
		}
		s.deps.Log.Info("request refused as invalid", "subject", m.Subject(), "reason", refusal.Reason)
		return nil
	}
	d := s.decider.Decide(ctx, call)
	ev := DecisionEvent(call, d)
	if _, err := s.pub.Publish(ctx, ev, trace); err != nil {
		return fmt.Errorf("publish decision for call %s: %w", call.CallId, err)
	}
	return nil
}

// DecisionEvent wraps a decision in its event. All three outcomes share the
// event id "<call>.<revision>.decision", so however often a request is
// redelivered, and whichever replica decides, the stream keeps one decision
// per call revision.
func DecisionEvent(call *airlockv1.ToolCall, d *airlockv1.Decision) *airlockv1.Event {
	ev := &airlockv1.Event{
		EventId:  envelope.EventID(call.CallId, call.Revision, "decision"),
		AgentId:  call.AgentId,
		CallId:   call.CallId,
		Revision: call.Revision,
		ThreadId: call.ThreadId,
		Actor:    &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "policy"},
	}
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
