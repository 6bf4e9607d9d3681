package console

import "testing"

func TestOneAgentHoldsAtMostItsShareOfWaits(t *testing.T) {
	w := newAgentWaits(2)
	steps := []struct {
		name    string
		agent   string
		release bool
		want    bool
	}{
		{"first_wait", "evil", false, true},
		{"second_wait", "evil", false, true},
		{"third_wait_is_refused", "evil", false, false},
		{"another_agent_still_waits", "bot", false, true},
		{"a_released_wait_can_be_taken_again", "evil", true, true},
	}
	for _, s := range steps {
		if s.release {
			w.release(s.agent)
		}
		if got := w.acquire(s.agent); got != s.want {
			t.Fatalf("%s: acquire(%s) = %v, want %v", s.name, s.agent, got, s.want)
		}
	}
}
