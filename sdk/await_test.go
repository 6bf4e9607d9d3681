package airlock_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// completeCall publishes what the executor would: the call's completed event.
func completeCall(t *testing.T, pub *bus.Publisher, agent, call string, rev uint32, result string) {
	t.Helper()
	ev := &airlockv1.Event{
		EventId: fmt.Sprintf("%s.%s.%d.completed", agent, call, rev), AgentId: agent, CallId: call, Revision: rev,
		Body: &airlockv1.Event_Completed{Completed: &airlockv1.Completed{ResultJson: result}},
	}
	if _, err := pub.Publish(context.Background(), ev, ""); err != nil {
		t.Fatal(err)
	}
}

func TestAwaitReturnsOutcomePublishedBeforeItStarted(t *testing.T) {
	n := startNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	nc, _ := testenv.Connect(t, n.URL())
	c, err := airlock.New(nc, "bot")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id, err := c.Submit(ctx, airlock.Call{Tool: "demo__echo", Args: map[string]any{"x": 1}})
	if err != nil {
		t.Fatal(err)
	}
	completeCall(t, deps.Publisher("executor"), "bot", id, 1, `{"echo":1}`)

	// A fresh client stands in for the agent after a restart.
	nc2, _ := testenv.Connect(t, n.URL())
	restarted, _ := airlock.New(nc2, "bot")
	out, err := restarted.Await(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != airlock.StatusCompleted || string(out.Result) != `{"echo":1}` {
		t.Fatalf("outcome %+v", out)
	}
}

func TestAwaitFollowsLiveAndSkipsSupersededRevisions(t *testing.T) {
	n := startNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	nc, _ := testenv.Connect(t, n.URL())
	c, _ := airlock.New(nc, "bot")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pub := deps.Publisher("approval")

	id, err := c.Submit(ctx, airlock.Call{Tool: "fs__write_file", Args: map[string]any{"path": "/tmp/a"}})
	if err != nil {
		t.Fatal(err)
	}
	ev := &airlockv1.Event{EventId: "bot." + id + ".1.changes_requested", AgentId: "bot", CallId: id, Revision: 1,
		Body: &airlockv1.Event_ChangesRequested{ChangesRequested: &airlockv1.ChangesRequested{Feedback: "use /tmp/b"}}}
	if _, err := pub.Publish(ctx, ev, ""); err != nil {
		t.Fatal(err)
	}
	out, err := c.Await(ctx, id)
	if err != nil || out.Status != airlock.StatusChangesRequested || out.Feedback != "use /tmp/b" {
		t.Fatalf("first await: %+v, %v", out, err)
	}
	if _, err := c.Submit(ctx, airlock.Call{ID: id, Revision: 2, Tool: "fs__write_file", Args: map[string]any{"path": "/tmp/b"}}); err != nil {
		t.Fatal(err)
	}
	got := make(chan airlock.Outcome, 1)
	go func() {
		o, _ := c.AwaitRevision(ctx, id, 2)
		got <- o
	}()
	completeCall(t, pub, "bot", id, 2, `"ok"`)
	select {
	case o := <-got:
		if o.Status != airlock.StatusCompleted || o.Revision != 2 {
			t.Fatalf("second await: %+v", o)
		}
	case <-ctx.Done():
		t.Fatal("Await did not return the live outcome")
	}
}

func TestAwaitSurvivesNATSRestart(t *testing.T) {
	n := startNATS(t)
	cfg := testenv.Config(n.URL())
	testenv.Deps(t, cfg) // provisions the stream
	nc, _ := testenv.Connect(t, n.URL())
	c, _ := airlock.New(nc, "bot")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := c.Submit(ctx, airlock.Call{Tool: "demo__echo"})
	if err != nil {
		t.Fatal(err)
	}
	subs := n.Server.NumSubscriptions()
	got := make(chan airlock.Outcome, 1)
	go func() {
		o, err := c.Await(ctx, id)
		if err != nil {
			t.Error(err)
		}
		got <- o
	}()
	// Restart only once Await is following the call, so the restart hits a live subscription.
	testenv.Eventually(t, 10*time.Second, "Await's subscription", func() bool {
		return n.Server.NumSubscriptions() > subs
	})
	n.Restart()
	_, js := testenv.Connect(t, n.URL())
	completeCall(t, bus.NewPublisher(js, "airlock/executor"), "bot", id, 1, `"after restart"`)
	select {
	case o := <-got:
		if o.Status != airlock.StatusCompleted || string(o.Result) != `"after restart"` {
			t.Fatalf("outcome %+v", o)
		}
	case <-ctx.Done():
		t.Fatal("Await did not return after the NATS restart")
	}
}

func TestSubmitRefusesInvalidCallsLocally(t *testing.T) {
	n := startNATS(t)
	nc, _ := testenv.Connect(t, n.URL())
	c, _ := airlock.New(nc, "bot", airlock.WithMaxRequestBytes(512))
	tests := []struct {
		name string
		call airlock.Call
	}{
		{"no_tool", airlock.Call{}},
		{"no_server", airlock.Call{Tool: "read_file"}},
		{"bad_call_id", airlock.Call{ID: "a.b", Tool: "fs__read_file"}},
		{"oversized", airlock.Call{Tool: "fs__write_file", Args: map[string]any{"content": string(make([]byte, 1000))}}},
		{"unencodable_args", airlock.Call{Tool: "fs__x", Args: map[string]any{"ch": make(chan int)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := c.Submit(context.Background(), tt.call); !errors.Is(err, airlock.ErrInvalid) {
				t.Fatalf("Submit error = %v, want ErrInvalid", err)
			}
		})
	}
}

// TestTheOutcomeNamesWhoLetTheCallRun: a call that ran ends with the
// executor's event, but decided_by names the person who approved it (or the
// policy that allowed it), whether Await reads the stored events or follows
// them live.
func TestTheOutcomeNamesWhoLetTheCallRun(t *testing.T) {
	n := startNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	decide := func(call, typ string, actor *airlockv1.Actor) {
		t.Helper()
		ev := &airlockv1.Event{EventId: "bot." + call + ".1." + typ, AgentId: "bot", CallId: call, Revision: 1, Actor: actor}
		if typ == "approved" {
			ev.Body = &airlockv1.Event_Approved{Approved: &airlockv1.Approved{}}
		} else {
			ev.Body = &airlockv1.Event_Allowed{Allowed: &airlockv1.Allowed{}}
		}
		if _, err := deps.Publisher("test").Publish(context.Background(), ev, ""); err != nil {
			t.Fatal(err)
		}
	}
	// endLive delivers only the end live, as the stream republishes it, while
	// the decision was stored before the wait began: the wait never sees the
	// decision live (CI once saw DecidedBy empty for a grant's allow).
	endLive := func(t *testing.T, nc *nats.Conn, call string) {
		t.Helper()
		stored := "airlock.evt.bot." + call + ".exec.completed"
		m := nats.NewMsg(subject.Out(stored))
		m.Data = []byte(`{"completed":{"result_json":"{}"}, "agent_id":"bot", "call_id":"` + call + `", "revision":1}`)
		m.Header.Set("Content-Type", "application/json")
		m.Header.Set(jetstream.SubjectHeader, stored)
		m.Header.Set(jetstream.SequenceHeader, "999999")
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, typ, want string
		live            bool
		onlyEndLive     bool
	}{
		{"a_stored_approval_names_the_reviewer", "approved", "alice", false, false},
		{"a_live_approval_names_the_reviewer", "approved", "alice", true, false},
		{"a_policy_allow_names_the_policy", "allowed", "policy", false, false},
		{"a_decision_stored_before_the_wait_and_an_end_seen_live_names_who_decided", "allowed", "policy", true, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc, _ := testenv.Connect(t, n.URL())
			c, _ := airlock.New(nc, "bot")
			call := fmt.Sprintf("d%d", i)
			actor := &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: tt.want}
			if tt.typ == "allowed" {
				actor.Type = airlockv1.ActorType_ACTOR_TYPE_SERVICE
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got := make(chan airlock.Outcome, 1)
			if tt.onlyEndLive {
				decide(call, tt.typ, actor)
				done := make(chan airlock.Outcome, 1)
				go func() { o, _ := c.Await(ctx, call); done <- o }()
				// Until the wait's subscription reaches the server, a live end
				// is missed: send it until the wait ends.
				tick := time.NewTicker(50 * time.Millisecond)
				defer tick.Stop()
				for len(got) == 0 {
					endLive(t, deps.NC, call)
					select {
					case o := <-done:
						got <- o
					case <-tick.C:
					case <-ctx.Done():
						t.Fatal("the wait saw no end")
					}
				}
			} else {
				if tt.live {
					// Only live: had the wait read the stream again, that
					// read would find what the live path should deliver.
					read := make(chan struct{}, 1)
					live, err := airlock.New(nc, "bot", airlock.WithLiveOnly(func() {
						select {
						case read <- struct{}{}:
						default:
						}
					}))
					if err != nil {
						t.Fatal(err)
					}
					go func() { o, _ := live.Await(ctx, call); got <- o }()
					// The wait subscribes before its one read of the stream:
					// after that read, what follows reaches it only live.
					select {
					case <-read:
					case <-ctx.Done():
						t.Fatal("the wait never read the stored events")
					}
				}
				decide(call, tt.typ, actor)
				completeCall(t, deps.Publisher("executor"), "bot", call, 1, `{}`)
			}
			if !tt.live {
				o, err := c.Await(ctx, call)
				if err != nil {
					t.Fatal(err)
				}
				got <- o
			}
			if o := <-got; o.Status != airlock.StatusCompleted || o.DecidedBy != tt.want {
				t.Fatalf("outcome %s decided by %q, want completed decided by %q", o.Status, o.DecidedBy, tt.want)
			}
		})
	}
}

// TestAwaitProgressReportsTheStepsBeforeTheOutcome: a person at a terminal
// hears that the call waits for a reviewer (and why), then who approved it,
// even when those steps were stored before the await began.
func TestAwaitProgressReportsTheStepsBeforeTheOutcome(t *testing.T) {
	n := startNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	nc, _ := testenv.Connect(t, n.URL())
	c, _ := airlock.New(nc, "bot")
	pub := deps.Publisher("test")
	for _, ev := range []*airlockv1.Event{
		{EventId: "bot.p1.1.decision", AgentId: "bot", CallId: "p1", Revision: 1, Actor: &airlockv1.Actor{Id: "policy"},
			Body: &airlockv1.Event_ApprovalRequested{ApprovalRequested: &airlockv1.ApprovalRequested{Decision: &airlockv1.Decision{RuleId: "write", Reason: "writes need a person"}}}},
		{EventId: "bot.p1.1.approved", AgentId: "bot", CallId: "p1", Revision: 1, Actor: &airlockv1.Actor{Id: "alice"},
			Body: &airlockv1.Event_Approved{Approved: &airlockv1.Approved{}}},
	} {
		if _, err := pub.Publish(context.Background(), ev, ""); err != nil {
			t.Fatal(err)
		}
	}
	completeCall(t, deps.Publisher("executor"), "bot", "p1", 1, `{}`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	seen := map[string]airlock.Progress{}
	out, err := c.AwaitProgress(ctx, "p1", 1, func(p airlock.Progress) { seen[p.Type] = p })
	if err != nil || out.Status != airlock.StatusCompleted {
		t.Fatalf("outcome %+v %v", out, err)
	}
	if ar := seen["approval_requested"]; ar.Decision.GetRuleId() != "write" {
		t.Errorf("approval_requested step %+v", ar)
	}
	if ap := seen["approved"]; ap.By != "alice" {
		t.Errorf("approved step %+v", ap)
	}
}

// TestTheOutcomeSaysWhenAReviewerEditedTheArguments: an agent whose call a
// reviewer approved with edited arguments learns so, and which arguments
// ran, from the outcome and from the approved step; an unedited approval
// says nothing of the kind.
func TestTheOutcomeSaysWhenAReviewerEditedTheArguments(t *testing.T) {
	n := startNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	args := func(path string) *structpb.Struct {
		s, err := structpb.NewStruct(map[string]any{"path": path})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tc := range []struct {
		name     string
		approved *airlockv1.Approved
		want     string // the arguments the outcome names; "" for none
	}{
		{"an_edited_approval_names_the_arguments_that_ran",
			&airlockv1.Approved{Edited: true, Call: &airlockv1.ToolCall{Arguments: args("edited.txt")}, OriginalArguments: args("asked.txt")}, `{"path":"edited.txt"}`},
		{"an_unedited_approval_names_none", &airlockv1.Approved{Call: &airlockv1.ToolCall{Arguments: args("asked.txt")}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			call := "edit-" + tc.name[:12]
			ev := &airlockv1.Event{EventId: "bot." + call + ".1.approved", AgentId: "bot", CallId: call, Revision: 1,
				Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "alice"}, Body: &airlockv1.Event_Approved{Approved: tc.approved}}
			if _, err := deps.Publisher("test").Publish(context.Background(), ev, ""); err != nil {
				t.Fatal(err)
			}
			completeCall(t, deps.Publisher("executor"), "bot", call, 1, `{}`)
			nc, _ := testenv.Connect(t, n.URL())
			c, _ := airlock.New(nc, "bot")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var approvedStep json.RawMessage
			o, err := c.AwaitProgress(ctx, call, 0, func(p airlock.Progress) {
				if p.Type == "approved" {
					approvedStep = p.Arguments
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if o.Status != airlock.StatusCompleted || o.ArgumentsEdited != (tc.want != "") || string(o.Arguments) != tc.want || string(approvedStep) != tc.want {
				t.Fatalf("outcome %s edited=%v arguments %s, approved step %s; want edited=%v arguments %q", o.Status, o.ArgumentsEdited, o.Arguments, approvedStep, tc.want != "", tc.want)
			}
		})
	}
}

// TestEndedReadsWhatIsStoredWithoutWaiting: Ended tells a call that has
// ended (with its outcome and when), one that goes on, and one nothing of
// which is recorded, at once, from the stored events alone.
func TestEndedReadsWhatIsStoredWithoutWaiting(t *testing.T) {
	deps, c, ctx := gateRig(t)
	before := time.Now().Add(-time.Second)
	completeCall(t, deps.Publisher("executor"), "bot", "done1", 1, `{"ok":true}`)
	completeCall(t, deps.Publisher("executor"), "other", "theirs", 1, `{"ok":true}`)
	for _, ev := range []*airlockv1.Event{
		{EventId: "bot.wait1.1.requested", AgentId: "bot", CallId: "wait1", Revision: 1,
			Body: &airlockv1.Event_Requested{Requested: &airlockv1.Requested{}}},
		{EventId: "bot.wait1.1.approval_requested", AgentId: "bot", CallId: "wait1", Revision: 1,
			Body: &airlockv1.Event_ApprovalRequested{ApprovalRequested: &airlockv1.ApprovalRequested{}}},
	} {
		if _, err := deps.Publisher("policy").Publish(ctx, ev, ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name      string
		call      string
		wantEnded bool
		wantErr   error
	}{
		{"a_completed_call_has_ended", "done1", true, nil},
		{"a_call_waiting_for_a_person_goes_on", "wait1", false, nil},
		{"a_call_nothing_of_which_is_recorded_is_unknown", "never-made", false, airlock.ErrUnknownCall},
		{"another_agents_call_is_unknown_to_this_one", "theirs", false, airlock.ErrUnknownCall},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, ended, err := c.Ended(ctx, tc.call, 0)
			if !errors.Is(err, tc.wantErr) || ended != tc.wantEnded {
				t.Fatalf("Ended = %v, %v; want %v, %v", ended, err, tc.wantEnded, tc.wantErr)
			}
			if ended && (out.Status != airlock.StatusCompleted || string(out.Result) != `{"ok":true}` || out.At.Before(before) || out.At.After(time.Now())) {
				t.Errorf("outcome %+v (at %s): want completed with its result, ended just now", out, out.At)
			}
		})
	}
}

// TestEndedWithinWaitsForTheCallsFirstEvent: a call nothing of which is
// stored yet (submitted a moment ago) is told as soon as its first event
// is recorded, within the grace, without polling the stream: its request
// is recorded right after EndedWithin's first read, the grace outlasts the
// test, and only the event can end the wait. A call that stays unrecorded
// is unknown once the grace has passed; a recorded one is told at once.
func TestEndedWithinWaitsForTheCallsFirstEvent(t *testing.T) {
	deps, _, ctx := gateRig(t)
	requested := func(call string) {
		ev := &airlockv1.Event{EventId: "bot." + call + ".1.requested", AgentId: "bot", CallId: call, Revision: 1,
			Body: &airlockv1.Event_Requested{Requested: &airlockv1.Requested{}}}
		if _, err := deps.Publisher("policy").Publish(context.Background(), ev, ""); err != nil {
			t.Error(err)
		}
	}
	requested("known1")
	for _, tc := range []struct {
		name        string
		call        string
		afterRead   func(call string)
		grace       time.Duration
		wantUnknown bool
	}{
		{name: "a_call_recorded_after_the_first_read_is_told_once_it_is", call: "late1", afterRead: requested, grace: time.Hour},
		{name: "a_call_recorded_before_is_told_at_once", call: "known1", grace: time.Hour},
		{name: "a_call_never_recorded_is_unknown_after_the_grace", call: "never1", grace: 10 * time.Millisecond, wantUnknown: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var reads int
			c, err := airlock.New(deps.NC, "bot", airlock.WithLiveOnly(func() {
				reads++
				if reads == 1 && tc.afterRead != nil {
					tc.afterRead(tc.call)
				}
			}))
			if err != nil {
				t.Fatal(err)
			}
			_, ended, err := c.EndedWithin(ctx, tc.call, 0, tc.grace)
			if errors.Is(err, airlock.ErrUnknownCall) != tc.wantUnknown || ended || err != nil && !tc.wantUnknown {
				t.Fatalf("EndedWithin = ended %v, %v; want unknown: %v", ended, err, tc.wantUnknown)
			}
			if ctx.Err() != nil {
				t.Fatal("the test's own deadline ended the wait, not the call's event")
			}
		})
	}
}
