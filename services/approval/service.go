// Package approval is the approval service: it keeps one record per call
// revision in a JetStream KV bucket and moves it through the state machine
// pending → approved / rejected / changes_requested / canceled / expired, then
// approved → executing → completed / failed.
//
// It consumes approval_requested (creates the pending record and announces it
// on every notification channel) and the executor's started / completed /
// failed; it answers the front-ends' decisions on the micro endpoints
// airlock.api.approval.* and agents' cancels on airlock.agent.<agent>.cancel;
// and a sweeper expires, reminds and escalates from the deadlines stored in
// the records. Who may decide is enforced here and nowhere else.
//
// Every transition is one compare-and-set write of the record, and every
// decision event has a deterministic id, so any number of replicas can run,
// crash and restart: each decision, expiry and reminder happens once.
package approval

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/approval/internal/domain"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/clientwait"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/consume"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/executorapi"
	"github.com/airlock-gate/airlock/services/shared/lastevents"
	"github.com/airlock-gate/airlock/services/shared/notify"
	"github.com/airlock-gate/airlock/services/shared/policyapi"
	"github.com/airlock-gate/airlock/services/shared/quota"
	"github.com/airlock-gate/airlock/services/shared/seal"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/svc"
)

// Durable is the events consumer every approval replica shares.
const Durable = "approval"

// Service is the approval service. Build it with New or NewFromConfig and run
// it with Run.
type Service struct {
	deps     svc.Deps
	cfg      config.Approval
	dir      domain.Directory
	settings domain.Settings
	pub      *bus.Publisher
	store    records
	grants   jetstream.KeyValue
	clients  *clientwait.Store // nil: cards are not redrawn when an MCP client comes or goes
	// inDoubt holds the "did it happen?" tasks of calls that ended in doubt
	// (airlock.v1.InDoubtTask, not approval records: its kv, update with
	// the retention's TTL and fill are used, not what reads records).
	inDoubt records
	// inDoubtMu makes one task at a time, so that the count of an agent's
	// open tasks is not read by two handlings at once (replicas may still
	// each admit one past it).
	inDoubtMu sync.Mutex
	// inDoubtFull is when each agent was last found at its share of open
	// tasks (inDoubtShareMemo), under inDoubtMu.
	inDoubtFull map[string]time.Time
	// untracked is airlock_in_doubt_untracked_total.
	untracked *prometheus.CounterVec
	index     *index
	fan       *fanout
	// instance is this replica's id, its micro service's: what a record
	// it announces names as its announcer (takeOver).
	instance string
	// announcing are the keys this process announces as their announcer.
	announcing ownAnnouncements
	now        func() time.Time
	pending    prometheus.Gauge
	// bucketFill is airlock_approvals_bucket_fill; refusing is whether the
	// last look found the approvals bucket past its refusal mark (its
	// crossings are logged once each way).
	bucketFill prometheus.Gauge
	refusing   atomic.Bool
	// fillMisses counts the sweeps in a row that could not read how full
	// the approvals bucket is.
	fillMisses atomic.Int32
	// decisions seals `approved` events; frontend checks that decisions
	// come from a front-end that authenticated the person.
	decisions, frontend seal.Key

	bg sync.WaitGroup // notifier deliveries and agents' cancels running after their cause was answered
	// cancelsOf and cancelSlots bound the agents' cancels handled at once:
	// each agent's (maxCancelsPerAgent) and all (cancelWorkers), so one
	// agent's burst never holds another's cancel behind it.
	cancelsOf   *quota.PerAgent
	cancelSlots chan struct{}
	// reads answers agents' reads of their calls' last stored events
	// (airlock.agent.<agent>.events), with literal Direct Gets only.
	reads *lastevents.Server
	// withdrawals bounds each agent's withdrawals of calls the policy has
	// not decided (withdrawUndecided): each writes an event.
	withdrawals *quota.Keyed
	// life ends when Run is told to stop: announcements, which outlive the
	// request or message that began them, run with it.
	life context.Context
	// ready: the endpoints answer and the consumer is subscribed.
	ready svc.Readiness

	// evalPolicy decides a call with the policy in force (airlock.api.policy.eval):
	// an edit is re-decided before it is approved.
	evalPolicy func(context.Context, *airlockv1.ToolCall) (*airlockv1.Decision, error)
	// askPreview asks an executor what a call would do (airlock.api.executor.preview).
	askPreview func(context.Context, *airlockv1.ToolCall) (*airlockv1.Preview, error)

	// Touched by the sweeper's goroutine only.
	grantSwept     time.Time
	inDoubtSwept   time.Time
	expiryRecorded map[string]bool // grants whose expiry is known to be in the stream
	// silentSince is when a replica named an announcer was first found off
	// the bus, by its id (takeOver); forgotten once it answers.
	silentSince map[string]time.Time
}

// NewFromConfig builds the service from deps.Config with the given
// notification channels. It fails when the approvals or grants bucket is
// missing (`airlock dev` and `airlock serve` provision them).
func NewFromConfig(ctx context.Context, deps svc.Deps, notifiers ...notify.Notifier) (*Service, error) {
	return New(ctx, deps, notifiers)
}

// New builds the service. Group membership for approvers like
// "group:oncall" comes from approval.groups plus console.users[].groups.
func New(ctx context.Context, deps svc.Deps, notifiers []notify.Notifier) (*Service, error) {
	cfg := deps.Config
	store, err := openRecords(ctx, deps.JS, cfg.Buckets.Approvals, cfg.Approval.EndedRetention)
	if err != nil {
		return nil, fmt.Errorf("approval: open bucket %s: %w (run `airlock provision` with administrator credentials, or `airlock dev`)", cfg.Buckets.Approvals, err)
	}
	gkv, err := deps.JS.KeyValue(ctx, cfg.Buckets.Grants)
	if err != nil {
		return nil, fmt.Errorf("approval: open bucket %s: %w (run `airlock provision` with administrator credentials, or `airlock dev`)", cfg.Buckets.Grants, err)
	}
	// An answered task leaves after the retention, as an ended call's
	// record does; an open one stays until a person answers it.
	dkv, err := openRecords(ctx, deps.JS, cfg.Buckets.InDoubt, cfg.Approval.EndedRetention)
	if err != nil {
		return nil, fmt.Errorf("approval: open bucket %s: %w (run `airlock provision` with administrator credentials, or `airlock dev`)", cfg.Buckets.InDoubt, err)
	}
	dk, err := deps.DecisionKey()
	if err != nil {
		return nil, fmt.Errorf("approval: %w", err)
	}
	fk, err := deps.FrontendKey()
	if err != nil {
		return nil, fmt.Errorf("approval: %w", err)
	}
	seen := map[string]bool{}
	for _, n := range notifiers {
		if n == nil {
			return nil, errors.New("approval: a nil notifier was passed")
		}
		if seen[n.Name()] {
			return nil, fmt.Errorf("approval: two notifiers are named %q: each channel needs its own name", n.Name())
		}
		seen[n.Name()] = true
	}
	a := cfg.Approval // every default is in config.Default, checked by Validate
	s := &Service{
		deps:       deps,
		cfg:        a,
		dir:        calls.DirectoryOf(cfg),
		settings:   domain.Settings{DefaultTimeout: a.DefaultTimeout, DefaultApprovers: a.DefaultApprovers},
		pub:        deps.Publisher("approval"),
		store:      store,
		grants:     gkv,
		inDoubt:    dkv,
		index:      newIndex(deps.Log.With("service", "approval"), func() uint64 { return deps.NC.Stats().Reconnects }),
		now:        time.Now,
		life:       context.Background(),
		pending:    pendingGauge(deps.Metrics.Registry),
		bucketFill: bucketFillGauge(deps.Metrics.Registry),
		untracked:  untrackedCounter(deps.Metrics.Registry),
		decisions:  dk,
		frontend:   fk,

		cancelsOf:   quota.New(maxCancelsPerAgent),
		cancelSlots: make(chan struct{}, cancelWorkers),
		reads:       lastevents.NewServer(deps.NC, deps.Config.Stream.Name, deps.Log.With("service", "approval")),
		withdrawals: quota.NewKeyed(quota.Rate{Capacity: float64(deps.Config.Limits.AgentCallsPerMinute), Refill: time.Minute}),

		inDoubtFull:    map[string]time.Time{},
		expiryRecorded: map[string]bool{},
		silentSince:    map[string]time.Time{},
	}
	policy := policyapi.New(deps.NC, seal.Key{}, "approval")
	s.evalPolicy = func(ctx context.Context, call *airlockv1.ToolCall) (*airlockv1.Decision, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return policy.Eval(ctx, call)
	}
	executor := executorapi.New(deps.NC)
	s.askPreview = perAgent(func(ctx context.Context, call *airlockv1.ToolCall) (*airlockv1.Preview, error) {
		return executor.Preview(ctx, call, a.PreviewTimeout)
	})
	s.fan = newFanout(notifiers, a.NotifyTimeout, a.Workers, newCoalescer(a.NotifyBurst, a.NotifyRefill, time.Now), deps.Log.With("service", "approval"), s.recordNotified)
	if s.clients, err = clientwait.Open(ctx, deps.JS, cfg.Buckets.ClientWaits); err != nil {
		deps.Log.Warn("approval: cards will not be redrawn when an MCP client starts or stops waiting", "err", err)
	}
	return s, nil
}

// Name implements svc.Service.
func (s *Service) Name() string { return "approval" }

// Ready implements svc.Service.
func (s *Service) Ready() <-chan struct{} { return s.ready.Ready() }

// Run loads the records, serves the endpoints, runs the sweeper and consumes
// events until ctx ends; then it stops serving, lets in-flight work finish
// and returns. It is ready once the endpoints are served and the consumer
// subscribed.
func (s *Service) Run(ctx context.Context) error {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.life = runCtx
	s.fan.start()
	// After every delivery queued was made (s.bg.Wait below): the
	// announcements, under runCtx, end at once.
	defer s.fan.stop()

	ready := make(chan struct{})
	watchErr := make(chan error, 1)
	go func() { watchErr <- s.index.watch(runCtx, s.store.kv, ready) }()
	select {
	case <-ready:
	case err := <-watchErr:
		if ctx.Err() != nil {
			return nil
		}
		return err
	case <-ctx.Done():
		return nil
	}

	api, err := s.serveAPI(runCtx)
	if err != nil {
		return err
	}
	s.instance = api.svc.Info().ID
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); s.sweep(runCtx) }()
	go func() { defer wg.Done(); s.followClients(runCtx) }()

	workers := s.cfg.Workers
	err = consume.Run(runCtx, s.deps.JS, consume.Spec{
		Service: "approval", Stream: s.deps.Config.Stream.Name, Durable: Durable,
		FilterSubjects: []string{
			subject.OfType(subject.ApprovalRequested), subject.OfType(subject.Allowed), subject.OfType(subject.Denied),
			subject.OfType(subject.Started),
			subject.OfType(subject.Completed), subject.OfType(subject.Failed),
		},
		Workers:    workers,
		Subscribed: func() { s.ready.MarkServing(s.deps.NC, s.deps.Log) },
	}, s.deps.Log, s.deps.Metrics, s.handle)
	// Stop everything else whether the consumer ended by shutdown or failed.
	cancel()
	api.stop()
	wg.Wait()
	s.bg.Wait()
	s.reads.Wait()
	if ctx.Err() != nil {
		// Shut down while still starting (e.g. creating the consumer): not a failure.
		return nil
	}
	return err
}

// publish stores ev in the events stream.
func (s *Service) publish(ctx context.Context, ev *airlockv1.Event) error {
	if _, err := s.pub.Publish(ctx, ev, ""); err != nil {
		return err
	}
	return nil
}

// publishDecision publishes the decision event of rec (if its state has
// one) and notes it as published, then updates every channel in the
// background. A failed publish is repaired by the sweeper's settle pass.
func (s *Service) publishDecision(ctx context.Context, rec *airlockv1.ApprovalRecord) error {
	ev, err := domain.FinalEvent(rec)
	if err != nil || ev == nil {
		return err
	}
	if err := s.decisions.SealDecision(ev); err != nil {
		return err
	}
	if err := s.publish(ctx, ev); err != nil {
		return fmt.Errorf("publish %s event of call %s: %w", envelope.TypeOf(ev), ev.CallId, err)
	}
	s.index.markPublished(callref.OfEvent(ev).Key())
	s.updateChannels(rec)
	return nil
}

// updateChannels shows rec's state on every channel that announced it,
// without holding up the caller.
func (s *Service) updateChannels(rec *airlockv1.ApprovalRecord) {
	if len(rec.GetNotifications()) == 0 {
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		s.fan.update(context.Background(), rec)
	}()
}

func (s *Service) recordNotified(ctx context.Context, ev *airlockv1.Event) {
	if err := s.publish(ctx, ev); err != nil {
		s.deps.Log.Warn("recording a notification failed", "call", ev.CallId, "err", err)
	}
}

// refused records an unauthorized attempt; the caller answers not_authorized.
func (s *Service) refused(ctx context.Context, call *airlockv1.ToolCall, actor *airlockv1.Actor, r *domain.Refusal) {
	s.deps.Log.Info("decision refused", "call", callref.Of(call).String(), "actor", actor.GetId(), "action", r.Action, "why", r.Why)
	if err := s.publish(ctx, domain.UnauthorizedEvent(call, actor, r)); err != nil {
		s.deps.Log.Error("recording an unauthorized attempt failed", "call", callref.Of(call).String(), "actor", actor.GetId(), "err", err)
	}
}

// refusedDecision records a decision that changed nothing (decision_refused).
func (s *Service) refusedDecision(ctx context.Context, call *airlockv1.ToolCall, actor *airlockv1.Actor, action, code, why string) {
	s.deps.Log.Info("decision changed nothing", "call", call.GetCallId(), "actor", actor.GetId(), "action", action, "code", code)
	if err := s.publish(ctx, domain.RefusedEvent(call, actor, action, code, why)); err != nil {
		s.deps.Log.Error("recording a refused decision failed", "call", call.GetCallId(), "actor", actor.GetId(), "err", err)
	}
}

// systemEvent publishes an event that belongs to no call (grants); a
// failure is logged, the change it records stands.
func (s *Service) systemEvent(ctx context.Context, ev *airlockv1.Event) {
	if err := s.publish(ctx, ev); err != nil {
		s.deps.Log.Error("recording an event failed", "type", envelope.TypeOf(ev), "id", ev.GetCallId(), "err", err)
	}
}

// transition runs step on the record at key with CAS and publishes the
// decision event when the write ended in a decided state. It returns the
// record as it stands, whether it was written, and step's outcome.
func (s *Service) transition(ctx context.Context, key string, step func(*airlockv1.ApprovalRecord) (domain.Outcome, error)) (*airlockv1.ApprovalRecord, bool, domain.Outcome, error) {
	rec, wrote, out, err := mutate(ctx, s.store, key, func(cur *airlockv1.ApprovalRecord) (*airlockv1.ApprovalRecord, domain.Outcome, error) {
		out, err := step(cur)
		return out.Record, out, err
	})
	if err != nil {
		return rec, false, out, err
	}
	if wrote && out.Vote {
		// Every counted approval is on record with the quorum's progress,
		// before the decision it may complete.
		if ev := domain.VoteEvent(rec); ev != nil {
			if err := s.publish(ctx, ev); err != nil {
				s.deps.Log.Error("recording a vote failed; the approval record keeps it", "key", key, "err", err)
			}
		}
	}
	if wrote && out.Event != "" {
		// The record is the truth and is written; a failed publish is
		// repaired by the sweeper's settle pass, so the caller still succeeds.
		if err := s.publishDecision(ctx, rec); err != nil {
			s.deps.Log.Error("decision stored but its event is not published yet; the sweeper will retry", "key", key, "err", err)
		}
		// Its thread's next queued call gets its turn (the sweeper retries).
		if err := s.release(ctx, rec); err != nil {
			s.deps.Log.Warn("releasing the thread's next queued call failed; the sweeper will retry", "key", key, "err", err)
		}
	}
	return rec, wrote, out, nil
}

// apiServer is the running micro service, kept for shutdown.
type apiServer struct {
	svc micro.Service
}

// stop drains the endpoint subscriptions: requests already received are answered.
func (a apiServer) stop() { _ = a.svc.Stop() }

// lastEventOf is the last stored event of type typ of ref's call and its
// stream sequence, when it is of ref's revision (of any with ref.Rev 0);
// nil when there is none. A read waits at most 2 s: on a stream without a
// leader the caller goes on without it, or its message is handled again.
func (s *Service) lastEventOf(ctx context.Context, ref callref.Ref, typ string) (*airlockv1.Event, uint64, error) {
	subj, err := subject.Event(ref.Agent, ref.Call, typ)
	if err != nil {
		return nil, 0, err
	}
	gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	m, err := bus.LastStored(gctx, s.deps.NC, s.deps.Config.Stream.Name, subj)
	if err != nil || m == nil {
		return nil, 0, err
	}
	ev, err := envelope.Decode(m.Data, m.Header)
	if err != nil {
		return nil, 0, fmt.Errorf("the event stored on %s: %w", subj, err)
	}
	if ref.Rev != 0 && ev.GetRevision() != ref.Rev {
		return nil, 0, nil
	}
	return ev, bus.StoredSeq(m), nil
}
