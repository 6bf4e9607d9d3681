package approval_test

import (
	"context"
	"errors"
	"fmt"
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

// A redraw of a pending call's card (its MCP client came or went) that is
// on its way when the card's outcome is drawn — by another worker or
// another replica — must not leave the pending card, buttons and all, over
// the outcome. fanout.redraw reads the record of the card's own revision
// again once drawn, whether or not the redraw reported success, and draws
// the outcome over it. The agent drives each case: its client comes and
// goes at will, it withdraws or resubmits its own call.
func TestARedrawOnItsWayLeavesTheOutcomeOnTheCard(t *testing.T) {
	approve := func(t *testing.T, w *world) {
		if _, err := w.approve("c", "alice"); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		// failFirst: the redraw is applied but reported as failed (its
		// answer lost, or past the fanout's timeout).
		failFirst bool
		decide    func(t *testing.T, w *world)
		// want is the outcome the card must end on ("": any but pending).
		want string
	}{
		{"the_call_is_decided", false, approve, "r1:APPROVAL_STATE_APPROVED"},
		// The agent submits revision 2, which supersedes revision 1; a check
		// of the call's newest revision (pending) would draw nothing.
		{"a_new_revision_supersedes_the_cards", false, func(t *testing.T, w *world) {
			w.pending(&airlockv1.ToolCall{CallId: "c", Revision: 2}, &airlockv1.Decision{Approvers: []string{"group:reviewers"}})
		}, ""},
		{"the_redraw_reports_failure_after_landing", true, approve, "r1:APPROVAL_STATE_APPROVED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			cards := &revCards{drawn: map[string]string{}, entered: make(chan struct{}), release: make(chan struct{}), failFirst: tc.failFirst}
			w.start(cards)
			ctx := context.Background()
			clients, err := clientwait.Open(ctx, w.deps.JS, w.cfg.Buckets.ClientWaits)
			if err != nil {
				t.Fatal(err)
			}
			const card, pending = "c@r1", "r1:APPROVAL_STATE_PENDING"
			w.pending(&airlockv1.ToolCall{CallId: "c", Revision: 1}, &airlockv1.Decision{Approvers: []string{"group:reviewers"}})
			testenv.Eventually(t, 10*time.Second, "the announcement to be recorded", func() bool {
				r, err := w.api.Get(ctx, "bot", "c", 1)
				return err == nil && cards.shows(card) != "" && len(r.GetNotifications()) > 0
			})
			// The client starts waiting: a redraw of the card is on its way.
			if err := clients.Lease("bot", "c", "").Hold(ctx, clientwait.Presence{Endpoint: "claude", Until: time.Now().Add(time.Minute)}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-cards.entered:
			case <-time.After(10 * time.Second):
				t.Fatal("the card was not redrawn when the client started waiting")
			}
			tc.decide(t, w)
			testenv.Eventually(t, 10*time.Second, "the card's outcome to be drawn while the redraw is on its way", func() bool {
				return cards.shows(card) != pending
			})
			outcome := cards.shows(card)
			if tc.want != "" && outcome != tc.want {
				t.Fatalf("the card's outcome is %s, want %s", outcome, tc.want)
			}
			close(cards.release)
			testenv.Eventually(t, 10*time.Second, "the redraw to land", func() bool { return cards.redraws() > 0 })
			testenv.Eventually(t, 10*time.Second, "the card to end showing its outcome "+outcome+", not a pending card with buttons", func() bool {
				return cards.shows(card) == outcome
			})
		})
	}
}
