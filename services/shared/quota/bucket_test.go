package quota

import (
	"testing"
	"time"
)

func TestABucketSpendsWhatItHoldsAndEarnsItBackAtItsRate(t *testing.T) {
	r := Rate{Capacity: 3, Refill: time.Minute} // one token every 20 s
	start := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	var b Bucket
	steps := []struct {
		name  string
		after time.Duration // since start
		n     float64
		want  bool
		full  bool // Full after the step
	}{
		{"a new bucket is full", 0, 3, true, false},
		{"an empty bucket refuses", 0, 1, false, false},
		{"19 s earn less than a token", 19 * time.Second, 1, false, false},
		{"20 s earn one", 20 * time.Second, 1, true, false},
		{"more than it holds is refused whole", 40 * time.Second, 2, false, false},
		{"a minute of nothing fills it", 2 * time.Minute, 0, true, true},
		{"never above its capacity", 10 * time.Minute, 4, false, true},
		{"time going back earns nothing", 9 * time.Minute, 3, true, false},
	}
	for _, s := range steps {
		now := start.Add(s.after)
		if got := b.Take(r, now, s.n); got != s.want {
			t.Fatalf("%s: Take(%v) = %v, want %v", s.name, s.n, got, s.want)
		}
		if got := b.Full(r, now); got != s.full {
			t.Fatalf("%s: Full = %v, want %v", s.name, got, s.full)
		}
	}
}

func TestWaitIsHowLongABucketTakesToHoldWhatIsAsked(t *testing.T) {
	r := Rate{Capacity: 3, Refill: time.Minute} // one token every 20 s
	now := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	var b Bucket
	b.Fill(r, now)
	b.Spend(3)
	for _, c := range []struct {
		name string
		n    float64
		want time.Duration
	}{
		{"one token of an empty bucket", 1, 20 * time.Second},
		{"the whole capacity", 3, time.Minute},
		{"nothing", 0, 0},
	} {
		if got := b.Wait(r, c.n); got != c.want {
			t.Errorf("%s: Wait(%v) = %v, want %v", c.name, c.n, got, c.want)
		}
	}
	b.Fill(r, now.Add(30*time.Second))
	if got := b.Wait(r, 1); got != 0 {
		t.Errorf("after 30 s the bucket holds a token, yet Wait(1) = %v", got)
	}
}
