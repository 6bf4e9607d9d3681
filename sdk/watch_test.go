package airlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestDoFastDeliversEachCallItsOwnOutcome answers every request the way
// the services would (a completed event echoing the call id, or a denial)
// and checks that concurrent DoFast calls each get their own outcome.
func TestDoFastDeliversEachCallItsOwnOutcome(t *testing.T) {
	n := startNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	pub := deps.Publisher("executor")
	sub, err := deps.NC.Subscribe(subject.AllRequests, func(m *nats.Msg) {
		agent, call, _ := subject.RequestTokens(m.Subject)
		p := subject.Parsed{Agent: agent, Call: call}
		ev := &airlockv1.Event{EventId: p.Agent + "." + p.Call + ".1.result", AgentId: p.Agent, CallId: p.Call, Revision: 1,
			Body: &airlockv1.Event_Completed{Completed: &airlockv1.Completed{ResultJson: fmt.Sprintf("%q", p.Call)}}}
		if p.Call == "deny-me" {
			ev.Body = &airlockv1.Event_Denied{Denied: &airlockv1.Denied{Decision: &airlockv1.Decision{Reason: "not today"}}}
		}
		if _, err := pub.Publish(context.Background(), ev, ""); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	// The stand-in service must be subscribed before the first request.
	if err := deps.NC.Flush(); err != nil {
		t.Fatal(err)
	}

	nc, _ := testenv.Connect(t, n.URL())
	c, _ := airlock.New(nc, "bot")
	w, err := c.Watch()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			id := fmt.Sprintf("fast-%d", i)
			out, err := w.DoFast(ctx, airlock.Call{ID: id, Tool: "demo__echo"})
			if err != nil || out.Status != airlock.StatusCompleted || string(out.Result) != fmt.Sprintf("%q", id) {
				t.Errorf("%s: outcome %+v, err %v", id, out, err)
			}
		}(i)
	}
	wg.Wait()
	out, err := w.DoFast(ctx, airlock.Call{ID: "deny-me", Tool: "demo__echo"})
	if err != nil || out.Status != airlock.StatusDenied || out.Reason != "not today" {
		t.Fatalf("denied call: outcome %+v, err %v", out, err)
	}
}

// TestDoFastEndsOnTheSubmittedRevision answers a revision-2 request with a
// late end of revision 1 first, then revision 2's own end, and an
// unreadable request with an invalid event (which carries no revision).
func TestDoFastEndsOnTheSubmittedRevision(t *testing.T) {
	n := startNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	pub := deps.Publisher("executor")
	sub, err := deps.NC.Subscribe(subject.AllRequests, func(m *nats.Msg) {
		agent, call, _ := subject.RequestTokens(m.Subject)
		p := subject.Parsed{Agent: agent, Call: call}
		var evs []*airlockv1.Event
		switch p.Call {
		case "revised":
			for _, rev := range []uint32{1, 2} {
				evs = append(evs, &airlockv1.Event{EventId: fmt.Sprintf("%s.%s.%d.result", p.Agent, p.Call, rev), AgentId: p.Agent, CallId: p.Call, Revision: rev,
					Body: &airlockv1.Event_Completed{Completed: &airlockv1.Completed{ResultJson: fmt.Sprintf(`"revision %d"`, rev)}}})
			}
		case "unreadable":
			evs = append(evs, &airlockv1.Event{EventId: "invalid.1", AgentId: p.Agent, CallId: p.Call,
				Body: &airlockv1.Event_Invalid{Invalid: &airlockv1.Invalid{Reason: "cannot read it"}}})
		}
		for _, ev := range evs {
			if _, err := pub.Publish(context.Background(), ev, ""); err != nil {
				t.Error(err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	// The stand-in service must be subscribed before the first request.
	if err := deps.NC.Flush(); err != nil {
		t.Fatal(err)
	}

	nc, _ := testenv.Connect(t, n.URL())
	c, _ := airlock.New(nc, "bot")
	w, err := c.Watch()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	t.Run("a late end of an earlier revision does not end the wait", func(t *testing.T) {
		out, err := w.DoFast(ctx, airlock.Call{ID: "revised", Revision: 2, Tool: "demo__echo"})
		if err != nil || out.Revision != 2 || string(out.Result) != `"revision 2"` {
			t.Fatalf("outcome %+v, err %v; want revision 2's result", out, err)
		}
	})
	t.Run("an invalid event answers the revision being waited for", func(t *testing.T) {
		out, err := w.DoFast(ctx, airlock.Call{ID: "unreadable", Revision: 3, Tool: "demo__echo"})
		if !errors.Is(err, airlock.ErrInvalid) || out.Status != airlock.StatusInvalid {
			t.Fatalf("outcome %+v, err %v; want invalid", out, err)
		}
	})
}

// TestDoFastNeverReportsAnOutcomeTheStreamRefused answers a request with a
// `completed` that the stream refuses (a compare-and-append that lost, as
// when another executor ended the call first) and then the `failed` that was
// stored: the agent must get the stored one.
func TestDoFastNeverReportsAnOutcomeTheStreamRefused(t *testing.T) {
	n := startNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	pub := deps.Publisher("executor")
	sub, err := deps.NC.Subscribe(subject.AllRequests, func(m *nats.Msg) {
		agent, call, _ := subject.RequestTokens(m.Subject)
		ledger := subject.OfExecution(agent, call)
		// First the append that loses (it expects an event that is not
		// there), then the one the stream stores.
		refused := &airlockv1.Event{AgentId: agent, CallId: call, Revision: 1,
			Body: &airlockv1.Event_Completed{Completed: &airlockv1.Completed{ResultJson: `"never stored"`}}}
		if _, err := pub.PublishAfter(context.Background(), refused, "", ledger, 7); !errors.Is(err, bus.ErrConflict) {
			t.Errorf("the losing append: %v, want a conflict", err)
		}
		stored := &airlockv1.Event{AgentId: agent, CallId: call, Revision: 1,
			Body: &airlockv1.Event_Failed{Failed: &airlockv1.Failed{Reason: "indeterminate"}}}
		if _, err := pub.PublishAfter(context.Background(), stored, "", ledger, 0); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := deps.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	nc, _ := testenv.Connect(t, n.URL())
	c, _ := airlock.New(nc, "bot")
	w, err := c.Watch()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// A raw subscriber on the events' own subjects would see the refused
	// publish too; the SDK follows only what the stream stored.
	raw, _ := nc.SubscribeSync("airlock.evt.bot.refused.>")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := w.DoFast(ctx, airlock.Call{ID: "refused", Tool: "demo__echo"})
	if err != nil || out.Status != airlock.StatusFailed {
		t.Fatalf("outcome %+v, %v; want the stored failure", out, err)
	}
	// The hazard is real: a core subscriber on the events' subjects saw the
	// refused `completed` first.
	m, err := raw.NextMsg(time.Second)
	if err != nil || !strings.HasSuffix(m.Subject, ".completed") {
		t.Fatalf("the raw subscriber's first message: %v %v; want the refused completed", m, err)
	}
}
