package approval

import (
	"sync/atomic"
	"testing"
	"time"
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
	time.Sleep(every + every/2)
	if got := drawn.Load(); got != 2 {
		t.Fatalf("the changes within the interval drew %d times by its end, want 2", got)
	}
	time.Sleep(2 * every)
	g.mu.Lock()
	left := len(g.again)
	g.mu.Unlock()
	if got := drawn.Load(); got != 2 || left != 0 {
		t.Fatalf("with no change since, %d draws and %d calls remembered, want 2 and 0", got, left)
	}
}
