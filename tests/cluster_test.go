package tests

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestClusterSurvivesLossOfStreamLeader provisions R3 on a 3-node cluster,
// starts following a call, kills the node leading the events stream, and
// checks that publishing, the execution ledger's compare-and-append (the
// executor's claim) and Await carry on.
func TestClusterSurvivesLossOfStreamLeader(t *testing.T) {
	c := testenv.StartCluster(t, 3)
	servers, cfg, js := c.Servers, c.Config, c.JS
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()

	agentNC, err := nats.Connect(cfg.NATS.URL, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(agentNC.Close)
	client, _ := airlock.New(agentNC, "bot")
	id, err := client.Submit(ctx, airlock.Call{Tool: "demo__echo"})
	if err != nil {
		t.Fatal(err)
	}
	pub := bus.NewPublisher(js, "airlock/executor")
	claim := func(token string) *airlockv1.Event {
		return &airlockv1.Event{AgentId: "bot", CallId: id, Revision: 1,
			Body: &airlockv1.Event_Started{Started: &airlockv1.Started{ExecutorId: token, Attempt: 1, Claim: token}}}
	}
	ledger := subject.OfExecution("bot", id)
	if _, err := pub.PublishAfter(ctx, claim("first"), "", ledger, 0); err != nil {
		t.Fatal(err)
	}

	got := make(chan airlock.Outcome, 1)
	go func() {
		o, err := client.Await(ctx, id)
		if err != nil {
			t.Error(err)
		}
		got <- o
	}()

	s, err := js.Stream(ctx, cfg.Stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	leader := s.CachedInfo().Cluster.Leader
	killed := false
	for _, srv := range servers {
		if srv.Name() == leader {
			srv.Stop()
			killed = true
		}
	}
	if !killed {
		t.Fatalf("stream leader %q is not one of the servers", leader)
	}

	// The claim survives and still refuses a second claimant.
	deadline := time.Now().Add(30 * time.Second)
	var firstSeq uint64
	for {
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := pub.PublishAfter(actx, claim("second"), "", ledger, 0)
		acancel()
		if errors.Is(err, bus.ErrConflict) {
			break
		}
		if err == nil {
			t.Fatal("a second claim succeeded after failover")
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream refused compare-and-append 30s after losing a node: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if m, err := bus.LastStored(ctx, agentNC, cfg.Stream.Name, ledger); err != nil || m == nil {
		t.Fatalf("the first claim is not the ledger's last event: %v", err)
	} else {
		firstSeq = bus.StoredSeq(m)
	}

	done := &airlockv1.Event{AgentId: "bot", CallId: id, Revision: 1,
		Body: &airlockv1.Event_Completed{Completed: &airlockv1.Completed{ResultJson: `"after failover"`, Claim: "first"}}}
	for {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := pub.PublishAfter(pctx, done, "", ledger, firstSeq)
		pcancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("publishing not possible 30s after losing a node: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case o := <-got:
		if o.Status != airlock.StatusCompleted || string(o.Result) != `"after failover"` {
			t.Fatalf("outcome %+v", o)
		}
	case <-ctx.Done():
		t.Fatal("Await did not return after the stream leader was killed")
	}
}
