package calls

import (
	"strings"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// StateName is the short token of an approval state ("pending",
// "changes_requested"): what URLs, CSS classes, filters, JSON and the CLI
// use. An unspecified state is "unknown".
func StateName(s airlockv1.ApprovalState) string {
	if s == airlockv1.ApprovalState_APPROVAL_STATE_UNSPECIFIED {
		return "unknown"
	}
	return strings.ToLower(strings.TrimPrefix(s.String(), "APPROVAL_STATE_"))
}

// ParseState reads a state token (any case, with or without the
// APPROVAL_STATE_ prefix); ok is false for anything else.
func ParseState(s string) (airlockv1.ApprovalState, bool) {
	s = strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(s)), "APPROVAL_STATE_")
	v, ok := airlockv1.ApprovalState_value["APPROVAL_STATE_"+s]
	return airlockv1.ApprovalState(v), ok && v != 0
}

// StateText is a state as a person reads it ("changes requested",
// "approved, running"): what the console, Slack and the CLI show.
func StateText(s airlockv1.ApprovalState) string {
	switch s {
	case airlockv1.ApprovalState_APPROVAL_STATE_PENDING:
		return "pending"
	case airlockv1.ApprovalState_APPROVAL_STATE_APPROVED:
		return "approved"
	case airlockv1.ApprovalState_APPROVAL_STATE_REJECTED:
		return "rejected"
	case airlockv1.ApprovalState_APPROVAL_STATE_CHANGES_REQUESTED:
		return "changes requested"
	case airlockv1.ApprovalState_APPROVAL_STATE_CANCELED:
		return "canceled"
	case airlockv1.ApprovalState_APPROVAL_STATE_EXPIRED:
		return "expired"
	case airlockv1.ApprovalState_APPROVAL_STATE_EXECUTING:
		return "approved, running"
	case airlockv1.ApprovalState_APPROVAL_STATE_COMPLETED:
		return "approved, completed"
	case airlockv1.ApprovalState_APPROVAL_STATE_FAILED:
		return "approved, failed"
	}
	return "unknown"
}

// DecidedStates are every state after pending, in the order people read
// them: what "decided" means in history filters and `approvals list --state decided`.
var DecidedStates = []airlockv1.ApprovalState{
	airlockv1.ApprovalState_APPROVAL_STATE_APPROVED, airlockv1.ApprovalState_APPROVAL_STATE_EXECUTING,
	airlockv1.ApprovalState_APPROVAL_STATE_COMPLETED, airlockv1.ApprovalState_APPROVAL_STATE_FAILED,
	airlockv1.ApprovalState_APPROVAL_STATE_REJECTED, airlockv1.ApprovalState_APPROVAL_STATE_CHANGES_REQUESTED,
	airlockv1.ApprovalState_APPROVAL_STATE_EXPIRED, airlockv1.ApprovalState_APPROVAL_STATE_CANCELED,
}

// Stage is how far along a call in state s is, for ordering what is shown
// of it: 1 pending, 2 decided (approved, rejected, changes requested,
// canceled, expired), 3 running, 4 run (completed, failed); 0 unspecified.
// A state of a later stage never gives way to one of an earlier stage.
func Stage(s airlockv1.ApprovalState) int {
	switch s {
	case airlockv1.ApprovalState_APPROVAL_STATE_PENDING:
		return 1
	case airlockv1.ApprovalState_APPROVAL_STATE_EXECUTING:
		return 3
	case airlockv1.ApprovalState_APPROVAL_STATE_COMPLETED, airlockv1.ApprovalState_APPROVAL_STATE_FAILED:
		return 4
	case airlockv1.ApprovalState_APPROVAL_STATE_UNSPECIFIED:
		return 0
	}
	return 2
}

// Approved reports whether a person's approval settled the state (approved,
// and what the executor made of it since).
func Approved(s airlockv1.ApprovalState) bool {
	switch s {
	case airlockv1.ApprovalState_APPROVAL_STATE_APPROVED, airlockv1.ApprovalState_APPROVAL_STATE_EXECUTING,
		airlockv1.ApprovalState_APPROVAL_STATE_COMPLETED, airlockv1.ApprovalState_APPROVAL_STATE_FAILED:
		return true
	}
	return false
}

// DecisionEvent is the event type that records how a call in state s was
// decided — approved also for a call approved and run since (executing,
// completed, failed) — or "" for a state no decision led to (pending).
// It is the one table from states to decision events.
func DecisionEvent(s airlockv1.ApprovalState) string {
	switch {
	case Approved(s):
		return subject.Approved
	case s == airlockv1.ApprovalState_APPROVAL_STATE_REJECTED:
		return subject.Rejected
	case s == airlockv1.ApprovalState_APPROVAL_STATE_CHANGES_REQUESTED:
		return subject.ChangesRequested
	case s == airlockv1.ApprovalState_APPROVAL_STATE_EXPIRED:
		return subject.Expired
	case s == airlockv1.ApprovalState_APPROVAL_STATE_CANCELED:
		return subject.Canceled
	}
	return ""
}

// ActionWord is a decision kind's word in the audit trail and logs
// ("approve", "reject", "request_changes"; "decide" for an unknown kind).
func ActionWord(k airlockv1.DecisionKind) string {
	switch k {
	case airlockv1.DecisionKind_DECISION_KIND_APPROVE:
		return "approve"
	case airlockv1.DecisionKind_DECISION_KIND_REJECT:
		return "reject"
	case airlockv1.DecisionKind_DECISION_KIND_REQUEST_CHANGES:
		return "request_changes"
	}
	return "decide"
}
