package quota

import (
	"sync"
	"testing"
	"time"
)

func TestEachAgentHoldsAtMostTheLimitAndGetsBackWhatItGives(t *testing.T) {
	q := New(2)
	steps := []struct {
		name  string
		agent string
		give  bool
		want  bool
	}{
		{"the first take is granted", "a", false, true},
		{"the second take is granted", "a", false, true},
		{"a third take over the limit is refused", "a", false, false},
		{"another agent is not held back by a's holdings", "b", false, true},
		{"a gives one back", "a", true, true},
		{"a may take again", "a", false, true},
		{"and is refused again at the limit", "a", false, false},
	}
	for _, s := range steps {
		if s.give {
			q.Give(s.agent)
			continue
		}
		if got := q.Take(s.agent); got != s.want {
			t.Fatalf("%s: Take(%q) = %v, want %v", s.name, s.agent, got, s.want)
		}
	}
}

func TestConcurrentTakesNeverExceedTheLimit(t *testing.T) {
	q := New(3)
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted := 0
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if q.Take("a") {
				mu.Lock()
				granted++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if granted != 3 {
		t.Fatalf("%d takes granted, want 3", granted)
	}
	for range 3 {
		q.Give("a")
	}
	if len(q.held) != 0 {
		t.Fatalf("an agent that gave back everything still holds %v", q.held)
	}
}

func TestKeyedBoundsEachKeyAlone(t *testing.T) {
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	k := NewKeyed(Rate{Capacity: 3, Refill: time.Minute})
	tests := []struct {
		name string
		key  string
		at   time.Duration
		want bool
	}{
		{"first", "bot", 0, true},
		{"second", "bot", 0, true},
		{"third", "bot", 0, true},
		{"past the burst", "bot", 0, false},
		{"another key has its own", "other", 0, true},
		{"one earned back after a third of the refill", "bot", 20 * time.Second, true},
		{"and only one", "bot", 20 * time.Second, false},
	}
	for _, tt := range tests {
		if got := k.Take(tt.key, start.Add(tt.at)); got != tt.want {
			t.Fatalf("%s: Take(%q) = %v, want %v", tt.name, tt.key, got, tt.want)
		}
	}
}
