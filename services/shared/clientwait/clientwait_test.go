package clientwait_test

import (
	"context"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/clientwait"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

func TestStore(t *testing.T) {
	n := testenv.StartNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	ctx := context.Background()
	s, err := clientwait.Open(ctx, deps.JS, deps.Config.Buckets.ClientWaits)
	if err != nil {
		t.Fatal(err)
	}
	key := "r.somecall"

	t.Run("an_outcome_is_delivered_once", func(t *testing.T) {
		if err := s.Remember(ctx, key, clientwait.Rejoin{Call: "c1", Revision: 1}); err != nil {
			t.Fatal(err)
		}
		first, ok, err := s.Find(ctx, key)
		if err != nil || !ok || first.Call != "c1" {
			t.Fatalf("find: %+v %v %v", first, ok, err)
		}
		second, _, _ := s.Find(ctx, key) // a simultaneous identical request
		if won, err := s.Deliver(ctx, key, first); err != nil || !won {
			t.Fatalf("the first delivery: won=%v err=%v", won, err)
		}
		if won, err := s.Deliver(ctx, key, second); err != nil || won {
			t.Fatalf("the second delivery of the same entry: won=%v err=%v", won, err)
		}
		if _, ok, _ := s.Find(ctx, key); ok {
			t.Fatal("the entry outlived its delivery: a third identical call would rejoin")
		}
	})

	t.Run("a_late_delivery_leaves_a_newer_entry_alone", func(t *testing.T) {
		_ = s.Remember(ctx, key, clientwait.Rejoin{Call: "c2", Revision: 1})
		old, _, _ := s.Find(ctx, key)
		_ = s.Remember(ctx, key, clientwait.Rejoin{Call: "c3", Revision: 1})
		if won, err := s.Deliver(ctx, key, old); err != nil || won {
			t.Fatalf("a stale delivery: won=%v err=%v", won, err)
		}
		if r, ok, _ := s.Find(ctx, key); !ok || r.Call != "c3" {
			t.Fatalf("the newer entry is gone: %+v %v", r, ok)
		}
	})

	t.Run("presence_says_whether_a_client_waits_and_lists_those_nobody_waits_for", func(t *testing.T) {
		now := time.Now()
		_ = s.Hold(ctx, "agent", "waited", clientwait.Presence{Endpoint: "bot", Until: now.Add(time.Minute)})
		_ = s.Hold(ctx, "agent", "left", clientwait.Presence{Endpoint: "bot", Until: now.Add(-time.Minute)})
		_ = s.Hold(ctx, "agent", "elsewhere", clientwait.Presence{Endpoint: "other", Until: now.Add(-time.Minute)})
		p, ok, err := s.PresenceOf(ctx, "agent", "waited")
		if err != nil || !ok || !p.Waiting(now) {
			t.Fatalf("presence of a waited call: %+v %v %v", p, ok, err)
		}
		gone, err := s.Absent(ctx, "bot", now)
		if err != nil || len(gone) != 1 || gone[0].Call != "left" || gone[0].Agent != "agent" {
			t.Fatalf("absent: %+v %v", gone, err)
		}
		if err := s.Forget(ctx, "agent", "left"); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := s.PresenceOf(ctx, "agent", "left"); ok {
			t.Fatal("a forgotten presence is still there")
		}
	})
}
