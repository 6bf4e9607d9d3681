package console

import "sync"

// maxWaitsPerAgent bounds the long-polls (GET /api/v1/calls/{id}?wait=) one
// agent holds open on a console process at once: each holds a subscription
// and a goroutine, and one agent's token must not be able to exhaust them.
const maxWaitsPerAgent = 64

// agentWaits counts each agent's open long-polls on this process.
type agentWaits struct {
	mu    sync.Mutex
	open  map[string]int
	limit int
}

func newAgentWaits(limit int) *agentWaits {
	return &agentWaits{open: map[string]int{}, limit: limit}
}

// acquire reserves one wait for agent, or reports false when it holds
// limit already; release gives a reserved wait back.
func (w *agentWaits) acquire(agent string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.open[agent] >= w.limit {
		return false
	}
	w.open[agent]++
	return true
}

func (w *agentWaits) release(agent string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.open[agent]--; w.open[agent] <= 0 {
		delete(w.open, agent)
	}
}
