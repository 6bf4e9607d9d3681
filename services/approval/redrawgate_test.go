package approval

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestRedrawsOfACallAreCoalesced: a client coming and going many times
// within an interval redraws its call's cards at once and once more at the
// interval's end, and the call is forgotten an interval after that.
func TestRedrawsOfACallAreCoalesced(t *testing.T) {
	const every = 200 * time.Millisecond
	g := newRedrawGate(every)
	var drawn atomic.Int32
	draw := func() { drawn.Add(1) }
	for range 50 {
		g.changed("bot.c1", draw)
	}
	if got := drawn.Load(); got != 1 {
		t.Fatalf("50 changes at once drew %d times at first, want 1", got)
	}
	testenv.Eventually(t, 10*time.Second, "the changes within the interval to be drawn once at its end", func() bool { return drawn.Load() >= 2 })
	// With no change since, the call is forgotten an interval later, and
	// not drawn again.
	testenv.Eventually(t, 10*time.Second, "the call to be forgotten", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.again) == 0
	})
	if got := drawn.Load(); got != 2 {
		t.Fatalf("50 changes at once drew %d times in all, want 2 (the first, and the rest once at the interval's end)", got)
	}
}
