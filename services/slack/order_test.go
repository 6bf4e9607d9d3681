package slack

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"testing"
	"time"

	slackgo "github.com/slack-go/slack"
)

// A wait nobody may sleep out in a test: an update that returns within
// guard was woken, not timed out.
const (
	longWait = time.Hour
	guard    = 10 * time.Second
)

func orderAPI(base time.Duration) *api {
	return &api{retry: Retry{Attempts: 5, Base: base, Max: base}, log: slog.New(slog.DiscardHandler)}
}

// result waits for an update's outcome, failing the test after guard.
func result(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(guard):
		t.Fatalf("%s did not return within %s", what, guard)
		return nil
	}
}

func TestAnOlderCardUpdateIsDroppedOnceANewerOneBegins(t *testing.T) {
	t.Parallel()
	unavailable := slackgo.StatusCodeError{Code: http.StatusServiceUnavailable, Status: "503 Service Unavailable"}
	for _, tt := range []struct {
		name  string
		base  time.Duration // backoff after a transient error
		first error         // what Slack answers the first attempt
		newer bool          // a newer update of the message begins once that answer is in
		want  error         // what the first update returns
		sends int           // attempts of the first update that reached Slack
	}{
		{"an_older_update_waiting_out_a_backoff_is_woken_and_dropped", longWait, unavailable, true, errSuperseded, 1},
		{"an_older_update_waiting_out_a_retry_after_is_woken_and_dropped", time.Millisecond, &slackgo.RateLimitedError{RetryAfter: longWait}, true, errSuperseded, 1},
		{"an_update_with_no_newer_one_retries_after_a_503_as_before", time.Millisecond, unavailable, false, nil, 2},
		{"an_update_with_no_newer_one_retries_after_a_429_as_before", time.Millisecond, &slackgo.RateLimitedError{RetryAfter: time.Millisecond}, false, nil, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, order := orderAPI(tt.base), newCardOrder()
			answered := make(chan struct{})
			sends := 0
			old := order.begin("C1/1.1")
			done := make(chan error, 1)
			go func() {
				defer order.end(old)
				done <- a.inTurn(context.Background(), old, "update", func(context.Context) error {
					if sends++; sends == 1 {
						defer close(answered)
						return tt.first
					}
					return nil
				})
			}()
			<-answered
			if tt.newer {
				newer := order.begin("C1/1.1")
				defer order.end(newer)
			}
			if err := result(t, done, "the first update"); !errors.Is(err, tt.want) {
				t.Fatalf("the first update returned %v, want %v", err, tt.want)
			}
			if sends != tt.sends {
				t.Fatalf("the first update was sent %d times, want %d", sends, tt.sends)
			}
		})
	}
}

func TestUpdatesOfOneCardAreSentOneAtATimeInOrder(t *testing.T) {
	t.Parallel()
	a, order := orderAPI(time.Millisecond), newCardOrder()
	var sent []string
	inFlight, answer := make(chan struct{}), make(chan struct{})
	run := func(tu *turn, name string, f func()) <-chan error {
		done := make(chan error, 1)
		go func() {
			defer order.end(tu)
			done <- a.inTurn(context.Background(), tu, name, func(context.Context) error {
				sent = append(sent, name) // one at a time: the turn's send holds the message
				f()
				return nil
			})
		}()
		return done
	}

	first := order.begin("C1/1.1")
	firstDone := run(first, "approved", func() { close(inFlight); <-answer })
	<-inFlight
	// While "approved" is in flight, "running" waits for it and "completed"
	// supersedes "running" before it is sent.
	running := order.begin("C1/1.1")
	runningDone := run(running, "running", func() {})
	completed := order.begin("C1/1.1")
	if err := result(t, runningDone, "the superseded update"); !errors.Is(err, errSuperseded) {
		t.Fatalf("the update superseded while it waited to be sent returned %v, want errSuperseded", err)
	}
	completedDone := run(completed, "completed", func() {})
	other := order.begin("C2/2.2") // another message never waits
	if err := result(t, run(other, "other card", func() {}), "another card's update"); err != nil {
		t.Fatal(err)
	}
	close(answer)
	// "approved" was sent before "completed" began: Slack has drawn it, so
	// it is not dropped, and "completed" is sent after its answer.
	if err := result(t, firstDone, "the update in flight"); err != nil {
		t.Fatalf("the update in flight returned %v", err)
	}
	if err := result(t, completedDone, "the newest update"); err != nil {
		t.Fatal(err)
	}
	if want := []string{"approved", "other card", "completed"}; !slices.Equal(sent, want) {
		t.Fatalf("sent %q, want %q", sent, want)
	}
	order.mu.Lock()
	defer order.mu.Unlock()
	if len(order.lines) != 0 {
		t.Fatalf("%d messages still have an entry with no update in flight", len(order.lines))
	}
}

func TestACardsEntryLastsOnlyWhileAnUpdateOfItIsInFlight(t *testing.T) {
	t.Parallel()
	order := newCardOrder()
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
			u := order.begin("C1/1")
			n := entries()
			order.end(u)
			return []int{n, entries()}
		}, []int{1, 0}},
		{"the_entry_stays_until_the_last_of_its_updates_ends", func() []int {
			older, newer := order.begin("C1/1"), order.begin("C1/1")
			order.end(older)
			n := entries()
			order.end(newer)
			return []int{n, entries()}
		}, []int{1, 0}},
		{"each_message_has_its_own_entry", func() []int {
			x, y := order.begin("C1/1"), order.begin("C2/2")
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
