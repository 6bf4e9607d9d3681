package gateway

import (
	"strings"
	"testing"
)

// TestNoAgentsScriptsLeaveAnotherAgentNone: agents take the gateway's
// script places in turn, each as many as it can; every agent still gets
// its share, and an agent alone may use them all.
func TestNoAgentsScriptsLeaveAnotherAgentNone(t *testing.T) {
	for _, c := range []struct {
		name   string
		total  int
		agents []string
		// want: places each agent gets, taking in the order of agents.
		want []int
	}{
		{"three_agents_of_eight_places_each_get_their_share_the_first_borrows", 8, []string{"a", "b", "c"}, []int{4, 2, 2}},
		{"three_agents_of_five_places", 5, []string{"a", "b", "c"}, []int{3, 1, 1}},
		{"two_agents_share_evenly_when_both_ask", 8, []string{"a", "b"}, []int{4, 4}},
		{"an_agent_alone_uses_every_place", 8, []string{"a"}, []int{8}},
		{"as_many_agents_as_places_each_get_one", 3, []string{"a", "b", "c"}, []int{1, 1, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newScriptSlots(c.total, c.agents)
			var releases []func()
			for i, a := range c.agents {
				got := 0
				for {
					release, refused := s.take(a)
					if release == nil {
						if !strings.Contains(refused, "gateway.run_code_max_running") {
							t.Fatalf("refused without naming the setting: %q", refused)
						}
						break
					}
					releases = append(releases, release)
					got++
				}
				if got != c.want[i] {
					t.Fatalf("agent %s got %d places, want %d", a, got, c.want[i])
				}
			}
			// Places given back are taken again.
			for _, r := range releases {
				r()
			}
			if release, refused := s.take(c.agents[len(c.agents)-1]); release == nil {
				t.Fatalf("a place given back was not taken again: %s", refused)
			}
		})
	}
}
