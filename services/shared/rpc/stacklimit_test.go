package rpc

import (
	"testing"
	"time"
)

// An endpoint's panics log a stack at most once a period; the next stack
// logged says how many went without one.
func TestAPanicsStackIsLoggedOnceAPeriod(t *testing.T) {
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	now := start
	l := newStackLimit(time.Minute, func() time.Time { return now })
	for _, tt := range []struct {
		name    string
		after   time.Duration // since start
		ok      bool
		skipped int
	}{
		{"the_first_panic_logs_its_stack", 0, true, 0},
		{"another_within_the_period_does_not", 10 * time.Second, false, 0},
		{"nor_does_a_third", 59 * time.Second, false, 0},
		{"after_the_period_the_stack_is_logged_with_the_count", 61 * time.Second, true, 2},
		{"and_the_count_starts_again", 62 * time.Second, false, 0},
		{"later_the_stack_is_logged_with_that_count", 2 * time.Hour, true, 1},
		{"a_quiet_period_holds_nothing_back", 3 * time.Hour, true, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			now = start.Add(tt.after)
			if ok, skipped := l.allow(); ok != tt.ok || skipped != tt.skipped {
				t.Fatalf("allow() at +%s = %v, %d; want %v, %d", tt.after, ok, skipped, tt.ok, tt.skipped)
			}
		})
	}
}
