package quota

import (
	"sync"
	"testing"
)

func TestEachAgentHoldsAtMostTheLimitAndGetsBackWhatItGives(t *testing.T) {
	type step struct {
		name  string
		agent string
		give  bool
		want  bool
	}
	cases := []struct {
		name  string
		q     *PerAgent
		steps []step
	}{
		{"each agent against its limit", New(2), []step{
			{"the first take is granted", "a", false, true},
			{"the second take is granted", "a", false, true},
			{"a third take over the limit is refused", "a", false, false},
			{"another agent is not held back by a's holdings", "b", false, true},
			{"a gives one back", "a", true, true},
			{"a may take again", "a", false, true},
			{"and is refused again at the limit", "a", false, false},
		}},
		{"all agents together against the total", NewWithTotal(2, 3), []step{
			{"a takes its first", "a", false, true},
			{"a takes its second", "a", false, true},
			{"a is refused at its own limit", "a", false, false},
			{"b takes one, the total is reached", "b", false, true},
			{"c, holding nothing, is refused at the total", "c", false, false},
			{"c gives back what it never took", "c", true, true},
			{"which frees no slot for anyone", "d", false, false},
			{"a gives one back", "a", true, true},
			{"c may take the slot a freed", "c", false, true},
			{"and the total holds again", "b", false, false},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, s := range c.steps {
				if s.give {
					c.q.Give(s.agent)
					continue
				}
				if got := c.q.Take(s.agent); got != s.want {
					t.Fatalf("%s: Take(%q) = %v, want %v", s.name, s.agent, got, s.want)
				}
			}
		})
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
