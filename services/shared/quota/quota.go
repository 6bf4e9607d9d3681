// Package quota bounds what one agent (or identity) takes of what a process
// shares: PerAgent counts what each holds at once (previews being made,
// long-polls open, ...), so one agent can never take every slot; Bucket is
// a token bucket bounding how fast (requests and bytes at intake, a
// channel's announcements, violation events), so one cannot spend what
// others need.
package quota

import "sync"

// PerAgent counts each agent's holdings against one limit. The zero value
// is not usable; make one with New. It is safe for concurrent use.
type PerAgent struct {
	mu    sync.Mutex
	held  map[string]int
	limit int
}

// New is a PerAgent letting each agent hold at most limit at once.
func New(limit int) *PerAgent {
	return &PerAgent{held: map[string]int{}, limit: limit}
}

// Take reserves one for agent and reports true, or reports false (and
// reserves nothing) when agent already holds the limit.
func (q *PerAgent) Take(agent string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.held[agent] >= q.limit {
		return false
	}
	q.held[agent]++
	return true
}

// Give returns one that agent took.
func (q *PerAgent) Give(agent string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.held[agent]--; q.held[agent] <= 0 {
		delete(q.held, agent)
	}
}
