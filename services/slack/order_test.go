package slack

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/calls"
	slackgo "github.com/slack-go/slack"
)

// The tests run in a synctest bubble: its clock is fake, so a wait of an
// hour takes no time yet shows on the clock, and synctest.Wait returns once
// every goroutine of the test is blocked (waiting to send, or to retry).

func orderAPI(base time.Duration) *api {
	return &api{retry: Retry{Attempts: 5, Base: base, Max: base}, log: slog.New(slog.DiscardHandler)}
}

func TestAnOlderCardUpdateIsDroppedOnceANewerOneBegins(t *testing.T) {
	t.Parallel()
	unavailable := slackgo.StatusCodeError{Code: http.StatusServiceUnavailable, Status: "503 Service Unavailable"}
	for _, tt := range []struct {
		name  string
		base  time.Duration // backoff after a transient error
		first error         // what Slack answers the first attempt
		wait  time.Duration // what that answer asks the update to wait before retrying
		newer bool          // a newer update of the message begins during that wait
		want  error         // what the first update returns
		sends int           // attempts of the first update that reached Slack
	}{
		{"an_older_update_waiting_out_a_backoff_is_woken_and_dropped", time.Hour, unavailable, time.Hour, true, errSuperseded, 1},
		{"an_older_update_waiting_out_a_retry_after_is_woken_and_dropped", time.Millisecond, &slackgo.RateLimitedError{RetryAfter: time.Hour}, time.Hour, true, errSuperseded, 1},
		{"an_update_with_no_newer_one_retries_after_a_backoff_as_before", time.Minute, unavailable, time.Minute, false, nil, 2},
		{"an_update_with_no_newer_one_retries_after_a_retry_after_as_before", time.Millisecond, &slackgo.RateLimitedError{RetryAfter: time.Minute}, time.Minute, false, nil, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, order := orderAPI(tt.base), newCardOrder(0)
				sends := 0
				start := time.Now()
				old := order.begin("C1/1.1", 1)
				done := make(chan error, 1)
				go func() {
					defer order.end(old)
					done <- a.inTurn(t.Context(), old, "update", func(context.Context) error {
						if sends++; sends == 1 {
							return tt.first
						}
						return nil
					})
				}()
				synctest.Wait() // the first attempt was answered; the update waits to retry
				if tt.newer {
					newer := order.begin("C1/1.1", 1)
					defer order.end(newer)
				}
				err := <-done
				took := time.Since(start)
				if !errors.Is(err, tt.want) {
					t.Fatalf("the first update returned %v, want %v", err, tt.want)
				}
				if sends != tt.sends {
					t.Fatalf("the first update was sent %d times, want %d", sends, tt.sends)
				}
				switch {
				case tt.newer && took != 0:
					t.Fatalf("the superseded update returned after %s: it slept out its wait instead of being woken", took)
				case !tt.newer && took < tt.wait:
					t.Fatalf("the update was retried after %s, before its wait of %s", took, tt.wait)
				}
			})
		})
	}
}

func TestUpdatesOfOneCardAreSentOneAtATimeInOrder(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a, order := orderAPI(time.Millisecond), newCardOrder(0)
		var sent []string
		answer := make(chan struct{})
		run := func(key, name string, f func()) <-chan error {
			tu := order.begin(key, 1)
			done := make(chan error, 1)
			go func() {
				defer order.end(tu)
				done <- a.inTurn(t.Context(), tu, name, func(context.Context) error {
					sent = append(sent, name)
					f()
					return nil
				})
			}()
			return done
		}
		sentSoFar := func(want ...string) {
			t.Helper()
			synctest.Wait()
			if !slices.Equal(sent, want) {
				t.Fatalf("sent %q so far, want %q", sent, want)
			}
		}

		approved := run("C1/1.1", "approved", func() { <-answer })
		sentSoFar("approved")
		// While "approved" is in flight (Slack has not answered), "running"
		// waits to be sent; "completed" then supersedes it before it is.
		running := run("C1/1.1", "running", func() {})
		sentSoFar("approved")
		completed := run("C1/1.1", "completed", func() {})
		if err := <-running; !errors.Is(err, errSuperseded) {
			t.Fatalf("the update superseded while it waited to be sent returned %v, want errSuperseded", err)
		}
		sentSoFar("approved")
		// Another message's update never waits for this one's.
		if err := <-run("C2/2.2", "other card", func() {}); err != nil {
			t.Fatal(err)
		}
		sentSoFar("approved", "other card")
		// "approved" was sent before "completed" began: it is not dropped,
		// and "completed" is sent once Slack has answered it.
		close(answer)
		if err := <-approved; err != nil {
			t.Fatalf("the update in flight returned %v", err)
		}
		if err := <-completed; err != nil {
			t.Fatal(err)
		}
		sentSoFar("approved", "other card", "completed")
		if n := len(order.lines); n != 0 {
			t.Fatalf("%d messages still have an entry with no update in flight", n)
		}
	})
}

func TestACardsEntryLastsOnlyWhileAnUpdateOfItIsInFlight(t *testing.T) {
	t.Parallel()
	order := newCardOrder(0)
	entries := func() int {
		order.mu.Lock()
		defer order.mu.Unlock()
		return len(order.lines)
	}
	for _, tt := range []struct {
		name  string
		steps func() []int // entries after each step
		want  []int
	}{
		{"one_update_leaves_nothing_behind", func() []int {
			u := order.begin("C1/1", 1)
			n := entries()
			order.end(u)
			return []int{n, entries()}
		}, []int{1, 0}},
		{"the_entry_stays_until_the_last_of_its_updates_ends", func() []int {
			older, newer := order.begin("C1/1", 1), order.begin("C1/1", 1)
			order.end(newer)
			n := entries()
			order.end(older)
			return []int{n, entries()}
		}, []int{1, 0}},
		{"each_message_has_its_own_entry", func() []int {
			x, y := order.begin("C1/1", 1), order.begin("C2/2", 1)
			n := entries()
			order.end(x)
			order.end(y)
			return []int{n, entries()}
		}, []int{2, 0}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.steps(); !slices.Equal(got, tt.want) {
				t.Fatalf("entries %v, want %v", got, tt.want)
			}
		})
	}
}

// An update of a card drawn of an earlier state than one already in flight
// is stale from the start and leaves the later one standing (the updates
// reach the notifier several goroutines after their states were stored,
// so "approved" may begin after "approved, completed"); a state of the
// same stage or a later one supersedes as before.
func TestAnUpdateOfAnEarlierStateNeverSupersedesALaterOne(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name                    string
		first, second           airlockv1.ApprovalState
		firstStale, secondStale bool
	}{
		{"approved_after_completed_is_dropped", airlockv1.ApprovalState_APPROVAL_STATE_COMPLETED, airlockv1.ApprovalState_APPROVAL_STATE_APPROVED, false, true},
		{"pending_after_rejected_is_dropped", airlockv1.ApprovalState_APPROVAL_STATE_REJECTED, airlockv1.ApprovalState_APPROVAL_STATE_PENDING, false, true},
		{"running_after_approved_supersedes_it", airlockv1.ApprovalState_APPROVAL_STATE_APPROVED, airlockv1.ApprovalState_APPROVAL_STATE_EXECUTING, true, false},
		{"pending_after_pending_supersedes_it", airlockv1.ApprovalState_APPROVAL_STATE_PENDING, airlockv1.ApprovalState_APPROVAL_STATE_PENDING, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			order := newCardOrder(0)
			first := order.begin("C1/1", calls.Stage(tt.first))
			second := order.begin("C1/1", calls.Stage(tt.second))
			if stale(first) != tt.firstStale || stale(second) != tt.secondStale {
				t.Fatalf("%s then %s: stale %v, %v; want %v, %v", tt.first, tt.second, stale(first), stale(second), tt.firstStale, tt.secondStale)
			}
			order.end(second)
			order.end(first)
			if len(order.lines) != 0 {
				t.Fatalf("%d entries left with no update in flight", len(order.lines))
			}
		})
	}
}

// A message's newest stage is remembered for linger after its last update
// ended: an update of an earlier state that reaches the notifier late (a
// pending card's redraw read just before the decision) is still refused;
// after linger the entry is gone.
func TestACardsNewestStageLingersAfterItsLastUpdate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		order := newCardOrder(time.Minute)
		decided := order.begin("C1/1", calls.Stage(airlockv1.ApprovalState_APPROVAL_STATE_APPROVED))
		order.end(decided)
		time.Sleep(30 * time.Second)
		late := order.begin("C1/1", calls.Stage(airlockv1.ApprovalState_APPROVAL_STATE_PENDING))
		if !stale(late) {
			t.Fatal("a pending redraw begun 30s after the decision's update ended was not refused")
		}
		order.end(late)
		// 70s: the first end's linger is over, the late turn's is not.
		time.Sleep(40 * time.Second)
		later := order.begin("C1/1", calls.Stage(airlockv1.ApprovalState_APPROVAL_STATE_PENDING))
		if !stale(later) {
			t.Fatal("a pending redraw begun within a linger of the line's last update was not refused: an earlier update's timer removed the line")
		}
		order.end(later)
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		order.mu.Lock()
		n := len(order.lines)
		order.mu.Unlock()
		if n != 0 {
			t.Fatalf("%d entries left a linger after the last update ended", n)
		}
	})
}

// stale reports whether a newer update has superseded u.
func stale(u *turn) bool {
	select {
	case <-u.superseded():
		return true
	default:
		return false
	}
}
