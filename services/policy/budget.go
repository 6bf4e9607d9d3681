package policy

import (
	"fmt"
	"sync"
	"time"

	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/quota"
)

// budgetVerdict is what an agent's budget says about one request.
type budgetVerdict int

const (
	withinBudget budgetVerdict = iota // decide it as usual
	overBudget                        // refuse it with a small `invalid` event
	dropped                           // ack it and write nothing: the agent was told often enough this window
)

// agentBudgets is a token bucket per agent in this replica's memory: a
// minute's calls and request bytes, refilled continuously. It bounds what
// one agent can make the policy write to the shared events stream, which a
// request the policy denies (no max_pending bound holds it) would otherwise
// fill for every agent. Each replica keeps its own: with N replicas an
// agent gets up to N times the budget, and a restart refills it.
type agentBudgets struct {
	calls, bytes quota.Rate // a minute's worth each
	mu           sync.Mutex
	agents       map[string]*agentBucket
	swept        time.Time
}

// agentBucket is one agent's calls and bytes, and its refusals in the
// refusal window that began at refusedSince.
type agentBucket struct {
	calls, bytes quota.Bucket
	refusedSince time.Time
	refusals     int
	droppedAny   bool
}

func newAgentBudgets(l config.Limits) *agentBudgets {
	return &agentBudgets{calls: quota.Rate{Capacity: float64(l.AgentCallsPerMinute), Refill: time.Minute},
		bytes:  quota.Rate{Capacity: float64(l.AgentRequestBytesPerMinute), Refill: time.Minute},
		agents: map[string]*agentBucket{}}
}

// take charges one request of size bytes to agent at now. Over budget, the
// first requests of a minute, as many as the call budget, are refused (each refusal is a
// small event); later ones are dropped. firstDrop is true for the first
// drop of the agent's window, so that it is logged once a minute.
func (b *agentBudgets) take(agent string, size int, now time.Time) (v budgetVerdict, firstDrop bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweep(now)
	a, ok := b.agents[agent]
	if !ok {
		a = &agentBucket{}
		b.agents[agent] = a
	}
	a.calls.Fill(b.calls, now)
	a.bytes.Fill(b.bytes, now)
	if a.calls.Has(b.calls, 1) && a.bytes.Has(b.bytes, float64(size)) {
		a.calls.Spend(1)
		a.bytes.Spend(float64(size))
		return withinBudget, false
	}
	if now.Sub(a.refusedSince) >= time.Minute {
		a.refusedSince, a.refusals, a.droppedAny = now, 0, false
	}
	if float64(a.refusals) < b.calls.Capacity {
		a.refusals++
		return overBudget, false
	}
	firstDrop = !a.droppedAny
	a.droppedAny = true
	return dropped, firstDrop
}

// sweep forgets, once a minute, the agents whose buckets are full again
// (as a new one is) and whose refusal window is over.
func (b *agentBudgets) sweep(now time.Time) {
	if now.Sub(b.swept) < time.Minute {
		return
	}
	b.swept = now
	for agent, a := range b.agents {
		if a.calls.Full(b.calls, now) && a.bytes.Full(b.bytes, now) && now.Sub(a.refusedSince) >= time.Minute {
			delete(b.agents, agent)
		}
	}
}

// overBudgetReason is the sentence an over-budget agent is told.
func overBudgetReason(agent string, l config.Limits) string {
	return fmt.Sprintf("agent %s sent more than limits.agent_calls_per_minute (%d calls) or limits.agent_request_bytes_per_minute (%d bytes) in the last minute, so this request was not decided: slow down and submit it again, or ask the operator to raise those limits",
		agent, l.AgentCallsPerMinute, l.AgentRequestBytesPerMinute)
}
