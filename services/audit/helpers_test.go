package audit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/audit"
	"github.com/airlock-gate/airlock/services/audit/chtest"
	"github.com/airlock-gate/airlock/services/audit/record"
	"github.com/airlock-gate/airlock/services/audit/store"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/svc"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

func TestMain(m *testing.M) { chtest.Main(m) }

// env is one test's NATS plus a ClickHouse database.
type env struct {
	t    *testing.T
	nats *testenv.NATS
	deps svc.Deps
	pub  *bus.Publisher
	dsn  string
	key  *record.Key
}

func newEnv(t *testing.T, ch *chtest.Server) *env {
	t.Helper()
	n := testenv.StartNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	key, _, err := record.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, nats: n, deps: deps, pub: bus.NewPublisher(deps.JS, "test/audit"), key: key}
	if ch != nil {
		e.dsn = ch.DSN(t)
	}
	return e
}

// sink runs an audit sink on dsn until the test ends; stop stops it earlier.
func (e *env) sink(dsn string) (stop func()) {
	e.t.Helper()
	s, err := audit.New(e.deps, audit.Options{DSN: dsn, BatchSize: 500, FlushInterval: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Key: e.key})
	if err != nil {
		e.t.Fatal(err)
	}
	return testenv.RunService(e.t, s)
}

func (e *env) publish(evs ...*airlockv1.Event) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, ev := range evs {
		if _, err := e.pub.Publish(ctx, ev, ""); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *env) streamCount() uint64 {
	e.t.Helper()
	st, err := e.deps.JS.Stream(context.Background(), e.deps.Config.Stream.Name)
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return info.State.Msgs
}

func (e *env) open(dsn string) *store.ClickHouse {
	e.t.Helper()
	st, err := store.OpenWriter(context.Background(), dsn)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { st.Close() })
	return st
}

// verify runs the full verification of the store at dsn with the env's key and stream.
func (e *env) verify(st *store.ClickHouse) store.Report {
	e.t.Helper()
	rep, err := st.Verify(context.Background(), store.VerifyOptions{Key: e.key, JS: e.deps.JS, Stream: e.deps.Config.Stream.Name})
	if err != nil {
		e.t.Fatal(err)
	}
	return rep
}

// waitRows waits until the store holds want rows (FINAL) and returns them.
func waitRows(t *testing.T, st *store.ClickHouse, want uint64, timeout time.Duration) []store.Row {
	t.Helper()
	var got uint64
	deadline := time.Now().Add(timeout)
	for {
		n, err := st.Count(context.Background(), store.Filter{})
		if err == nil {
			got = n
			if n == want {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit store holds %d rows after %s, want %d (last error %v)", got, timeout, want, err)
		}
		time.Sleep(20 * time.Millisecond) // polling ClickHouse with a deadline
	}
	rows, err := st.Query(context.Background(), store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func human(id string) *airlockv1.Actor {
	return &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: id, Channel: "console"}
}

func service(id string) *airlockv1.Actor {
	return &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: id}
}

func mustStruct(t testing.TB, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// approveFlow is the events of one call asked about, approved by reviewer
// and run: requested → approval_requested → notified → approved → started → completed.
func approveFlow(t testing.TB, agent, call, server, tool, reviewer string, args map[string]any, redact ...string) []*airlockv1.Event {
	tc := &airlockv1.ToolCall{CallId: call, AgentId: agent, ThreadId: "th-" + agent, OnBehalfOf: "carol",
		Server: server, Tool: tool, Arguments: mustStruct(t, args), Revision: 1, Reason: "tidy up"}
	d := &airlockv1.Decision{Action: airlockv1.Action_ACTION_ASK, Reason: "writes need a person", RuleId: "ask-writes",
		Risk: airlockv1.Risk_RISK_HIGH, Redact: redact, PolicyRevision: "rev-1", DecisionId: "dec-" + call}
	base := func(typ string, actor *airlockv1.Actor) *airlockv1.Event {
		return &airlockv1.Event{EventId: agent + "." + call + ".1." + typ, AgentId: agent, CallId: call, Revision: 1, ThreadId: tc.ThreadId, Actor: actor}
	}
	req := base("requested", &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_AGENT, Id: agent})
	req.Body = &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: tc}}
	ask := base("decision", service("policy"))
	ask.Body = &airlockv1.Event_ApprovalRequested{ApprovalRequested: &airlockv1.ApprovalRequested{Call: tc, Decision: d}}
	not := base("", service("approval"))
	not.EventId = ""
	not.Body = &airlockv1.Event_Notified{Notified: &airlockv1.Notified{Channel: "console", Kind: "announce"}}
	app := base("approved", human(reviewer))
	app.Body = &airlockv1.Event_Approved{Approved: &airlockv1.Approved{Call: tc, Decision: d, PolicyRevision: "rev-1",
		Votes: []*airlockv1.Vote{{By: human(reviewer), Comment: "fine"}}}}
	st := base("started", service("executor"))
	st.Body = &airlockv1.Event_Started{Started: &airlockv1.Started{ExecutorId: "ex-1", Attempt: 1}}
	done := base("completed", service("executor"))
	done.Body = &airlockv1.Event_Completed{Completed: &airlockv1.Completed{ResultJson: `{"ok":true}`, Latency: durationpb.New(42 * time.Millisecond), Attempt: 1}}
	return []*airlockv1.Event{req, ask, not, app, st, done}
}

// simpleEvents are n allowed-and-completed style events spread over calls.
func simpleEvents(t testing.TB, prefix string, n int) []*airlockv1.Event {
	var out []*airlockv1.Event
	for i := 0; i < n; i++ {
		call := fmt.Sprintf("%s-%d", prefix, i/2)
		tc := &airlockv1.ToolCall{CallId: call, AgentId: "bot", Server: "fs", Tool: "read_file", Revision: 1,
			Arguments: mustStruct(t, map[string]any{"path": fmt.Sprintf("/tmp/%d", i)})}
		ev := &airlockv1.Event{EventId: fmt.Sprintf("%s-ev-%d", prefix, i), AgentId: "bot", CallId: call, Revision: 1, Actor: service("policy")}
		if i%2 == 0 {
			ev.Body = &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: tc}}
		} else {
			ev.Body = &airlockv1.Event_Allowed{Allowed: &airlockv1.Allowed{Call: tc, Decision: &airlockv1.Decision{Action: airlockv1.Action_ACTION_ALLOW, RuleId: "allow-reads"}}}
		}
		out = append(out, ev)
	}
	return out
}

// publishAsync publishes evs as fast as the stream takes them.
func (e *env) publishAsync(evs []*airlockv1.Event) {
	e.t.Helper()
	for _, ev := range evs {
		msg, err := bus.Encode(ev, "test/audit", "")
		if err != nil {
			e.t.Fatal(err)
		}
		if _, err := e.deps.JS.PublishMsgAsync(msg); err != nil {
			e.t.Fatal(err)
		}
	}
	select {
	case <-e.deps.JS.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		e.t.Fatal("async publishes not acknowledged within 30s")
	}
}

var _ = jetstream.AckAllPolicy
