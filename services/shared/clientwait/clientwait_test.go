package clientwait_test

import (
	"context"
	"errors"
	"fmt"
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
	v := s.Rejoins()

	t.Run("an_outcome_is_delivered_once", func(t *testing.T) {
		if _, err := v.Join(ctx, key, clientwait.Rejoin{Call: "c1", Revision: 1}); err != nil {
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
		old, err := v.Join(ctx, key, clientwait.Rejoin{Call: "c2", Revision: 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Join(ctx, key, clientwait.Rejoin{Call: "c3", Revision: 1}); err != nil {
			t.Fatal(err)
		}
		if won, err := s.Deliver(ctx, key, old); err != nil || won {
			t.Fatalf("a stale delivery: won=%v err=%v", won, err)
		}
		if r, ok, _ := s.Find(ctx, key); !ok || r.Call != "c3" {
			t.Fatalf("the newer entry is gone: %+v %v", r, ok)
		}
	})

	t.Run("presence_says_whether_a_client_waits_and_lists_those_nobody_waits_for", func(t *testing.T) {
		now := time.Now()
		holdFor(ctx, t, s, "agent", "waited", "", clientwait.Presence{Endpoint: "bot", Until: now.Add(time.Minute)})
		holdFor(ctx, t, s, "agent", "left", "", clientwait.Presence{Endpoint: "bot", Until: now.Add(-time.Minute)})
		holdFor(ctx, t, s, "agent", "elsewhere", "", clientwait.Presence{Endpoint: "other", Until: now.Add(-time.Minute)})
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

	t.Run("one_waiter_stopping_leaves_another_waiting", func(t *testing.T) {
		now := time.Now()
		if err := s.Lease("agent", "shared", "a").Hold(ctx, clientwait.Presence{Endpoint: "bot", Until: now.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Lease("agent", "shared", "b").Hold(ctx, clientwait.Presence{Endpoint: "bot", Until: now.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Lease("agent", "shared", "b").Hold(ctx, clientwait.Presence{Endpoint: "bot", Until: now}); err != nil {
			t.Fatal(err)
		}
		if p, ok, err := s.PresenceOf(ctx, "agent", "shared"); err != nil || !ok || !p.Waiting(now) {
			t.Fatalf("after one of two waiters stopped: %+v %v %v, want waiting", p, ok, err)
		}
		// Its lease runs a minute: the look waits for it, until it gives up.
		wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		if free, err := s.Unattended(wctx, "agent", "shared", "bot", time.Hour); err == nil && free {
			t.Fatal("a call one request still renews was reported unattended")
		} else if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
	})

	t.Run("a_call_is_unattended_once_every_lease_ran_out_recently", func(t *testing.T) {
		now := time.Now()
		holdFor(ctx, t, s, "agent", "lapsing", "gone", clientwait.Presence{Endpoint: "bot", Until: now.Add(300 * time.Millisecond)})
		holdFor(ctx, t, s, "agent", "lapsing", "stopped", clientwait.Presence{Endpoint: "bot", Until: now})
		holdFor(ctx, t, s, "agent", "long-ago", "", clientwait.Presence{Endpoint: "bot", Until: now.Add(-2 * time.Hour)})
		for _, tt := range []struct {
			call, endpoint string
			want           bool
		}{
			{"lapsing", "bot", true},    // after its last lease runs out
			{"lapsing", "other", false}, // another endpoint's call
			{"long-ago", "bot", false},  // its session would have timed out
			{"never", "bot", false},     // no client ever waited past a heartbeat
		} {
			if free, err := s.Unattended(ctx, "agent", tt.call, tt.endpoint, time.Hour); err != nil || free != tt.want {
				t.Errorf("Unattended(%s, %s) = %v, %v; want %v", tt.call, tt.endpoint, free, err, tt.want)
			}
		}
	})

	t.Run("an_outcome_is_claimed_by_one_session", func(t *testing.T) {
		for _, tt := range []struct {
			owner string
			want  bool
		}{{"r.first", true}, {"r.first", true}, {"r.second", false}, {"", false}} {
			if won, err := s.Claim(ctx, "agent", "claimed", tt.owner, time.Hour); err != nil || won != tt.want {
				t.Errorf("Claim by %q = %v, %v; want %v", tt.owner, won, err, tt.want)
			}
		}
	})
}

// TestAClaimLivesAsLongAsItIsKept: a call's delivery claim holds for the
// time it was made for, and is gone once it ran out — removed by the
// server, so a gateway that died after claiming leaves nothing for long.
func TestAClaimLivesAsLongAsItIsKept(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := openStore(ctx, t)
	const keep = 2 * time.Second
	before := time.Now()
	if won, err := s.Claim(ctx, "agent", "kept", "r.first", keep); err != nil || !won {
		t.Fatalf("the first claim = %v, %v; want won", won, err)
	}
	// The first claim is kept until keep after before at the earliest: a
	// second claim answered before then must have lost. One answered later
	// (a loaded machine can take that long between the two) may have come
	// after the first ran out, and shows nothing.
	won, err := s.Claim(ctx, "agent", "kept", "r.second", keep)
	switch answered := time.Since(before); {
	case err != nil:
		t.Fatalf("another session's claim while the first is kept: %v", err)
	case won && answered < keep:
		t.Fatalf("another session's claim %s after the first, kept %s, won it", answered, keep)
	case won:
		t.Logf("another session's claim was answered %s after the first, kept %s: it may have come after the first ran out, and won", answered, keep)
	}
	testenv.Eventually(t, 30*time.Second, "the claim to run out", func() bool {
		claimed, err := s.Claimed(ctx, "agent", "kept")
		if err != nil {
			t.Fatal(err)
		}
		if !claimed && time.Since(before) < keep {
			t.Fatalf("the claim kept %s was gone %s after it was made", keep, time.Since(before))
		}
		return !claimed
	})
	if won, err := s.Claim(ctx, "agent", "kept", "r.second", keep); err != nil || !won {
		t.Fatalf("a claim once the first ran out = %v, %v; want won", won, err)
	}
}

// TestAnOfferIsRevisedOnlyWhileItIsTheCallsOwn: a call's offer rewritten
// for a new revision leaves an identical call's offer written since.
func TestAnOfferIsRevisedOnlyWhileItIsTheCallsOwn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := openStore(ctx, t)
	const key = clientwait.OfferPrefix + "offer"
	first, err := s.Join(ctx, key, clientwait.Rejoin{Call: "old", Revision: 1})
	if err != nil {
		t.Fatal(err)
	}
	revised, replaced, err := s.Update(ctx, key, first, clientwait.Rejoin{Call: "old", Revision: 2})
	if err != nil || !replaced {
		t.Fatalf("the call's own offer was not revised: %v %v", replaced, err)
	}
	if _, err := s.Join(ctx, key, clientwait.Rejoin{Call: "newer", Revision: 1}); err != nil {
		t.Fatal(err)
	}
	if _, replaced, err := s.Update(ctx, key, revised, clientwait.Rejoin{Call: "old", Revision: 3}); err != nil || replaced {
		t.Fatalf("a revision displaced an identical call's offer made since: %v %v", replaced, err)
	}
	if r, ok, err := s.Find(ctx, key); err != nil || !ok || r.Call != "newer" {
		t.Fatalf("the key offers %+v (%v, %v), want the newer call", r, ok, err)
	}
}

// TestARenewalEndsTheWaitForAnUnattendedCall: a lease renewed while a
// session waits for it to run out means a client waits.
func TestARenewalEndsTheWaitForAnUnattendedCall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := openStore(ctx, t)
	holdFor(ctx, t, s, "agent", "renewed", "a", clientwait.Presence{Endpoint: "bot", Until: time.Now().Add(time.Minute)})
	done := make(chan bool, 1)
	go func() {
		free, err := s.Unattended(ctx, "agent", "renewed", "bot", time.Hour)
		if err != nil {
			t.Error(err)
		}
		done <- free
	}()
	// Renewed until the wait ends (a renewal before the watch started is
	// part of what it read first).
	for {
		holdFor(ctx, t, s, "agent", "renewed", "a", clientwait.Presence{Endpoint: "bot", Until: time.Now().Add(time.Minute)})
		select {
		case free := <-done:
			if free {
				t.Fatal("a call whose lease was renewed was reported unattended")
			}
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestReleaseByTheCallsOwnRequest: the request that made a call, giving
// up, deletes its presence when no other request waits (a session waiting
// to adopt the call reads that as not free), and ends only its own lease
// when another does.
func TestReleaseByTheCallsOwnRequest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := openStore(ctx, t)
	now := time.Now()
	holdFor(ctx, t, s, "agent", "alone", "own", clientwait.Presence{Endpoint: "bot", Until: now.Add(time.Minute)})
	holdFor(ctx, t, s, "agent", "alone", "stopped", clientwait.Presence{Endpoint: "bot", Until: now})
	holdFor(ctx, t, s, "agent", "shared", "own", clientwait.Presence{Endpoint: "bot", Until: now.Add(time.Minute)})
	holdFor(ctx, t, s, "agent", "shared", "other", clientwait.Presence{Endpoint: "bot", Until: now.Add(time.Minute)})
	// A session deciding whether to adopt "alone" watches its lease.
	adoptable := make(chan bool, 1)
	go func() {
		free, err := s.Unattended(ctx, "agent", "alone", "bot", time.Hour)
		if err != nil {
			t.Error(err)
		}
		adoptable <- free
	}()
	for _, tt := range []struct {
		call      string
		wantAlone bool
		// wantWaiting: a client waits for the call afterwards.
		wantWaiting, wantPresence bool
	}{
		{"alone", true, false, false},
		{"shared", false, true, true},
		{"never", true, false, false},
	} {
		alone, err := s.Release(ctx, "agent", tt.call, "own", "bot", time.Now())
		if err != nil || alone != tt.wantAlone {
			t.Errorf("Release(%s) = %v, %v; want %v", tt.call, alone, err, tt.wantAlone)
		}
		p, ok, err := s.PresenceOf(ctx, "agent", tt.call)
		if err != nil || ok != tt.wantPresence || p.Waiting(time.Now()) != tt.wantWaiting {
			t.Errorf("after Release(%s) the presence is %+v (%v, %v); want present %v, waiting %v", tt.call, p, ok, err, tt.wantPresence, tt.wantWaiting)
		}
	}
	if <-adoptable {
		t.Error("a call released by its own request, which no other request waited for, was reported unattended: a session would adopt it as it is withdrawn")
	}
}

// TestTheWaitersOfACallAreBounded: a call's presence holds at most
// MaxWaiters running leases, however many requests wait for it; the ones
// already there are still renewed and ended.
func TestTheWaitersOfACallAreBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := openStore(ctx, t)
	lease := clientwait.Presence{Endpoint: "bot", Until: time.Now().Add(time.Minute)}
	refused := 0
	for i := range clientwait.MaxWaiters + 5 {
		err := s.Lease("agent", "busy", fmt.Sprintf("w%d", i)).Hold(ctx, lease)
		switch {
		case errors.Is(err, clientwait.ErrTooManyWaiters):
			refused++
		case err != nil:
			t.Fatal(err)
		}
	}
	p, _, err := s.PresenceOf(ctx, "agent", "busy")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Waiters) > clientwait.MaxWaiters || refused != 5 {
		t.Fatalf("%d requests waiting for one call left %d leases, %d refused; want at most %d, 5 refused", clientwait.MaxWaiters+5, len(p.Waiters), refused, clientwait.MaxWaiters)
	}
	holdFor(ctx, t, s, "agent", "busy", "w0", clientwait.Presence{Endpoint: "bot", Until: time.Now().Add(2 * time.Minute)}) // renewed
	holdFor(ctx, t, s, "agent", "busy", "w1", clientwait.Presence{Endpoint: "bot", Until: time.Now()})                      // ended
	holdFor(ctx, t, s, "agent", "busy", "late", lease)                                                                      // in w1's place
}

// holdFor holds waiter's lease on the call (Lease.Hold), which must
// succeed.
func holdFor(ctx context.Context, t *testing.T, s *clientwait.Store, agent, call, waiter string, p clientwait.Presence) {
	t.Helper()
	if err := s.Lease(agent, call, waiter).Hold(ctx, p); err != nil {
		t.Fatal(err)
	}
}

// openStore is the client-waits bucket of a NATS server of its own.
func openStore(ctx context.Context, t *testing.T) *clientwait.Store {
	t.Helper()
	n := testenv.StartNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	s, err := clientwait.Open(ctx, deps.JS, deps.Config.Buckets.ClientWaits)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
