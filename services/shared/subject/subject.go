// Package subject is the one place airlock subjects are built and parsed.
//
//   - airlock.req.<agent>.<call>: an agent's request, in the intake stream.
//     Agents write nothing else.
//   - airlock.evt.<agent>.<call>.<type>: lifecycle events, in the events
//     stream, written only by services; the executor's events of a call
//     (started, completed, failed) are airlock.evt.<agent>.<call>.exec.<type>,
//     so that airlock.evt.<agent>.<call>.exec.* is the call's execution
//     ledger, appended to with compare-and-append and nothing else.
//   - airlock.out.<agent>.<call>.<type>: the events stream republishes every
//     stored event here; an agent follows its own calls on it.
//
// Putting the agent and the call in every subject lets NATS permissions
// confine an agent to its own calls.
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
	// RequestsPrefix starts every agent request in the intake stream.
	RequestsPrefix = "airlock.req"
	// AllRequests matches every agent request.
	AllRequests = RequestsPrefix + ".>"
	// OutPrefix starts the republished copy of every stored event.
	OutPrefix = "airlock.out"
	// AllOut matches every republished event.
	AllOut = OutPrefix + ".>"
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
	Undone              = "undone"
	OutcomeResolved     = "outcome_resolved"
	ShadowChanged       = "shadow_changed"
	ShadowDivergence    = "shadow_divergence"
)

// Types lists every event type.
var Types = []string{Requested, Allowed, Denied, ApprovalRequested, Notified, Approved, Rejected,
	ChangesRequested, Expired, Canceled, Started, Completed, Failed, UnauthorizedAttempt, PolicyChanged, Invalid,
	VoteCast, GrantCreated, GrantUsed, GrantRevoked, GrantExpired, DecisionRefused, SignIn, TokenCreated, TokenRevoked, AuditPruned,
	Undone, OutcomeResolved, ShadowChanged, ShadowDivergence}

// Sets of event types, each defined once and shared by every service and
// front-end that needs it.
var (
	// PolicyOutcomes are the policy service's decisions about a revision.
	PolicyOutcomes = []string{Allowed, Denied, ApprovalRequested}
	// ApprovalOutcomes end a revision's wait for people: a decision, the
	// deadline, or a cancel. A call that stopped waiting leaves the inbox.
	ApprovalOutcomes = []string{Approved, Rejected, ChangesRequested, Expired, Canceled}
	// ExecTypes are the executor's events: the call's execution ledger.
	ExecTypes = []string{Started, Completed, Failed}
	// EndTypes end a call revision from its agent's point of view: it will
	// not run (denied, rejected, changes requested, expired, canceled,
	// invalid) or it ran (completed, failed).
	EndTypes = []string{Denied, Rejected, ChangesRequested, Expired, Canceled, Completed, Failed, Invalid}
)

// SystemAgent is the agent token used for events that belong to no agent's
// call (policy_changed, grants, sign-ins, tokens, audit retention); the call
// token then names the thing: SystemCall for the policy, a grant or token
// id, ConsoleCall for sign-ins, AuditCall for the audit trail itself,
// BusCall for what NATS refused. InvalidCall stands for a call id too
// malformed to use as a subject token.
// Agent ids never start with "_" (ids.ValidateAgent), so none of these can
// collide with an agent's.
const (
	SystemAgent = "_system"
	SystemCall  = "_policy"
	ConsoleCall = "_console"
	AuditCall   = "_audit"
	InvalidCall = "_invalid"
	// BusCall: what NATS itself refused (permission violations on the
	// bus), recorded by airlock's embedded server (package violation).
	BusCall = "_bus"
)

// System builds airlock.evt._system.<id>.<type> for a system-wide event.
func System(id, typ string) (string, error) { return Event(SystemAgent, id, typ) }

// ExecToken is the token before the type of the executor's events.
const ExecToken = "exec"

// IsExec reports whether typ is one of the executor's event types.
func IsExec(typ string) bool { return typ == Started || typ == Completed || typ == Failed }

// suffix is what follows <agent>.<call> in the subject of an event of typ.
func suffix(typ string) string {
	if IsExec(typ) {
		return ExecToken + "." + typ
	}
	return typ
}

// OfExecution matches the call's execution ledger: its executor events.
func OfExecution(agent, call string) string {
	return EventsPrefix + "." + agent + "." + call + "." + ExecToken + ".*"
}

// Event builds airlock.evt.<agent>.<call>.<type> (….exec.<type> for the
// executor's types), refusing ids that are not valid subject tokens.
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
	return EventsPrefix + "." + agent + "." + call + "." + suffix(typ), nil
}

// Parsed is an event subject taken apart.
type Parsed struct {
	Agent, Call, Type string
}

// Parse splits an event subject. It returns an error when the subject is not
// airlock.evt.<agent>.<call>.<type> (….exec.<type> for the executor's types)
// or an id is not valid; Parsed still holds the raw tokens then.
func Parse(s string) (Parsed, error) {
	tokens := strings.Split(s, ".")
	if len(tokens) < 5 || len(tokens) > 6 || tokens[0] != "airlock" || tokens[1] != "evt" {
		return Parsed{}, fmt.Errorf("subject %q is not airlock.evt.<agent>.<call>.<type>", s)
	}
	p := Parsed{Agent: tokens[2], Call: tokens[3], Type: tokens[len(tokens)-1]}
	if !isType(p.Type) {
		return p, fmt.Errorf("subject %q: unknown event type %q", s, p.Type)
	}
	if exec := len(tokens) == 6; exec != IsExec(p.Type) || exec && tokens[4] != ExecToken {
		return p, fmt.Errorf("subject %q: %s events are on airlock.evt.<agent>.<call>.%s", s, p.Type, suffix(p.Type))
	}
	if err := ids.Validate("agent id", p.Agent); err != nil {
		return p, err
	}
	if err := ids.Validate("call id", p.Call); err != nil {
		return p, err
	}
	return p, nil
}

// Request builds airlock.req.<agent>.<call>, where an agent publishes a call.
func Request(agent, call string) (string, error) {
	if err := ids.ValidateAgent(agent); err != nil {
		return "", err
	}
	if err := ids.Validate("call id", call); err != nil {
		return "", err
	}
	return RequestsPrefix + "." + agent + "." + call, nil
}

// RequestTokens returns the agent and call tokens of an intake subject
// without validating them (the caller refuses what is not valid), and false
// when the subject is neither airlock.req.<agent>.<call> (as agents publish)
// nor airlock.req.<agent> (as the intake stream stores it: IntakeStored),
// where call is empty.
func RequestTokens(s string) (agent, call string, ok bool) {
	rest, found := strings.CutPrefix(s, RequestsPrefix+".")
	if !found || rest == "" {
		return "", "", false
	}
	agent, call, found = strings.Cut(rest, ".")
	if agent == "" || (found && (call == "" || strings.Contains(call, "."))) {
		return "", "", false
	}
	return agent, call, true
}

// AgentRequests is airlock.req.<agent>: where the intake stream stores an
// agent's requests (IntakeStored).
func AgentRequests(agent string) string { return RequestsPrefix + "." + agent }

// PolicyChanges is the subject the policy service records its changes on.
const PolicyChanges = EventsPrefix + "." + SystemAgent + "." + SystemCall + "." + PolicyChanged

// Tokens splits an event subject into its agent, call and type tokens
// without validating the ids or allocating (the audit sink calls it for
// every event; Parse validates); ok is false when subj does not have the
// shape airlock.evt.<agent>.<call>.<type> (….exec.<type> for the
// executor's types).
func Tokens(subj string) (agent, call, typ string, ok bool) {
	rest, found := strings.CutPrefix(subj, EventsPrefix+".")
	if !found {
		return "", "", "", false
	}
	if agent, rest, found = strings.Cut(rest, "."); !found {
		return "", "", "", false
	}
	if call, typ, found = strings.Cut(rest, "."); !found {
		return "", "", "", false
	}
	if t, exec := strings.CutPrefix(typ, ExecToken+"."); exec && IsExec(t) {
		typ = t
	}
	if strings.Contains(typ, ".") {
		return "", "", "", false
	}
	return agent, call, typ, true
}

// IntakeSource is what agents publish to; the intake stream stores each
// request under IntakeStored, its agent alone, so that the server can count
// one agent's waiting requests (intake.max_pending_per_agent). The call id
// travels in the request's body.
const (
	IntakeSource = RequestsPrefix + ".*.*"
	IntakeStored = RequestsPrefix + ".{{wildcard(1)}}"
)

// Out is where the events stream republishes a stored event subject:
// airlock.evt.A.C.T → airlock.out.A.C.T.
func Out(eventSubject string) string {
	return OutPrefix + strings.TrimPrefix(eventSubject, EventsPrefix)
}

// OutOfCall matches the republished events of one call.
func OutOfCall(agent, call string) string { return OutPrefix + "." + agent + "." + call + ".>" }

// OutOfAgent matches the republished events of every call of one agent.
func OutOfAgent(agent string) string { return OutPrefix + "." + agent + ".>" }

// OutOfAgentType matches the republished events of one type of every call of one agent.
func OutOfAgentType(agent, typ string) string { return OutPrefix + "." + agent + ".*." + suffix(typ) }

// OverBudget is the last token of the notice the policy service publishes
// (core NATS, never stored) on airlock.out.<agent>.<call>.over_budget for a
// request it did not decide because its agent was over its budget
// (ingress.OverBudget). It is not an event type: no event is stored under
// it, so only this notice is ever delivered there.
const OverBudget = "over_budget"

// OverBudgetNotice is where an agent hears that its request for call was
// not decided because it is over its budget: under its own republished
// events, which its account imports, so it needs no other permission, and
// which only services (the policy alone) may publish on.
func OverBudgetNotice(agent, call string) string {
	return OutPrefix + "." + agent + "." + call + "." + OverBudget
}

// DirectGet is the subject that answers the last message stored on subj in
// stream (JetStream Direct Get, subject form). An agent is allowed only the
// form with its own events subjects, so it can read nothing else.
func DirectGet(stream, subj string) string { return "$JS.API.DIRECT.GET." + stream + "." + subj }

// CallKey returns "<agent>.<call>" of an event, request or republished
// subject (airlock.{evt,req,out}.<agent>.<call>…) without allocating, for
// hot paths that only need to group a call's messages; false for any other
// subject. It does not validate the ids.
func CallKey(s string) (string, bool) {
	if !strings.HasPrefix(s, "airlock.") {
		return "", false
	}
	dots, start := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] != '.' {
			continue
		}
		dots++
		switch dots {
		case 2:
			start = i + 1
		case 4:
			return s[start:i], true
		}
	}
	if dots == 3 && strings.HasPrefix(s, RequestsPrefix+".") {
		return s[start:], true
	}
	return "", false
}

// OfType matches events of one type from every agent and call.
func OfType(typ string) string { return EventsPrefix + ".*.*." + suffix(typ) }

// OfCall matches every event of one call.
func OfCall(agent, call string) string { return EventsPrefix + "." + agent + "." + call + ".>" }

// OfAgent matches every event of one agent.
func OfAgent(agent string) string { return EventsPrefix + "." + agent + ".>" }

// API builds a request/reply subject: airlock.api.<service>.<endpoint>.
func API(service, endpoint string) string { return APIPrefix + "." + service + "." + endpoint }

// ToolsChanged is where the executor announces (core NATS, no body
// contract beyond {"server": name}) that an upstream server's tool list
// changed, so front-ends showing the tools (the MCP gateway) list them
// again. Only services publish or read it.
const ToolsChanged = "airlock.changed.tools"

// AgentCancel is where an agent asks to cancel one of its own calls; the
// agent token lets NATS permissions keep agents to their own calls.
func AgentCancel(agent string) string { return "airlock.agent." + agent + ".cancel" }

// AgentEventsToken is the last token of AgentEvents.
const AgentEventsToken = "events"

// AgentEvents is where an agent asks for the last stored events of one of
// its own calls (package lastevents): the agent token lets NATS permissions
// keep agents to their own calls, and the approval service, not the
// stream, reads them, with literal subjects only.
func AgentEvents(agent string) string { return "airlock.agent." + agent + "." + AgentEventsToken }

func isType(t string) bool {
	for _, k := range Types {
		if k == t {
			return true
		}
	}
	return false
}
