// Package subject is the one place airlock subjects are built and parsed.
//
// Lifecycle events: airlock.evt.<agent>.<call>.<type>. Putting the agent and
// the call in the subject lets NATS permissions confine an agent to its own
// calls (publish airlock.evt.X.*.requested, subscribe airlock.evt.X.>).
package subject

import (
	"fmt"
	"strings"

	"github.com/airlock-gate/airlock/services/shared/ids"
)

const (
	// EventsPrefix starts every lifecycle event subject.
	EventsPrefix = "airlock.evt"
	// AllEvents matches every lifecycle event.
	AllEvents = EventsPrefix + ".>"
	// APIPrefix starts every request/reply (micro) endpoint.
	APIPrefix = "airlock.api"
)

// Event types, the last token of an event subject. They equal the field
// names of airlock.v1.Event's body oneof.
const (
	Requested           = "requested"
	Allowed             = "allowed"
	Denied              = "denied"
	ApprovalRequested   = "approval_requested"
	Notified            = "notified"
	Approved            = "approved"
	Rejected            = "rejected"
	ChangesRequested    = "changes_requested"
	Expired             = "expired"
	Canceled            = "canceled"
	Started             = "started"
	Completed           = "completed"
	Failed              = "failed"
	UnauthorizedAttempt = "unauthorized_attempt"
	PolicyChanged       = "policy_changed"
	Invalid             = "invalid"
	VoteCast            = "vote_cast"
	GrantCreated        = "grant_created"
	GrantUsed           = "grant_used"
	GrantRevoked        = "grant_revoked"
	GrantExpired        = "grant_expired"
	DecisionRefused     = "decision_refused"
	SignIn              = "sign_in"
	TokenCreated        = "token_created"
	TokenRevoked        = "token_revoked"
	AuditPruned         = "audit_pruned"
)

// Types lists every event type.
var Types = []string{Requested, Allowed, Denied, ApprovalRequested, Notified, Approved, Rejected,
	ChangesRequested, Expired, Canceled, Started, Completed, Failed, UnauthorizedAttempt, PolicyChanged, Invalid,
	VoteCast, GrantCreated, GrantUsed, GrantRevoked, GrantExpired, DecisionRefused, SignIn, TokenCreated, TokenRevoked, AuditPruned}

// SystemAgent is the agent token used for events that belong to no agent's
// call (policy_changed, grants, sign-ins, tokens, audit retention); the call
// token then names the thing: SystemCall for the policy, a grant or token
// id, ConsoleCall for sign-ins, AuditCall for the audit trail itself.
const (
	SystemAgent = "_system"
	SystemCall  = "_policy"
	ConsoleCall = "_console"
	AuditCall   = "_audit"
)

// System builds airlock.evt._system.<id>.<type> for a system-wide event.
func System(id, typ string) (string, error) { return Event(SystemAgent, id, typ) }

// Event builds airlock.evt.<agent>.<call>.<type>, refusing ids that are not
// valid subject tokens.
func Event(agent, call, typ string) (string, error) {
	if err := ids.Validate("agent id", agent); err != nil {
		return "", err
	}
	if err := ids.Validate("call id", call); err != nil {
		return "", err
	}
	if !isType(typ) {
		return "", fmt.Errorf("unknown event type %q", typ)
	}
	return EventsPrefix + "." + agent + "." + call + "." + typ, nil
}

// Parsed is an event subject taken apart.
type Parsed struct {
	Agent, Call, Type string
}

// Parse splits an event subject. It returns an error when the subject is not
// airlock.evt.<agent>.<call>.<type> or an id is not valid; Parsed still holds
// the raw tokens then, so the caller can answer on the same subject.
func Parse(s string) (Parsed, error) {
	tokens := strings.Split(s, ".")
	if len(tokens) != 5 || tokens[0] != "airlock" || tokens[1] != "evt" {
		return Parsed{}, fmt.Errorf("subject %q is not airlock.evt.<agent>.<call>.<type>", s)
	}
	p := Parsed{Agent: tokens[2], Call: tokens[3], Type: tokens[4]}
	if !isType(p.Type) {
		return p, fmt.Errorf("subject %q: unknown event type %q", s, p.Type)
	}
	if err := ids.Validate("agent id", p.Agent); err != nil {
		return p, err
	}
	if err := ids.Validate("call id", p.Call); err != nil {
		return p, err
	}
	return p, nil
}

// OfType matches events of one type from every agent and call.
func OfType(typ string) string { return EventsPrefix + ".*.*." + typ }

// OfCall matches every event of one call.
func OfCall(agent, call string) string { return EventsPrefix + "." + agent + "." + call + ".>" }

// OfAgent matches every event of one agent.
func OfAgent(agent string) string { return EventsPrefix + "." + agent + ".>" }

// API builds a request/reply subject: airlock.api.<service>.<endpoint>.
func API(service, endpoint string) string { return APIPrefix + "." + service + "." + endpoint }

// AgentCancel is where an agent asks to cancel one of its own calls; the
// agent token lets NATS permissions keep agents to their own calls.
func AgentCancel(agent string) string { return "airlock.agent." + agent + ".cancel" }

func isType(t string) bool {
	for _, k := range Types {
		if k == t {
			return true
		}
	}
	return false
}
