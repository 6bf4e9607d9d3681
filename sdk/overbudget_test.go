package airlock_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/ingress"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// publishNotice publishes, as the policy service would, the over-budget
// notice about revision rev of agent's call, and waits until the server
// has routed it.
func publishNotice(t *testing.T, nc *nats.Conn, agent, call string, rev uint32) {
	t.Helper()
	data, err := json.Marshal(ingress.NewOverBudget(agent, call, rev, 1, 1<<20, 12*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish(subject.OverBudgetNotice(agent, call), data); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// recordRequest publishes what the policy records of revision rev of a
// call: its requested event.
func recordRequest(t *testing.T, pub *bus.Publisher, agent, call string, rev uint32) {
	t.Helper()
	ev := &airlockv1.Event{EventId: fmt.Sprintf("%s.%s.%d.requested", agent, call, rev), AgentId: agent, CallId: call, Revision: rev,
		Body: &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: &airlockv1.ToolCall{CallId: call, AgentId: agent, Revision: rev, Tool: "demo__echo"}}}}
	if _, err := pub.Publish(context.Background(), ev, ""); err != nil {
		t.Fatal(err)
	}
}

// liveOnly is agent bot's client whose waits read a call's stored events
// once (airlock.WithLiveOnly), and storedReads, which hears each such read:
// an end published after one is seen live only, after what came before it.
func liveOnly(t *testing.T, nc *nats.Conn) (c *airlock.Client, storedReads chan struct{}) {
	t.Helper()
	storedReads = make(chan struct{}, 64)
	c, err := airlock.New(nc, "bot", airlock.WithLiveOnly(func() {
		select {
		case storedReads <- struct{}{}:
		default:
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	return c, storedReads
}

// wantOverBudget fails unless err is the budget's error about revision rev
// of call.
func wantOverBudget(t *testing.T, err error, call string, rev uint32) {
	t.Helper()
	var ob *airlock.OverBudgetError
	if !errors.Is(err, airlock.ErrOverBudget) || !errors.As(err, &ob) || ob.Call != call || ob.Revision != rev || ob.RetryAfter != 12*time.Second {
		t.Fatalf("%v; want ErrOverBudget about revision %d of call %s, retry after 12 s", err, rev, call)
	}
}

// TestAwaitAfterSubmitHearsTheOverBudgetNotice: the notice is not stored,
// and Await subscribed to the call only when it began, so a notice that
// came between Submit and Await was missed and the wait lasted until its
// context. The client hears its agent's notices from its first Submit on
// and keeps them for the waits that follow.
func TestAwaitAfterSubmitHearsTheOverBudgetNotice(t *testing.T) {
	n := startNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	nc, _ := testenv.Connect(t, n.URL())
	c, err := airlock.New(nc, "bot")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		await func(ctx context.Context, id string) (airlock.Outcome, error)
	}{
		{"Await", func(ctx context.Context, id string) (airlock.Outcome, error) { return c.Await(ctx, id) }},
		{"AwaitRevision", func(ctx context.Context, id string) (airlock.Outcome, error) { return c.AwaitRevision(ctx, id, 1) }},
		{"AwaitDecision", func(ctx context.Context, id string) (airlock.Outcome, error) { return c.AwaitDecision(ctx, id, 1) }},
		{"AwaitProgress", func(ctx context.Context, id string) (airlock.Outcome, error) { return c.AwaitProgress(ctx, id, 0, nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			id, err := c.Submit(ctx, airlock.Call{ID: "over-" + tc.name, Tool: "demo__echo"})
			if err != nil {
				t.Fatal(err)
			}
			publishNotice(t, deps.NC, "bot", id, 1) // before the wait subscribes
			_, err = tc.await(ctx, id)
			wantOverBudget(t, err, id, 1)
		})
	}
	t.Run("submitted_again_the_call_is_decided_anew", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		id, err := c.Submit(ctx, airlock.Call{ID: "over-Await", Tool: "demo__echo"})
		if err != nil {
			t.Fatal(err)
		}
		completeCall(t, deps.Publisher("executor"), "bot", id, 1, `"ran"`)
		if out, err := c.Await(ctx, id); err != nil || out.Status != airlock.StatusCompleted {
			t.Fatalf("Await of the call submitted again: %+v %v; want its completion, not the earlier notice", out, err)
		}
	})
}

// TestAnOverBudgetNoticeEndsOnlyAWaitForItsRevision: the notice named no
// revision, so a notice about revision 2 of a call ended a wait on its
// revision 1, still pending. A wait for a revision ends only on a notice
// about that revision (and one that is not recorded); a wait that names no
// revision, on a notice about a revision newer than any recorded.
func TestAnOverBudgetNoticeEndsOnlyAWaitForItsRevision(t *testing.T) {
	n := startNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	pub := deps.Publisher("policy")
	nc, _ := testenv.Connect(t, n.URL())
	c, storedReads := liveOnly(t, nc)
	drain := func() {
		for len(storedReads) > 0 {
			<-storedReads
		}
	}
	w, err := c.Watch()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	complete := func(call string) { completeCall(t, deps.Publisher("executor"), "bot", call, 1, `"ran"`) }

	t.Run("kept_notices", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		const id = "kept"
		if _, err := c.Submit(ctx, airlock.Call{ID: id, Tool: "demo__echo"}); err != nil {
			t.Fatal(err)
		}
		recordRequest(t, pub, "bot", id, 1) // revision 1 is recorded, and pending
		if _, err := c.Submit(ctx, airlock.Call{ID: id, Revision: 2, Tool: "demo__echo"}); err != nil {
			t.Fatal(err)
		}
		publishNotice(t, deps.NC, "bot", id, 2)
		_, err := c.AwaitRevision(ctx, id, 2)
		wantOverBudget(t, err, id, 2)
		_, err = c.Await(ctx, id) // the newest request asked for revision 2
		wantOverBudget(t, err, id, 2)
		// Revision 1 goes on: its wait ends with its own end.
		drain()
		done := make(chan error, 1)
		go func() {
			out, err := c.AwaitRevision(ctx, id, 1)
			if err == nil && (out.Status != airlock.StatusCompleted || out.Revision != 1) {
				err = fmt.Errorf("outcome %+v", out)
			}
			done <- err
		}()
		<-storedReads
		complete(id)
		if err := <-done; err != nil {
			t.Fatalf("AwaitRevision 1 while revision 2 was not decided: %v; want revision 1's completion", err)
		}
	})

	// A stand-in policy answers each request of a live-* call with a
	// notice about its revision 2 (another process of the agent submitted
	// it over the budget); of a fast-* call, with that notice and then one
	// about revision 1.
	noticed := make(chan string, 8)
	sub, err := deps.NC.Subscribe(subject.AllRequests, func(m *nats.Msg) {
		_, call, _ := subject.RequestTokens(m.Subject)
		revs := map[bool][]uint32{false: {2}, true: {2, 1}}[strings.HasPrefix(call, "fast-")]
		if call == "kept" {
			return
		}
		for _, rev := range revs {
			data, _ := json.Marshal(ingress.NewOverBudget("bot", call, rev, 1, 1<<20, 12*time.Second))
			if err := deps.NC.Publish(subject.OverBudgetNotice("bot", call), data); err != nil {
				t.Error(err)
			}
		}
		noticed <- call
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := deps.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		do   func(ctx context.Context, call airlock.Call) (airlock.Outcome, error)
	}{
		{"Do", c.Do},
		{"SubmitFollowed", func(ctx context.Context, call airlock.Call) (airlock.Outcome, error) {
			f, err := c.SubmitFollowed(ctx, call)
			if err != nil {
				return airlock.Outcome{}, err
			}
			defer f.Close()
			return f.AwaitDecision(ctx)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			drain()
			id := "live-" + tc.name
			type result struct {
				out airlock.Outcome
				err error
			}
			done := make(chan result, 1)
			go func() {
				out, err := tc.do(ctx, airlock.Call{ID: id, Tool: "demo__echo"})
				done <- result{out, err}
			}()
			<-noticed
			<-storedReads
			complete(id) // after the notice, on the same connection: seen after it
			r := <-done
			if r.err != nil || r.out.Status != airlock.StatusCompleted || r.out.Revision != 1 {
				t.Fatalf("%s of revision 1 with a notice about revision 2 first: %+v %v; want revision 1's completion", tc.name, r.out, r.err)
			}
		})
	}
	t.Run("DoFast", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := w.DoFast(ctx, airlock.Call{ID: "fast-1", Tool: "demo__echo"})
		wantOverBudget(t, err, "fast-1", 1) // the notice about revision 2 came first
	})
}

// TestOverBudgetNoticesStayBounded: the notices kept stay bounded, however
// many calls are heard about and however often one call is heard about and
// submitted again (a REST agent resubmitting the same call over its
// budget).
func TestOverBudgetNoticesStayBounded(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	h := airlock.NewOverBudgetNotices(func() time.Time { return now })
	notice := func(call string) *nats.Msg {
		data, err := json.Marshal(ingress.NewOverBudget("agent-a", call, 1, 10, 1000, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		return &nats.Msg{Subject: subject.OverBudgetNotice("agent-a", call), Data: data}
	}
	for range 3 * airlock.MaxOverBudgetNoticesPerAgent {
		h.Hear(notice("call-1"))
		if _, ok := h.Heard("agent-a", "call-1"); !ok {
			t.Fatal("the notice just heard is not kept")
		}
		h.Forget("agent-a", "call-1")
	}
	if got := h.Len(); got != 0 {
		t.Fatalf("after every notice was forgotten, %d are kept; want none", got)
	}
	for i := range airlock.MaxOverBudgetNoticesPerAgent + 10 {
		h.Hear(notice(fmt.Sprintf("c%d", i)))
	}
	if got := h.Len(); got != airlock.MaxOverBudgetNoticesPerAgent {
		t.Fatalf("%d notices kept of %d calls; want at most %d", got, airlock.MaxOverBudgetNoticesPerAgent+10, airlock.MaxOverBudgetNoticesPerAgent)
	}
	if _, ok := h.Heard("agent-a", "c0"); ok {
		t.Fatal("the oldest notice is still kept past the bound; want it forgotten first")
	}
	if _, ok := h.Heard("agent-a", fmt.Sprintf("c%d", airlock.MaxOverBudgetNoticesPerAgent+9)); !ok {
		t.Fatal("the newest notice is not kept")
	}
	now = now.Add(2 * time.Minute)
	if _, ok := h.Heard("agent-a", fmt.Sprintf("c%d", airlock.MaxOverBudgetNoticesPerAgent+9)); ok {
		t.Fatal("a notice is still kept past its retry after and the minute; want it expired")
	}
}

// TestARefusalOfALaterRevisionLeavesTheRevisionAwaitedGoingOn: the policy
// records the first requests over budget of a minute as invalid too, with
// no revision, which a wait took for an end of the revision it awaited; it
// names the request's revision now, and an invalid later revision (never
// recorded) ends neither a wait on an earlier one nor what Ended says of
// it. A wait that names no revision is about the newest request: it ends.
func TestARefusalOfALaterRevisionLeavesTheRevisionAwaitedGoingOn(t *testing.T) {
	n := startNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	pub := deps.Publisher("policy")
	nc, _ := testenv.Connect(t, n.URL())
	c, storedReads := liveOnly(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const id = "refused-later"
	recordRequest(t, pub, "bot", id, 1)
	refusal := &airlockv1.Event{EventId: "intake.7.invalid", AgentId: "bot", CallId: id, Revision: 2,
		Body: &airlockv1.Event_Invalid{Invalid: &airlockv1.Invalid{Reason: "agent bot sent more than limits.agent_calls_per_minute"}}}
	if _, err := pub.Publish(ctx, refusal, ""); err != nil {
		t.Fatal(err)
	}
	if out, ended, err := c.Ended(ctx, id, 1); err != nil || ended {
		t.Fatalf("Ended of revision 1: %+v %v %v; want it going on", out, ended, err)
	}
	if out, ended, err := c.Ended(ctx, id, 2); err != nil || !ended || out.Status != airlock.StatusInvalid {
		t.Fatalf("Ended of revision 2: %+v %v %v; want it ended invalid", out, ended, err)
	}
	if _, err := c.Await(ctx, id); !errors.Is(err, airlock.ErrInvalid) {
		t.Fatalf("Await of the newest request: %v; want ErrInvalid", err)
	}
	for len(storedReads) > 0 {
		<-storedReads
	}
	done := make(chan error, 1)
	go func() {
		out, err := c.AwaitRevision(ctx, id, 1)
		if err == nil && (out.Status != airlock.StatusCompleted || out.Revision != 1) {
			err = fmt.Errorf("outcome %+v", out)
		}
		done <- err
	}()
	<-storedReads
	completeCall(t, deps.Publisher("executor"), "bot", id, 1, `"ran"`)
	if err := <-done; err != nil {
		t.Fatalf("AwaitRevision 1 with revision 2 refused: %v; want revision 1's completion", err)
	}
}

// TestARefusedRepeatOfARecordedRevisionEndsNoWait (R7 F1, F3): a request
// repeating a recorded revision was refused (over the budget, or with other
// content) with an invalid event naming that revision, which every wait
// took for its end although the call went on and ran; and DoFast, whose
// follower sees only live events, ended on the notice about such a repeat.
// Neither ends a wait now: the revision's own end does.
func TestARefusedRepeatOfARecordedRevisionEndsNoWait(t *testing.T) {
	n := startNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	pub := deps.Publisher("policy")
	nc, _ := testenv.Connect(t, n.URL())
	c, err := airlock.New(nc, "bot")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	t.Run("stored_refusal", func(t *testing.T) {
		const id = "repeat-stored"
		recordRequest(t, pub, "bot", id, 1)
		refusal := &airlockv1.Event{EventId: "intake.9.invalid", AgentId: "bot", CallId: id, Revision: 1,
			Body: &airlockv1.Event_Invalid{Invalid: &airlockv1.Invalid{Reason: "call id repeat-stored revision 1 was already submitted with other content"}}}
		if _, err := pub.Publish(ctx, refusal, ""); err != nil {
			t.Fatal(err)
		}
		if out, ended, err := c.Ended(ctx, id, 1); err != nil || ended {
			t.Fatalf("Ended of recorded revision 1 after a refused repeat: %+v %v %v; want it going on", out, ended, err)
		}
		completeCall(t, deps.Publisher("executor"), "bot", id, 1, `"ran"`)
		if out, err := c.Await(ctx, id); err != nil || out.Status != airlock.StatusCompleted {
			t.Fatalf("Await after a refused repeat and the completion: %+v %v; want completed", out, err)
		}
	})

	t.Run("DoFast_notice", func(t *testing.T) {
		const id = "repeat-fast"
		recordRequest(t, pub, "bot", id, 1) // recorded and pending before the repeat
		asked := make(chan struct{}, 1)
		sub, err := deps.NC.Subscribe("airlock.req.bot."+id, func(*nats.Msg) { asked <- struct{}{} })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
		if err := deps.NC.Flush(); err != nil {
			t.Fatal(err)
		}
		w, err := c.Watch()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.Close() })
		type result struct {
			out airlock.Outcome
			err error
		}
		done := make(chan result, 1)
		go func() {
			out, err := w.DoFast(ctx, airlock.Call{ID: id, Tool: "demo__echo"})
			done <- result{out, err}
		}()
		// A stand-in policy answers the repeat with a notice about
		// revision 1; then the call completes.
		<-asked
		publishNotice(t, deps.NC, "bot", id, 1)
		completeCall(t, deps.Publisher("executor"), "bot", id, 1, `"ran"`)
		if r := <-done; r.err != nil || r.out.Status != airlock.StatusCompleted {
			t.Fatalf("DoFast repeating a recorded revision, answered with a notice: %+v %v; want its completion", r.out, r.err)
		}
	})
}

// TestOverBudgetNoticesAreBoundedPerAgent (R7 F2): one record for every
// agent, oldest first, let other agents' notices push an agent's out. Each
// agent's notices push out only its own; the total bound holds, taken from
// expired notices first, then from the agent that has the most.
func TestOverBudgetNoticesAreBoundedPerAgent(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	h := airlock.NewOverBudgetNotices(func() time.Time { return now })
	hear := func(agent, call string) {
		data, err := json.Marshal(ingress.NewOverBudget(agent, call, 1, 10, 1000, time.Second))
		if err != nil {
			t.Fatal(err)
		}
		h.Hear(&nats.Msg{Subject: subject.OverBudgetNotice(agent, call), Data: data})
	}
	hear("old", "expires") // kept a minute
	now = now.Add(2 * time.Minute)
	hear("victim", "kept")
	flooders := airlock.MaxOverBudgetNotices/airlock.MaxOverBudgetNoticesPerAgent + 1
	for a := range flooders {
		for i := range airlock.MaxOverBudgetNoticesPerAgent + 10 {
			hear(fmt.Sprintf("flood%d", a), fmt.Sprintf("c%d", i))
		}
	}
	if got := h.Len(); got > airlock.MaxOverBudgetNotices {
		t.Fatalf("%d notices kept; want at most %d in all", got, airlock.MaxOverBudgetNotices)
	}
	if _, ok := h.Heard("victim", "kept"); !ok {
		t.Fatal("victim's notice was pushed out by other agents' notices")
	}
	if _, ok := h.Heard("flood0", "c0"); ok {
		t.Fatal("a flooding agent's oldest notice is kept past its own bound")
	}
	if _, ok := h.Heard("flood0", fmt.Sprintf("c%d", airlock.MaxOverBudgetNoticesPerAgent+9)); !ok {
		t.Fatal("a flooding agent's newest notice is not kept")
	}
}

// TestAnAgentWhoseNoticesTheBoundsDroppedIsForgotten: an agent whose
// notices the bounds all dropped (expired, or pushed out by the total
// bound) kept an empty entry until the process ended, so the agents kept
// grew with every agent ever heard of; only Forget removed one.
func TestAnAgentWhoseNoticesTheBoundsDroppedIsForgotten(t *testing.T) {
	for _, tt := range []struct {
		name string
		// hear hears notices by the clock now points at.
		hear       func(hear func(agent, call string), now *time.Time)
		wantAgents int
		wantKept   [][2]string // agent and call whose notice is kept
	}{
		{"expired_then_trimmed_by_the_total_bound", func(hear func(agent, call string), now *time.Time) {
			hear("old", "expires")
			*now = now.Add(2 * time.Minute)
			for i := range airlock.MaxOverBudgetNotices {
				hear(fmt.Sprintf("flood%d", i/airlock.MaxOverBudgetNoticesPerAgent), fmt.Sprintf("c%d", i))
			}
		}, airlock.MaxOverBudgetNotices / airlock.MaxOverBudgetNoticesPerAgent, [][2]string{{"flood0", "c0"}}},
		{"pushed_out_by_the_total_bound", func(hear func(agent, call string), now *time.Time) {
			for i := range airlock.MaxOverBudgetNotices + 1 {
				hear(fmt.Sprintf("agent%d", i), "c")
			}
		}, airlock.MaxOverBudgetNotices, [][2]string{{fmt.Sprintf("agent%d", airlock.MaxOverBudgetNotices), "c"}}},
		{"its_own_expired_notice_trimmed_by_its_next", func(hear func(agent, call string), now *time.Time) {
			hear("bot", "first")
			*now = now.Add(2 * time.Minute)
			hear("bot", "second")
		}, 1, [][2]string{{"bot", "second"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Unix(1_700_000_000, 0)
			h := airlock.NewOverBudgetNotices(func() time.Time { return now })
			tt.hear(func(agent, call string) {
				data, err := json.Marshal(ingress.NewOverBudget(agent, call, 1, 10, 1000, time.Second))
				if err != nil {
					t.Fatal(err)
				}
				h.Hear(&nats.Msg{Subject: subject.OverBudgetNotice(agent, call), Data: data})
			}, &now)
			if got := h.AgentsKept(); got != tt.wantAgents {
				t.Fatalf("%d agents kept, with %d notices; want %d: an agent with no notice left is forgotten", got, h.Len(), tt.wantAgents)
			}
			for _, k := range tt.wantKept {
				if _, ok := h.Heard(k[0], k[1]); !ok {
					t.Fatalf("%s's notice about %s is not kept", k[0], k[1])
				}
			}
		})
	}
}
