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

// budgetAnswer is what the budget says about one request, and, over
// budget, how to tell the agent.
type budgetAnswer struct {
	verdict budgetVerdict
	// firstDrop: the first drop of the agent's window, logged once a minute.
	firstDrop bool
	// notify: the agent's notice budget holds a notice for this request
	// over budget (ingress.OverBudget); without one it is not answered.
	notify bool
	// retryAfter is how long until the budget holds this request again.
	retryAfter time.Duration
}

// agentBudgets is a token bucket per agent in this replica's memory: a
// minute's calls and request bytes, refilled continuously. It bounds what
// one agent can make the policy write to the shared events stream, which a
// request the policy denies (no max_pending bound holds it) would otherwise
// fill for every agent. Each replica keeps its own: with N replicas an
// agent gets up to N times the budget, and a restart refills it.
//
// A request over budget is answered with a core NATS notice, stored
// nowhere; notices have a bucket of their own (notices) so that an agent
// cannot make the policy publish without bound either.
type agentBudgets struct {
	calls, bytes quota.Rate // a minute's worth each
	notices      quota.Rate
	mu           sync.Mutex
	agents       map[string]*agentBucket
	swept        time.Time
}

// agentBucket is one agent's calls, bytes and notices, and its refusals in
// the refusal window that began at refusedSince.
type agentBucket struct {
	calls, bytes, notices quota.Bucket
	refusedSince          time.Time
	refusals              int
	droppedAny            bool
}

// newAgentBudgets keeps each agent to l's budget. An agent is sent at most
// noticesPerMinute over-budget notices a minute (a bucket holding that
// many, refilled over a minute); past them its requests over budget go
// unanswered until the bucket refills.
func newAgentBudgets(l config.Limits, noticesPerMinute int) *agentBudgets {
	return &agentBudgets{calls: quota.Rate{Capacity: float64(l.AgentCallsPerMinute), Refill: time.Minute},
		bytes:   quota.Rate{Capacity: float64(l.AgentRequestBytesPerMinute), Refill: time.Minute},
		notices: quota.Rate{Capacity: float64(noticesPerMinute), Refill: time.Minute},
		agents:  map[string]*agentBucket{}}
}

// noticesPerMinute is how many over-budget notices one agent may be sent
// a minute: as many requests as it can have waiting in the intake at once
// (intake.max_pending_per_agent), or its refusals a minute (its call
// budget), whichever is more — so that an agent that sent a burst of its
// whole intake share hears about every request in it. Each notice is a
// few hundred bytes published to the agent's own account: at the defaults
// at most about 400 KB a minute per agent.
func noticesPerMinute(c config.Config) int {
	return max(int(c.Intake.MaxPendingPerAgent), c.Limits.AgentCallsPerMinute)
}

// storedCopies is how many times the events stream stores a decided
// request's call: its requested event and its decision event (allowed,
// denied or approval_requested) each carry the whole call. The byte budget
// charges a request that many times, so that it bounds what the request
// costs the stream, not what it costs the intake (R9 F6); the result a
// completed call stores is bounded on its own (ingress.MaxReportResultBytes).
const storedCopies = 2

// take charges one request of size bytes to agent at now, storedCopies
// times, but never more than the byte budget holds: one request of
// limits.max_request_bytes (which the configuration keeps within the
// budget) always fits a full budget. Over budget, the
// first requests of a minute, as many as the call budget, are refused (each refusal is a
// small event); later ones are dropped. Every request over budget is
// answered with a notice while the agent's notice budget lasts.
func (b *agentBudgets) take(agent string, size int, now time.Time) budgetAnswer {
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
	charge := min(float64(size)*storedCopies, b.bytes.Capacity)
	if a.calls.Has(b.calls, 1) && a.bytes.Has(b.bytes, charge) {
		a.calls.Spend(1)
		a.bytes.Spend(charge)
		return budgetAnswer{verdict: withinBudget}
	}
	answer := budgetAnswer{notify: a.notices.Take(b.notices, now, 1),
		retryAfter: max(a.calls.Wait(b.calls, 1), a.bytes.Wait(b.bytes, charge))}
	if now.Sub(a.refusedSince) >= time.Minute {
		a.refusedSince, a.refusals, a.droppedAny = now, 0, false
	}
	if float64(a.refusals) < b.calls.Capacity {
		a.refusals++
		answer.verdict = overBudget
		return answer
	}
	answer.verdict, answer.firstDrop = dropped, !a.droppedAny
	a.droppedAny = true
	return answer
}

// sweep forgets, once a minute, the agents whose buckets are all full again
// (as a new one is) and whose refusal window is over.
func (b *agentBudgets) sweep(now time.Time) {
	if now.Sub(b.swept) < time.Minute {
		return
	}
	b.swept = now
	for agent, a := range b.agents {
		if a.calls.Full(b.calls, now) && a.bytes.Full(b.bytes, now) && a.notices.Full(b.notices, now) && now.Sub(a.refusedSince) >= time.Minute {
			delete(b.agents, agent)
		}
	}
}

// overBudgetReason is the sentence an over-budget agent is told.
func overBudgetReason(agent string, l config.Limits) string {
	return fmt.Sprintf("agent %s sent more than limits.agent_calls_per_minute (%d calls) or limits.agent_request_bytes_per_minute (%d bytes, each request counted twice: the events stream stores it twice) in the last minute, so this request was not decided: slow down and submit it again, or ask the operator to raise those limits",
		agent, l.AgentCallsPerMinute, l.AgentRequestBytesPerMinute)
}
