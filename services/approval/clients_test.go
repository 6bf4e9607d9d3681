package approval_test

import (
	"context"
	"strings"
	"sync"
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

// slowRedrawer is a redrawer whose first Redraw waits, once entered, until
// released: a redraw on its way while the call is decided.
type slowRedrawer struct {
	redrawer
	entered, release chan struct{}
	once             *sync.Once
}

func (r slowRedrawer) Redraw(ctx context.Context, rec *airlockv1.ApprovalRecord, ref string) error {
	r.once.Do(func() {
		close(r.entered)
		select {
		case <-r.release:
		case <-ctx.Done():
		}
	})
	return r.redrawer.Redraw(ctx, rec, ref)
}

// A redraw of a pending call's card that is on its way when the call is
// decided, its outcome drawn meanwhile (by another worker, or another
// replica), must not leave the pending card — buttons and all — over the
// outcome: the card ends showing the outcome.
func TestARedrawOnItsWayWhenTheCallIsDecidedLeavesTheOutcome(t *testing.T) {
	w := newWorld(t)
	card := slowRedrawer{redrawer{&recorder{name: "card"}}, make(chan struct{}), make(chan struct{}), &sync.Once{}}
	w.start(card)
	ctx := context.Background()
	clients, err := clientwait.Open(ctx, w.deps.JS, w.cfg.Buckets.ClientWaits)
	if err != nil {
		t.Fatal(err)
	}
	w.pending(&airlockv1.ToolCall{CallId: "raced"}, &airlockv1.Decision{Approvers: []string{"group:reviewers"}})
	testenv.Eventually(t, 10*time.Second, "the call's announcement to be recorded", func() bool {
		r, err := w.api.Get(ctx, "bot", "raced", 0)
		return err == nil && card.has("announce:raced") && len(r.GetNotifications()) > 0
	})
	if err := clients.Lease("bot", "raced", "").Hold(ctx, clientwait.Presence{Endpoint: "claude", Until: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-card.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the card was not redrawn when the client started waiting")
	}
	if _, err := w.approve("raced", "alice"); err != nil {
		t.Fatal(err)
	}
	const outcome = "update:raced:APPROVAL_STATE_APPROVED"
	testenv.Eventually(t, 10*time.Second, "the outcome to be drawn while the redraw is on its way", func() bool { return card.has(outcome) })
	close(card.release)
	last := func() string {
		card.mu.Lock()
		defer card.mu.Unlock()
		for i := len(card.seen) - 1; i >= 0; i-- {
			if s := card.seen[i]; strings.HasPrefix(s, "redraw:raced:") || strings.HasPrefix(s, "update:raced:") {
				return s
			}
		}
		return ""
	}
	testenv.Eventually(t, 10*time.Second, "the redraw to land", func() bool { return card.has("redraw:raced:APPROVAL_STATE_PENDING") })
	testenv.Eventually(t, 10*time.Second, "the card to end showing the outcome", func() bool { return last() == outcome })
}
