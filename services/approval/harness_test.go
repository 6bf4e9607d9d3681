package approval_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/approval"
	"github.com/airlock-gate/airlock/services/shared/apierr"
	"github.com/airlock-gate/airlock/services/shared/approvalapi"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/notify"
	"github.com/airlock-gate/airlock/services/shared/policyapi"
	"github.com/airlock-gate/airlock/services/shared/rpc"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/svc"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// world is one embedded NATS server with the approval service running, a
// client for its endpoints, and a publisher standing in for the policy
// service (these tests do not need policy: they publish approval_requested).
type world struct {
	t      testing.TB
	nats   *testenv.NATS
	cfg    config.Config
	deps   svc.Deps
	js     jetstream.JetStream
	api    *approvalapi.Client
	policy *bus.Publisher
	stops  []func()
	// replica are the dependencies of the replica started last, service
	// the replica itself.
	replica svc.Deps
	service *approval.Service
	// evalPolicy answers airlock.api.policy.eval, as the policy service
	// would: the approval service re-decides edited arguments with it.
	evalMu     sync.Mutex
	evalPolicy func(*airlockv1.ToolCall) *airlockv1.Decision
	stopEval   func()
}

func newWorld(t testing.TB, tweak ...func(*config.Config)) *world {
	t.Helper()
	return newWorldOn(t, testenv.StartNATS(t), tweak...)
}

// newWorldOn is newWorld on a server the test started.
func newWorldOn(t testing.TB, n *testenv.NATS, tweak ...func(*config.Config)) *world {
	t.Helper()
	cfg := testenv.Config(n.URL())
	cfg.Approval.Groups = map[string][]string{"reviewers": {"alice", "bob", "carol"}, "oncall": {"dave"}}
	cfg.Console.Users = []config.User{{Name: "erin", Groups: []string{"reviewers"}}}
	for _, f := range tweak {
		f(&cfg)
	}
	deps := testenv.Deps(t, cfg)
	nc, js := testenv.Connect(t, n.URL())
	fk, err := deps.FrontendKey()
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, nats: n, cfg: cfg, deps: deps, js: js, api: approvalapi.New(nc, fk, "console"), policy: deps.Publisher("policy")}
	w.servePolicyEval(nc)
	return w
}

// servePolicyEval stands in for the policy service's eval endpoint: by
// default it asks reviewers about every call, like the default policy's
// "write" rule; a test sets w.evalPolicy to answer otherwise.
func (w *world) servePolicyEval(nc *nats.Conn) {
	w.t.Helper()
	srv, err := micro.AddService(nc, micro.Config{Name: policyapi.Service, Version: "0.0.1"})
	if err != nil {
		w.t.Fatal(err)
	}
	w.stopEval = func() { _ = srv.Stop() }
	w.t.Cleanup(w.stopEval)
	h := rpc.Handle(slog.Default(), func() *airlockv1.PolicyEvalRequest { return &airlockv1.PolicyEvalRequest{} },
		func(_ context.Context, req *airlockv1.PolicyEvalRequest) (*airlockv1.PolicyEvalResponse, error) {
			w.evalMu.Lock()
			fn := w.evalPolicy
			w.evalMu.Unlock()
			d := &airlockv1.Decision{Action: airlockv1.Action_ACTION_ASK, RuleId: "write", Risk: airlockv1.Risk_RISK_MEDIUM,
				Approvers: []string{"group:reviewers"}, Quorum: 1, Reason: "writes need a person"}
			if fn != nil {
				d = fn(req.GetCall())
			}
			return &airlockv1.PolicyEvalResponse{Decision: d}, nil
		})
	if err := srv.AddEndpoint("eval", h, micro.WithEndpointSubject(policyapi.Eval)); err != nil {
		w.t.Fatal(err)
	}
	testenv.Subscribed(w.t, nc)
}

// answerEval makes the stand-in policy answer eval requests with fn.
func (w *world) answerEval(fn func(*airlockv1.ToolCall) *airlockv1.Decision) {
	w.evalMu.Lock()
	w.evalPolicy = fn
	w.evalMu.Unlock()
}

// start runs one replica of the service with its own connection.
func (w *world) start(notifiers ...notify.Notifier) {
	w.t.Helper()
	deps := testenv.Deps(w.t, w.cfg)
	w.replica = deps
	s, err := approval.NewFromConfig(context.Background(), deps, notifiers...)
	if err != nil {
		w.t.Fatal(err)
	}
	w.service = s
	w.stops = append(w.stops, testenv.RunService(w.t, s))
}

// stopAll stops every replica.
func (w *world) stopAll() {
	for _, stop := range w.stops {
		stop()
	}
	w.stops = nil
}

// waitServing waits for the endpoints of the replica started last to
// answer again (after a NATS restart).
func (w *world) waitServing() {
	w.t.Helper()
	testenv.ApprovalServing(w.t, w.replica.NC)
}

// gauge reads a gauge from the metrics of the replica started last.
func (w *world) gauge(name string) float64 {
	w.t.Helper()
	return gaugeOf(w.t, w.replica, name)
}

// counter sums a counter's series in the metrics of the replica started last.
func (w *world) counter(name string) float64 {
	w.t.Helper()
	fams, err := w.replica.Metrics.Registry.Gather()
	if err != nil {
		w.t.Fatal(err)
	}
	var sum float64
	for _, f := range fams {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// gaugeOf reads a gauge from the metrics of the replica built from deps.
func gaugeOf(t testing.TB, deps svc.Deps, name string) float64 {
	t.Helper()
	fams, err := deps.Metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name && len(f.GetMetric()) > 0 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// ask publishes approval_requested for call as the policy service would.
func (w *world) ask(call *airlockv1.ToolCall, d *airlockv1.Decision) {
	w.t.Helper()
	if call.Revision == 0 {
		call.Revision = 1
	}
	if call.AgentId == "" {
		call.AgentId = "bot"
	}
	if call.Server == "" {
		call.Server, call.Tool = "fs", "write_file"
	}
	if call.Arguments == nil {
		call.Arguments, _ = structpb.NewStruct(map[string]any{"path": "/tmp/x", "text": "hello"})
	}
	if d == nil {
		d = &airlockv1.Decision{}
	}
	d.Action = airlockv1.Action_ACTION_ASK
	if d.PolicyRevision == "" {
		d.PolicyRevision = "rev-test"
	}
	ev := &airlockv1.Event{
		EventId: callref.Of(call).EventID("decision"), AgentId: call.AgentId, CallId: call.CallId,
		Revision: call.Revision, ThreadId: call.ThreadId,
		Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "policy"},
		Body:  &airlockv1.Event_ApprovalRequested{ApprovalRequested: &airlockv1.ApprovalRequested{Call: call, Decision: d}},
	}
	if _, err := w.policy.Publish(context.Background(), ev, ""); err != nil {
		w.t.Fatal(err)
	}
}

// pending asks for call and waits until its revision is pending.
func (w *world) pending(call *airlockv1.ToolCall, d *airlockv1.Decision) *airlockv1.ApprovalRecord {
	w.t.Helper()
	w.ask(call, d)
	return w.waitAgentState(call.AgentId, call.CallId, call.Revision, airlockv1.ApprovalState_APPROVAL_STATE_PENDING)
}

// recorded asks for call and waits until its record is stored, in any
// state: for a call with a short deadline, which a loaded machine's first
// read of the record can find already expired (pending would wait for a
// state the call no longer has).
func (w *world) recorded(call *airlockv1.ToolCall, d *airlockv1.Decision) *airlockv1.ApprovalRecord {
	w.t.Helper()
	w.ask(call, d)
	var rec *airlockv1.ApprovalRecord
	testenv.Eventually(w.t, 10*time.Second, "call "+call.AgentId+"/"+call.CallId+" to be recorded", func() bool {
		r, err := w.api.Get(context.Background(), call.AgentId, call.CallId, 0)
		if err != nil || r.GetCall().GetRevision() != call.Revision {
			return false
		}
		rec = r
		return true
	})
	return rec
}

func (w *world) waitState(callID string, rev uint32, st airlockv1.ApprovalState) *airlockv1.ApprovalRecord {
	w.t.Helper()
	return w.waitAgentState("bot", callID, rev, st)
}

func (w *world) waitAgentState(agent, callID string, rev uint32, st airlockv1.ApprovalState) *airlockv1.ApprovalRecord {
	w.t.Helper()
	var rec *airlockv1.ApprovalRecord
	testenv.Eventually(w.t, 10*time.Second, "call "+agent+"/"+callID+" to be "+st.String(), func() bool {
		r, err := w.api.Get(context.Background(), agent, callID, 0)
		if err != nil {
			return false
		}
		rec = r
		return r.GetState() == st && r.GetCall().GetRevision() == rev
	})
	return rec
}

func (w *world) decide(callID, who string, kind airlockv1.DecisionKind, reason string) (*airlockv1.DecideResponse, error) {
	return w.api.Decide(context.Background(), &airlockv1.DecideRequest{
		AgentId: "bot", CallId: callID, Kind: kind, Reason: reason,
		Principal: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: who, Channel: "console"},
	})
}

// rejected rejects the pending call as alice and fails the test unless
// the decision's own answer says it was rejected: a later read can come
// after a short ended_retention removed the record, and find none.
func (w *world) rejected(callID string) {
	w.t.Helper()
	resp, err := w.decide(callID, "alice", airlockv1.DecisionKind_DECISION_KIND_REJECT, "no")
	if err != nil {
		w.t.Fatal(err)
	}
	if !resp.GetChanged() || resp.GetRecord().GetState() != airlockv1.ApprovalState_APPROVAL_STATE_REJECTED {
		w.t.Fatalf("rejecting %s answered %v %v %q, want it rejected", callID, resp.GetChanged(), resp.GetRecord().GetState(), resp.GetMessage())
	}
}

func (w *world) approve(callID, who string) (*airlockv1.DecideResponse, error) {
	return w.decide(callID, who, airlockv1.DecisionKind_DECISION_KIND_APPROVE, "")
}

// events returns the stored events of one type for a call.
func (w *world) events(agent, callID, typ string) []*airlockv1.Event {
	w.t.Helper()
	subj, err := subject.Event(agent, callID, typ)
	if err != nil {
		w.t.Fatal(err)
	}
	return testenv.Events(w.t, w.js, subj)
}

func mustCode(t testing.TB, err error, code apierr.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("expected a %s error, got success", code)
	}
	if got := apierr.CodeOf(err); got != code {
		t.Fatalf("expected a %s error, got %s: %v", code, got, err)
	}
}

func seconds(s float64) *durationpb.Duration {
	return durationpb.New(time.Duration(s * float64(time.Second)))
}

// recorder is a real notification channel that keeps what it was told, for
// tests to wait on.
type recorder struct {
	name string
	// block makes Announce wait for its context to end and fail (a channel
	// that hangs); it then records "gave-up:<call>".
	block bool
	// wants, if set, is the channel's routing (default: every call).
	wants func(*airlockv1.ApprovalRecord) bool
	mu    sync.Mutex
	seen  []string // "announce:<call>", "remind:<call>", "update:<call>:<state>"
	// first is when each entry of seen was first added: what happened
	// before what across channels, whatever the machine's speed.
	first map[string]time.Time
}

func (r *recorder) Name() string { return r.name }
func (r *recorder) Wants(rec *airlockv1.ApprovalRecord) bool {
	return r.wants == nil || r.wants(rec)
}
func (r *recorder) Announce(ctx context.Context, rec *airlockv1.ApprovalRecord) (string, error) {
	if r.block {
		<-ctx.Done()
		r.add("gave-up:" + rec.GetCall().GetCallId())
		return "", errors.New("channel unreachable")
	}
	r.add("announce:" + rec.GetCall().GetCallId())
	return r.name + "/" + rec.GetCall().GetCallId(), nil
}
func (r *recorder) Remind(_ context.Context, rec *airlockv1.ApprovalRecord, _ string) error {
	r.add("remind:" + rec.GetCall().GetCallId())
	return nil
}
func (r *recorder) Update(_ context.Context, rec *airlockv1.ApprovalRecord, _ string) error {
	r.add("update:" + rec.GetCall().GetCallId() + ":" + rec.GetState().String())
	return nil
}

// redrawer is a recorder whose messages show more than the call (a chat
// card): it implements notify.Redrawer, recording "redraw:<call>:<state>".
type redrawer struct{ *recorder }

func (r redrawer) Redraw(_ context.Context, rec *airlockv1.ApprovalRecord, _ string) error {
	r.add("redraw:" + rec.GetCall().GetCallId() + ":" + rec.GetState().String())
	return nil
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, s)
	if _, ok := r.first[s]; !ok {
		if r.first == nil {
			r.first = map[string]time.Time{}
		}
		r.first[s] = time.Now()
	}
}

// at is when s was first seen, if it was.
func (r *recorder) at(s string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.first[s]
	return t, ok
}
func (r *recorder) seenOf(s string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, x := range r.seen {
		if x == s {
			out = append(out, x)
		}
	}
	return out
}
func (r *recorder) has(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.seen {
		if x == s {
			return true
		}
	}
	return false
}
