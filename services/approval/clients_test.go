package approval_test

import (
	"context"
	"errors"
	"fmt"
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

// revCards is a chat channel whose every message is its own card: the
// reference names the revision announced, and drawn holds what each card
// shows last ("r<rev>:<state>" of the record drawn on it). Its first Redraw
// waits, once entered, until released: a redraw on its way.
type revCards struct {
	mu               sync.Mutex
	drawn            map[string]string
	entered, release chan struct{}
	once             sync.Once
	// failFirst: the first Redraw is applied by the chat service but
	// reported as failed (its answer lost, or past the fanout's timeout).
	failFirst bool
	// landed counts the redraws drawn.
	landed int
}

func (c *revCards) Name() string                         { return "cards" }
func (c *revCards) Wants(*airlockv1.ApprovalRecord) bool { return true }
func (c *revCards) draw(ref string, rec *airlockv1.ApprovalRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drawn[ref] = fmt.Sprintf("r%d:%s", rec.GetCall().GetRevision(), rec.GetState())
}
func (c *revCards) redraws() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.landed
}
func (c *revCards) shows(ref string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.drawn[ref]
}
func (c *revCards) Announce(_ context.Context, rec *airlockv1.ApprovalRecord) (string, error) {
	ref := fmt.Sprintf("%s@r%d", rec.GetCall().GetCallId(), rec.GetCall().GetRevision())
	c.draw(ref, rec)
	return ref, nil
}
func (c *revCards) Remind(context.Context, *airlockv1.ApprovalRecord, string) error { return nil }
func (c *revCards) Update(_ context.Context, rec *airlockv1.ApprovalRecord, ref string) error {
	c.draw(ref, rec)
	return nil
}
func (c *revCards) Redraw(ctx context.Context, rec *airlockv1.ApprovalRecord, ref string) error {
	first := false
	c.once.Do(func() {
		first = true
		close(c.entered)
		select {
		case <-c.release:
		case <-ctx.Done():
		}
	})
	c.draw(ref, rec)
	c.mu.Lock()
	c.landed++
	c.mu.Unlock()
	if first && c.failFirst {
		return errors.New("chat service: request timed out (it was applied)")
	}
	return nil
}

// fanout.redraw reads again the record of the revision whose card it
// redraws, not the call's newest revision. An agent that makes its
// MCP client come or go (a redraw of revision 1's card on its way) and then
// submits revision 2 of the same call supersedes revision 1; its outcome is
// drawn on revision 1's card, and then the redraw lands revision 1's
// pending card, buttons and all, over it. The check after the redraw reads
// revision 2, pending, and draws nothing: revision 1's card stays pending
// over a superseded revision for good, had the check read revision 2. What
// must hold: revision 1's card ends showing revision 1's outcome.
func TestARedrawOnItsWayWhenANewRevisionArrivesLeavesTheOldCardsOutcome(t *testing.T) {
	w := newWorld(t)
	cards := &revCards{drawn: map[string]string{}, entered: make(chan struct{}), release: make(chan struct{})}
	w.start(cards)
	ctx := context.Background()
	clients, err := clientwait.Open(ctx, w.deps.JS, w.cfg.Buckets.ClientWaits)
	if err != nil {
		t.Fatal(err)
	}
	const card1, card2 = "rv@r1", "rv@r2"
	w.pending(&airlockv1.ToolCall{CallId: "rv", Revision: 1}, &airlockv1.Decision{Approvers: []string{"group:reviewers"}})
	testenv.Eventually(t, 10*time.Second, "revision 1's announcement to be recorded", func() bool {
		r, err := w.api.Get(ctx, "bot", "rv", 1)
		return err == nil && cards.shows(card1) != "" && len(r.GetNotifications()) > 0
	})
	// The agent's client starts waiting: a redraw of revision 1's card is on its way.
	if err := clients.Lease("bot", "rv", "").Hold(ctx, clientwait.Presence{Endpoint: "claude", Until: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cards.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the card was not redrawn when the client started waiting")
	}
	// The agent submits revision 2: revision 1 is superseded, its outcome drawn.
	w.pending(&airlockv1.ToolCall{CallId: "rv", Revision: 2}, &airlockv1.Decision{Approvers: []string{"group:reviewers"}})
	testenv.Eventually(t, 10*time.Second, "revision 1's outcome to be drawn and revision 2 announced", func() bool {
		return cards.shows(card1) != "r1:APPROVAL_STATE_PENDING" && cards.shows(card2) != ""
	})
	outcome := cards.shows(card1)
	close(cards.release)
	testenv.Eventually(t, 10*time.Second, "the redraw to land", func() bool { return cards.redraws() > 0 })
	testenv.Eventually(t, 10*time.Second, "revision 1's card to end showing its outcome "+outcome+", not a pending card with buttons", func() bool {
		return cards.shows(card1) == outcome
	})
}

// The check after a redraw runs whether or not the redraw reports success. A redraw the chat service applied but whose answer was
// lost or came past the fanout's timeout (an error) while the call was
// decided and its outcome drawn leaves the pending card, buttons and all,
// over the outcome: the very interleaving the commit closes, through the
// error path. The agent can time the decision itself (it withdraws its own
// call) and make redraws at will (its MCP client comes and goes).
// What must hold: the card ends showing the outcome.
func TestARedrawThatFailsAfterLandingLeavesTheOutcome(t *testing.T) {
	w := newWorld(t)
	cards := &revCards{drawn: map[string]string{}, entered: make(chan struct{}), release: make(chan struct{}), failFirst: true}
	w.start(cards)
	ctx := context.Background()
	clients, err := clientwait.Open(ctx, w.deps.JS, w.cfg.Buckets.ClientWaits)
	if err != nil {
		t.Fatal(err)
	}
	const card = "rf@r1"
	w.pending(&airlockv1.ToolCall{CallId: "rf"}, &airlockv1.Decision{Approvers: []string{"group:reviewers"}})
	testenv.Eventually(t, 10*time.Second, "the announcement to be recorded", func() bool {
		r, err := w.api.Get(ctx, "bot", "rf", 1)
		return err == nil && cards.shows(card) != "" && len(r.GetNotifications()) > 0
	})
	if err := clients.Lease("bot", "rf", "").Hold(ctx, clientwait.Presence{Endpoint: "claude", Until: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cards.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the card was not redrawn when the client started waiting")
	}
	if _, err := w.approve("rf", "alice"); err != nil {
		t.Fatal(err)
	}
	const outcome = "r1:APPROVAL_STATE_APPROVED"
	testenv.Eventually(t, 10*time.Second, "the outcome to be drawn", func() bool { return cards.shows(card) == outcome })
	close(cards.release)
	testenv.Eventually(t, 10*time.Second, "the redraw to land", func() bool { return cards.redraws() > 0 })
	testenv.Eventually(t, 10*time.Second, "the card to end showing the outcome after a redraw that reported failure", func() bool {
		return cards.shows(card) == outcome
	})
}
