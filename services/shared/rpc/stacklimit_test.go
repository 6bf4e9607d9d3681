package rpc

import (
	"testing"
	"time"
)

// A subject's panics log a stack at most once a period; the next stack
// logged says how many went without one, and each subject has its own.
func TestAPanicsStackIsLoggedOnceASubjectAPeriod(t *testing.T) {
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	now := start
	l := newStackLimit(time.Minute, func() time.Time { return now })
	for _, tt := range []struct {
		name    string
		after   time.Duration // since start
		subject string
		ok      bool
		skipped int
	}{
		{"the_first_panic_logs_its_stack", 0, "a", true, 0},
		{"another_within_the_period_does_not", 10 * time.Second, "a", false, 0},
		{"nor_does_a_third", 59 * time.Second, "a", false, 0},
		{"another_subject_has_its_own_period", 59 * time.Second, "b", true, 0},
		{"after_the_period_the_stack_is_logged_with_the_count", 61 * time.Second, "a", true, 2},
		{"and_the_count_starts_again", 62 * time.Second, "a", false, 0},
		{"a_subject_quiet_for_long_logs_its_stack_with_nothing_held_back", time.Hour, "b", true, 0},
		{"and_the_other_still_tells_its_count", 2 * time.Hour, "a", true, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			now = start.Add(tt.after)
			if ok, skipped := l.allow(tt.subject); ok != tt.ok || skipped != tt.skipped {
				t.Fatalf("allow(%q) at +%s = %v, %d; want %v, %d", tt.subject, tt.after, ok, skipped, tt.ok, tt.skipped)
			}
		})
	}
}
