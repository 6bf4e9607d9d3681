// Package callref is the identity of a call revision: (agent, call,
// revision). Agents choose their call ids, so a call id alone names nothing:
// every key, event id, claim, grant use and idempotency key airlock derives
// from a call is built here, and always includes the agent, so that no id an
// agent chooses can collide with another agent's.
package callref

import (
	"fmt"
	"strconv"
	"strings"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/ids"
)

// Ref names one revision of one agent's call.
type Ref struct {
	Agent string
	Call  string
	// Rev is the revision, 1 for a first submission.
	Rev uint32
}

// New validates the ids and returns the Ref; a revision of 0 means 1.
func New(agent, call string, rev uint32) (Ref, error) {
	if err := ids.Validate("agent id", agent); err != nil {
		return Ref{}, err
	}
	if err := ids.Validate("call id", call); err != nil {
		return Ref{}, err
	}
	return Ref{Agent: agent, Call: call, Rev: max(rev, 1)}, nil
}

// Of is the Ref of a call (a revision of 0 means 1). It does not validate:
// calls reach services only through ingress, which does.
func Of(c *airlockv1.ToolCall) Ref {
	return Ref{Agent: c.GetAgentId(), Call: c.GetCallId(), Rev: max(c.GetRevision(), 1)}
}

// OfEvent is the Ref an event is about.
func OfEvent(ev *airlockv1.Event) Ref {
	return Ref{Agent: ev.GetAgentId(), Call: ev.GetCallId(), Rev: max(ev.GetRevision(), 1)}
}

// OfProto is the Ref a CallRef message names.
func OfProto(r *airlockv1.CallRef) (Ref, error) {
	return New(r.GetAgentId(), r.GetCallId(), r.GetRevision())
}

// Proto is the CallRef message for r.
func (r Ref) Proto() *airlockv1.CallRef {
	return &airlockv1.CallRef{AgentId: r.Agent, CallId: r.Call, Revision: r.Rev}
}

// Key is the KV key of the revision, "<agent>.<call>.<rev>": approval
// records, execution liveness records and grant uses are stored under it.
func (r Ref) Key() string {
	return r.Agent + "." + r.Call + "." + strconv.FormatUint(uint64(max(r.Rev, 1)), 10)
}

// ParseKey reads a Key back.
func ParseKey(key string) (Ref, error) {
	parts := strings.Split(key, ".")
	if len(parts) != 3 {
		return Ref{}, fmt.Errorf("key %q is not <agent>.<call>.<revision>", key)
	}
	rev, err := strconv.ParseUint(parts[2], 10, 32)
	if err != nil || rev == 0 {
		return Ref{}, fmt.Errorf("key %q: revision %q is not a positive number", key, parts[2])
	}
	return New(parts[0], parts[1], uint32(rev))
}

// CallKey is the KV key prefix of every revision of the call, "<agent>.<call>".
func (r Ref) CallKey() string { return r.Agent + "." + r.Call }

// EventID is the id of an event that happens at most once per revision,
// "<agent>.<call>.<rev>.<what>"; it is also the event's Nats-Msg-Id in the
// events stream, which only services write.
func (r Ref) EventID(what string) string { return r.Key() + "." + what }

// IdempotencyKey is what a tool receives to recognise a retried execution:
// the agent's own key scoped by the agent ("<agent>/<key>"), or the
// revision's Key when the agent chose none. An agent can never pick another
// agent's key.
func (r Ref) IdempotencyKey(chosen string) string {
	if chosen == "" {
		return r.Key()
	}
	return r.Agent + "/" + chosen
}

// WithRev is the same call at another revision.
func (r Ref) WithRev(rev uint32) Ref { r.Rev = max(rev, 1); return r }

// String is how a person reads it: "bot/call_1 rev 2" ("bot/call_1" for revision 1).
func (r Ref) String() string {
	if r.Rev > 1 {
		return fmt.Sprintf("%s/%s rev %d", r.Agent, r.Call, r.Rev)
	}
	return r.Agent + "/" + r.Call
}

// System is the identity of something other than a call revision that
// events are recorded about: a standing grant, a console token, an intake
// message, a Slack interaction, a policy change, an audit retention run.
// Kind names the id space and ID an id in it; both are airlock's own (a
// grant id, an intake sequence, a digest), never an agent's choice, and
// kinds never share an id space, so no two writers build one event id for
// different events.
type System struct {
	Kind, ID string
}

// Kinds of System identities.
const (
	SystemGrant      = "grant"
	SystemToken      = "token"
	SystemIntake     = "intake"
	SystemSlack      = "slack"
	SystemTeams      = "teams"
	SystemPolicyRule = "policy_rule"
	SystemPolicyCode = "policy_code"
	SystemRetention  = "retention"
	// SystemShadow: a shadow on/off change, by its policy bucket revision;
	// SystemShadowCall: one call revision decided by one candidate (a
	// digest of both, so the subject carries no id an agent chose).
	SystemShadow     = "shadow"
	SystemShadowCall = "shadow_call"
)

// EventID is the id of the event that records what happened to s
// ("<kind>.<id>.<what>"), the same however often it is published.
func (s System) EventID(what string) string { return s.Kind + "." + s.ID + "." + what }
