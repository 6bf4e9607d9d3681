// Package quota bounds what one agent (or identity) takes of what a process
// shares: PerAgent counts what each holds at once (previews being made,
// long-polls open, ...), so one agent can never take every slot; Bucket is
// a token bucket bounding how fast (requests and bytes at intake, a
// channel's announcements, violation events), so one cannot spend what
// others need.
package quota

import "sync"

// PerAgent counts each agent's holdings against one limit, and optionally
// every agent's together against a total. The zero value is not usable;
// make one with New or NewWithTotal. It is safe for concurrent use.
type PerAgent struct {
	mu    sync.Mutex
	held  map[string]int
	limit int
	// total bounds every agent's holdings together (0: no bound); sum is
	// what they hold.
	total, sum int
}

// New is a PerAgent letting each agent hold at most limit at once.
func New(limit int) *PerAgent {
	return &PerAgent{held: map[string]int{}, limit: limit}
}

// NewWithTotal is a PerAgent letting each agent hold at most limit at
// once, and all of them together at most total: for a slot that a shared
// bound of the process's own pays for (the approval service's held
// messages, each one of the consumer's MaxAckPending).
func NewWithTotal(limit, total int) *PerAgent {
	return &PerAgent{held: map[string]int{}, limit: limit, total: max(total, 1)}
}

// Take reserves one for agent and reports true, or reports false (and
// reserves nothing) when agent already holds the limit or every agent
// together holds the total.
func (q *PerAgent) Take(agent string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.held[agent] >= q.limit || q.total > 0 && q.sum >= q.total {
		return false
	}
	q.held[agent]++
	q.sum++
	return true
}

// Give returns one that agent took.
func (q *PerAgent) Give(agent string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.held[agent]; !ok {
		return // nothing taken: giving it back must not free another's slot
	}
	q.sum--
	if q.held[agent]--; q.held[agent] <= 0 {
		delete(q.held, agent)
	}
}
