package gateway

import (
	"fmt"
	"sync"
)

// scriptSlots are the gateway's places for run_code scripts
// (gateway.run_code_max_running), shared so that no agent's scripts can
// leave another agent none. Each agent with run_code is sure of an equal
// share of the places (total / agents, at least one: the configuration
// makes total at least the number of agents); an agent may borrow places
// beyond its share only while what stays free still covers every other
// agent's share that it does not use. A script holds its place for as long
// as it runs, waits for people included, so places cannot be taken back:
// they are kept free instead.
type scriptSlots struct {
	mu    sync.Mutex
	total int
	share int
	// held: running scripts per agent with run_code.
	held map[string]int
}

// newScriptSlots shares total places among agents (each agent once).
func newScriptSlots(total int, agents []string) *scriptSlots {
	s := &scriptSlots{total: total, held: map[string]int{}}
	for _, a := range agents {
		s.held[a] = 0
	}
	if len(s.held) > 0 {
		s.share = max(total/len(s.held), 1)
	}
	return s
}

// take takes a place for one of agent's scripts; release gives it back.
// When it cannot, refused says why, in a sentence for the model.
func (s *scriptSlots) take(agent string) (release func(), refused string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	running := 0
	for _, n := range s.held {
		running += n
	}
	if running >= s.total {
		return nil, fmt.Sprintf("the gateway already runs %d scripts over all its endpoints, its limit (gateway.run_code_max_running): wait for one to finish, then send this one again", s.total)
	}
	// The places other agents are sure of and do not use stay free.
	unused := 0
	for a, n := range s.held {
		if a != agent {
			unused += max(s.share-n, 0)
		}
	}
	if mine := s.held[agent]; mine >= s.share && s.total-running-1 < unused {
		return nil, fmt.Sprintf("agent %s already runs %d scripts; the gateway's other places are kept for other agents' scripts (each agent is sure of %d of the %d, gateway.run_code_max_running): wait for one of yours to finish, then send this one again",
			agent, mine, s.share, s.total)
	}
	s.held[agent]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.held[agent]--
	}, ""
}
