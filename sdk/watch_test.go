package airlock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestDoFastDeliversEachCallItsOwnOutcome answers every request the way
// the services would (a completed event echoing the call id, or a denial)
// and checks that concurrent DoFast calls each get their own outcome.
func TestDoFastDeliversEachCallItsOwnOutcome(t *testing.T) {
	n := testenv.StartNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	pub := deps.Publisher("executor")
	sub, err := deps.NC.Subscribe(subject.OfType(subject.Requested), func(m *nats.Msg) {
		p, _ := subject.Parse(m.Subject)
		ev := &airlockv1.Event{EventId: envelope.EventID(p.Call, 1, "result"), AgentId: p.Agent, CallId: p.Call, Revision: 1,
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
