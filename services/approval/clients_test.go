package approval_test

import (
	"context"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/clientwait"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestCardsAreRedrawnWhenAnMCPClientComesOrGoes: when the gateway records
// that a pending call's client started, stopped or resumed waiting, every
// channel that announced the call and draws that line (a notify.Redrawer)
// redraws its message; a renewal that changes nothing, and a decided call,
// redraw nothing. A channel that is not a Redrawer is told nothing (its
// Update is the outcome), and no redraw is recorded as `notified`.
func TestCardsAreRedrawnWhenAnMCPClientComesOrGoes(t *testing.T) {
	w := newWorld(t)
	rec := redrawer{&recorder{name: "rec"}}
	mail := &recorder{name: "mail"}
	w.start(rec, mail)
	ctx := context.Background()
	clients, err := clientwait.Open(ctx, w.deps.JS, w.cfg.Buckets.ClientWaits)
	if err != nil {
		t.Fatal(err)
	}
	w.pending(&airlockv1.ToolCall{CallId: "waited"}, &airlockv1.Decision{Approvers: []string{"group:reviewers"}})
	// A change of the client's presence redraws the messages the record
	// names: wait until the announcement's reference is stored (it is
	// written a moment after the channel answers, batched).
	testenv.Eventually(t, 10*time.Second, "the call's announcement to be recorded", func() bool {
		r, err := w.api.Get(ctx, "bot", "waited", 0)
		return err == nil && rec.has("announce:waited") && len(r.GetNotifications()) > 0
	})
	hold := func(until time.Time) {
		t.Helper()
		if err := clients.Lease("bot", "waited", "").Hold(ctx, clientwait.Presence{Endpoint: "claude", Until: until}); err != nil {
			t.Fatal(err)
		}
	}
	redrawn := func(n int, what string) {
		t.Helper()
		testenv.Eventually(t, 10*time.Second, what, func() bool {
			return len(rec.seenOf("redraw:waited:APPROVAL_STATE_PENDING")) >= n
		})
		if got := len(rec.seenOf("redraw:waited:APPROVAL_STATE_PENDING")); got != n {
			t.Fatalf("%s: the card was redrawn %d times, want %d", what, got, n)
		}
	}
	hold(time.Now().Add(time.Minute))
	redrawn(1, "the card to be redrawn when the client starts waiting")
	hold(time.Now().Add(2 * time.Minute)) // a renewal: still waiting
	hold(time.Now())                      // the client stopped waiting
	redrawn(2, "the card to be redrawn once when the client stops waiting, not at the renewal")
	hold(time.Now().Add(time.Minute)) // it called again
	redrawn(3, "the card to be redrawn when the client waits again")

	if _, err := w.approve("waited", "alice"); err != nil {
		t.Fatal(err)
	}
	w.waitState("waited", 1, airlockv1.ApprovalState_APPROVAL_STATE_APPROVED)
	hold(time.Now())
	// A later pending call's redraw shows the follower has handled the
	// decided call's change (changes are handled in order).
	w.pending(&airlockv1.ToolCall{CallId: "later"}, &airlockv1.Decision{Approvers: []string{"group:reviewers"}})
	testenv.Eventually(t, 10*time.Second, "the later call's announcement to be recorded", func() bool {
		r, err := w.api.Get(ctx, "bot", "later", 0)
		return err == nil && rec.has("announce:later") && len(r.GetNotifications()) > 0
	})
	if err := clients.Lease("bot", "later", "").Hold(ctx, clientwait.Presence{Endpoint: "claude", Until: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the later call's card to be redrawn", func() bool {
		return rec.has("redraw:later:APPROVAL_STATE_PENDING")
	})
	if got := len(rec.seenOf("redraw:waited:APPROVAL_STATE_PENDING")); got != 3 {
		t.Fatalf("the decided call's card was redrawn as pending %d times, want 3", got)
	}
	for _, c := range []string{"waited", "later"} {
		if got := mail.seenOf("update:" + c + ":APPROVAL_STATE_PENDING"); len(got) > 0 {
			t.Errorf("a channel that draws no client line was sent %d updates of call %s, still pending", len(got), c)
		}
	}
}
