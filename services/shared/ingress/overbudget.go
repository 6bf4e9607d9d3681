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
// refusals it records. Every SDK reads this one shape.
type OverBudget struct {
	AgentID string `json:"agent_id"`
	CallID  string `json:"call_id"`
	// CallsPerMinute and RequestBytesPerMinute are the agent's budget.
	CallsPerMinute        int `json:"calls_per_minute"`
	RequestBytesPerMinute int `json:"request_bytes_per_minute"`
	// RetryAfterSeconds is about how long until the budget holds this
	// request again (at least 1).
	RetryAfterSeconds int `json:"retry_after_seconds"`
	// Reason is the sentence the agent is told.
	Reason string `json:"reason"`
}

// NewOverBudget is the notice for agent's request for call, which its
// budget would hold again after retryAfter.
func NewOverBudget(agent, call string, callsPerMinute, bytesPerMinute int, retryAfter time.Duration) OverBudget {
	secs := max(1, int((retryAfter+time.Second-1)/time.Second))
	return OverBudget{AgentID: agent, CallID: call, CallsPerMinute: callsPerMinute, RequestBytesPerMinute: bytesPerMinute,
		RetryAfterSeconds: secs,
		Reason: fmt.Sprintf("agent %s is over its budget of %d calls a minute (limits.agent_calls_per_minute; and %d request bytes, limits.agent_request_bytes_per_minute), so airlock did not decide call %s: retry after about %d s, send fewer calls a minute, or ask the operator to raise those limits",
			agent, callsPerMinute, bytesPerMinute, call, secs)}
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
	return n, nil
}
