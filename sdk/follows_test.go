package airlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestFollowsShareOneSubscriptionPerAgent: every follow of an agent's
// calls on a connection shares one subscription, held while any follow
// is open; each follow gets its own call's messages alone, and a second
// stop changes nothing.
func TestFollowsShareOneSubscriptionPerAgent(t *testing.T) {
	n := startNATS(t)
	nc, _ := testenv.Connect(t, n.URL())
	pub, _ := testenv.Connect(t, n.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f := airlock.NewFollows(nc)
	follow := func(agent, call string) (chan *nats.Msg, func()) {
		t.Helper()
		live, stop, err := f.Follow(ctx, agent, call, 4)
		if err != nil {
			t.Fatal(err)
		}
		return live, stop
	}
	first, stopFirst := follow("bot", "c1")
	second, stopSecond := follow("bot", "c1")
	other, stopOther := follow("bot", "c2")
	eve, stopEve := follow("eve", "c1")
	if got := nc.NumSubscriptions(); got != 2 {
		t.Fatalf("four follows of two agents' calls hold %d subscriptions, want 2 (one an agent)", got)
	}
	publish := func(subj string) {
		t.Helper()
		if err := pub.Publish(subj, []byte(subj)); err != nil {
			t.Fatal(err)
		}
		if err := pub.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	receive := func(name string, live chan *nats.Msg, want string) {
		t.Helper()
		select {
		case m := <-live:
			if m.Subject != want {
				t.Fatalf("follow %s got %s, want %s", name, m.Subject, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("follow %s got nothing, want %s", name, want)
		}
	}
	publish("airlock.out.bot.c1.completed")
	publish("airlock.out.bot.c2.completed")
	publish("airlock.out.eve.c1.completed")
	receive("bot/c1 (first)", first, "airlock.out.bot.c1.completed")
	receive("bot/c1 (second)", second, "airlock.out.bot.c1.completed")
	receive("bot/c2", other, "airlock.out.bot.c2.completed")
	receive("eve/c1", eve, "airlock.out.eve.c1.completed")

	stopFirst()
	stopFirst() // a second stop changes nothing
	publish("airlock.out.bot.c1.failed")
	receive("bot/c1 (second)", second, "airlock.out.bot.c1.failed")
	for name, live := range map[string]chan *nats.Msg{"bot/c1 (stopped)": first, "bot/c2": other, "eve/c1": eve} {
		if len(live) != 0 {
			t.Errorf("follow %s got %s, meant for another call or after its stop", name, (<-live).Subject)
		}
	}
	stopSecond()
	stopOther()
	if got := nc.NumSubscriptions(); got != 1 {
		t.Fatalf("with only eve's call followed, %d subscriptions are held, want 1", got)
	}
	stopEve()
	if got := nc.NumSubscriptions(); got != 0 {
		t.Fatalf("with no call followed, %d subscriptions are held, want none", got)
	}
}
