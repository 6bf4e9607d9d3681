package ingress

import (
	"encoding/json"
	"fmt"
	"time"
)

// OverBudget is the policy service's answer to a request it did not decide
// because the agent was over its budget (limits.agent_calls_per_minute,
// limits.agent_request_bytes_per_minute). It is published with core NATS
// on subject.OverBudgetNotice(agent, call), as JSON (Content-Type:
// application/json) whatever the request was, and never stored: the
// events stream gains nothing from an agent over its budget past the
// refusals it records. Every SDK reads this one shape, and ends a wait
// with it only when it Answers that wait.
type OverBudget struct {
	AgentID string `json:"agent_id"`
	CallID  string `json:"call_id"`
	// Revision is the revision the request asked for (1 when it named
	// none, as it would have been recorded): an agent may submit revision
	// n+1 of a call while it still follows revision n, which the notice is
	// not about.
	Revision uint32 `json:"revision"`
	// CallsPerMinute and RequestBytesPerMinute are the agent's budget.
	CallsPerMinute        int `json:"calls_per_minute"`
	RequestBytesPerMinute int `json:"request_bytes_per_minute"`
	// RetryAfterSeconds is about how long until the budget holds this
	// request again (at least 1).
	RetryAfterSeconds int `json:"retry_after_seconds"`
	// Reason is the sentence the agent is told.
	Reason string `json:"reason"`
}

// NewOverBudget is the notice for agent's request for revision rev (0: 1)
// of call, which its budget would hold again after retryAfter.
func NewOverBudget(agent, call string, rev uint32, callsPerMinute, bytesPerMinute int, retryAfter time.Duration) OverBudget {
	secs := max(1, int((retryAfter+time.Second-1)/time.Second))
	rev = max(rev, 1)
	return OverBudget{AgentID: agent, CallID: call, Revision: rev, CallsPerMinute: callsPerMinute, RequestBytesPerMinute: bytesPerMinute,
		RetryAfterSeconds: secs,
		Reason: fmt.Sprintf("agent %s is over its budget of %d calls a minute (limits.agent_calls_per_minute; and %d bytes, each request counted twice, limits.agent_request_bytes_per_minute), so airlock did not decide revision %d of call %s: retry after about %d s, send fewer calls a minute, or ask the operator to raise those limits",
			agent, callsPerMinute, bytesPerMinute, rev, call, secs)}
}

// Answers reports whether the notice ends a wait for revision want of its
// call (0: the newest revision the agent asked for), given recorded, the
// newest revision of the call the waiter knows airlock recorded (0: none).
// A notice about a revision that is recorded was about a repeat of its
// request, which changes nothing of it; a notice about another revision
// than the one waited for says nothing of that one. A wait that names no
// revision waits for the agent's newest request: a notice about a revision
// newer than any recorded is about it.
func (n OverBudget) Answers(want, recorded uint32) bool {
	return n.Revision > recorded && (want == 0 || n.Revision == want)
}

// DecodeOverBudget reads a notice, and refuses one that is not about
// agent's call (a notice is delivered only on the agent's own subjects,
// which only the policy service may publish on; the check keeps anything
// else delivered there from passing for one).
func DecodeOverBudget(data []byte, agent, call string) (OverBudget, error) {
	var n OverBudget
	if err := json.Unmarshal(data, &n); err != nil {
		return OverBudget{}, fmt.Errorf("over-budget notice: %w", err)
	}
	if n.AgentID != agent || n.CallID != call || n.Reason == "" {
		return OverBudget{}, fmt.Errorf("over-budget notice names agent %q call %q, not agent %q call %q", n.AgentID, n.CallID, agent, call)
	}
	// A policy service from before notices named their revision names
	// none: read as 1, the revision of almost every request.
	n.Revision = max(n.Revision, 1)
	return n, nil
}
