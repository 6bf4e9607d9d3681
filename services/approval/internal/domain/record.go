package domain

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/canon"
	"github.com/airlock-gate/airlock/services/shared/ids"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// State names used in messages.
const (
	Pending          = airlockv1.ApprovalState_APPROVAL_STATE_PENDING
	Approved         = airlockv1.ApprovalState_APPROVAL_STATE_APPROVED
	Rejected         = airlockv1.ApprovalState_APPROVAL_STATE_REJECTED
	ChangesRequested = airlockv1.ApprovalState_APPROVAL_STATE_CHANGES_REQUESTED
	Canceled         = airlockv1.ApprovalState_APPROVAL_STATE_CANCELED
	Expired          = airlockv1.ApprovalState_APPROVAL_STATE_EXPIRED
	Executing        = airlockv1.ApprovalState_APPROVAL_STATE_EXECUTING
	Completed        = airlockv1.ApprovalState_APPROVAL_STATE_COMPLETED
	Failed           = airlockv1.ApprovalState_APPROVAL_STATE_FAILED
)

// StateName is the short lower-case name of a state ("pending", "changes_requested").
func StateName(s airlockv1.ApprovalState) string { return calls.StateName(s) }

// RefOf is the identity of rec's call revision; its Key is the record's KV
// key. A call keeps its id across revisions and each revision is decided
// afresh, so each revision has its own record and a decided revision is
// never overwritten; the agent is part of the key because agents choose
// their call ids.
func RefOf(rec *airlockv1.ApprovalRecord) callref.Ref { return callref.Of(rec.GetCall()) }

// Revision of the record's call (a missing revision is 1).
func Revision(rec *airlockv1.ApprovalRecord) uint32 { return max(rec.GetCall().GetRevision(), 1) }

// Quorum is the number of distinct approvals the record needs (at least 1).
func Quorum(rec *airlockv1.ApprovalRecord) int { return int(max(rec.GetDecision().GetQuorum(), 1)) }

// Deadline is when the record expires.
func Deadline(rec *airlockv1.ApprovalRecord) time.Time { return rec.GetDeadline().AsTime() }

// Arguments are what the executor will run when the record is approved: the
// reviewer's edited arguments if any, else the agent's.
func Arguments(rec *airlockv1.ApprovalRecord) *structpb.Struct {
	if rec.GetEditedArguments() != nil {
		return rec.GetEditedArguments()
	}
	return rec.GetCall().GetArguments()
}

// Settings are the service-wide defaults the domain needs.
type Settings struct {
	// DefaultTimeout applies when neither the event nor the decision sets a deadline.
	DefaultTimeout time.Duration
	// DefaultApprovers decide calls whose decision names none.
	DefaultApprovers []string
}

// NewRecord builds the pending record for an approval_requested event. The
// deadline is the event's, else the event time plus the decision's timeout,
// else plus the default timeout; computing it from the event (not the clock)
// gives the same record however often the event is redelivered.
func NewRecord(ev *airlockv1.Event, s Settings, now time.Time) (*airlockv1.ApprovalRecord, error) {
	ar := ev.GetApprovalRequested()
	if ar == nil || ar.GetCall() == nil {
		return nil, invalid("approval_requested event %s carries no call", ev.GetEventId())
	}
	call := proto.Clone(ar.GetCall()).(*airlockv1.ToolCall)
	if err := ids.Validate("call id", call.GetCallId()); err != nil {
		return nil, invalid("approval_requested event %s: %v", ev.GetEventId(), err)
	}
	if err := ids.Validate("agent id", call.GetAgentId()); err != nil {
		return nil, invalid("approval_requested event %s: %v", ev.GetEventId(), err)
	}
	call.Revision = max(call.Revision, 1)
	d := proto.Clone(ar.GetDecision()).(*airlockv1.Decision)
	if d == nil {
		d = &airlockv1.Decision{}
	}
	if len(d.Approvers) == 0 {
		d.Approvers = slices.Clone(s.DefaultApprovers)
	}
	created := now
	if ev.GetTime() != nil {
		created = ev.GetTime().AsTime()
	}
	deadline := ar.GetDeadline()
	if deadline == nil {
		timeout := s.DefaultTimeout
		if t := d.GetTimeout(); t != nil && t.AsDuration() > 0 {
			timeout = t.AsDuration()
		}
		deadline = timestamppb.New(created.Add(timeout))
	}
	digest, err := canon.Digest(call.GetArguments())
	if err != nil {
		return nil, invalid("approval_requested event %s: %v", ev.GetEventId(), err)
	}
	return &airlockv1.ApprovalRecord{
		Call:            call,
		Decision:        d,
		State:           Pending,
		Deadline:        deadline,
		ArgumentsDigest: digest,
		PolicyRevision:  d.GetPolicyRevision(),
		CreatedAt:       timestamppb.New(created),
		UpdatedAt:       timestamppb.New(created),
	}, nil
}

// Outcome is what a step of the state machine decided.
type Outcome struct {
	// Record is the next record to write with CAS; nil means write nothing.
	Record *airlockv1.ApprovalRecord
	// Applied is false when the request changed nothing (already decided,
	// duplicate vote): the caller answers with the current record.
	Applied bool
	// Event is the lifecycle event type to publish once Record is written
	// ("approved", "expired", ...), or "".
	Event string
	// Message is a sentence for the person who asked.
	Message string
	// Vote is true when a person's approval was counted (VoteEvent records it).
	Vote bool
	// Refused is the code of a decision that changed nothing for a reason
	// the audit records (RefusedEvent): RefusedDigest, RefusedDecided.
	Refused string
}

// Codes of decisions that change nothing, recorded as decision_refused.
const (
	// RefusedStale: the decision named a superseded revision.
	RefusedStale = "stale_revision"
	// RefusedDigest: an approval of arguments someone edited after the voter looked.
	RefusedDigest = "digest_mismatch"
	// RefusedDecided: the call was already decided by someone else.
	RefusedDecided = "already_decided"
)

// Kind of decision a principal makes.
type Kind int

const (
	Approve Kind = iota + 1
	Reject
	RequestChanges
)

// Action is the kind's word in the audit ("approve", "reject", "request_changes").
func (k Kind) Action() string { return calls.ActionWord(k.Proto()) }

// Proto is the kind as the decide API names it.
func (k Kind) Proto() airlockv1.DecisionKind {
	switch k {
	case Approve:
		return airlockv1.DecisionKind_DECISION_KIND_APPROVE
	case Reject:
		return airlockv1.DecisionKind_DECISION_KIND_REJECT
	case RequestChanges:
		return airlockv1.DecisionKind_DECISION_KIND_REQUEST_CHANGES
	}
	return airlockv1.DecisionKind_DECISION_KIND_UNSPECIFIED
}

// Decision is one principal's decision about one record.
type Decision struct {
	Kind Kind
	// By is the human deciding; By.Id is matched against the approvers.
	By *airlockv1.Actor
	// Reason: rejection reason, change feedback, or approval comment.
	Reason string
	// Edited arguments to approve instead of the agent's (Approve only).
	Edited *structpb.Struct
	// SawDigest is the arguments digest the decider was shown; a plain
	// approval of arguments someone else edited counts only if it matches,
	// and a digest that is given must match whether or not anyone edited.
	SawDigest string
	// Redecided is the policy's decision about the call with the Edited
	// arguments (the service asks the policy before deciding): a deny
	// refuses the edit, a stricter ask applies to the edited call. An edit
	// that changes the arguments without it is refused (fail closed).
	Redecided *airlockv1.Decision
}

// Requester in a rule's approvers lets the person the call acts for
// confirm it themselves (seed 002: "only the same user's reply counts") —
// only when airlock verified who that is (ToolCall.on_behalf_of_verified).
const Requester = calls.Requester

// Authorize checks that principal may decide rec (calls.Directory.Barred:
// they must match the record's approvers and must not be the principal the
// call acts for — unless the approvers name the requester, who may then
// confirm their own call) and says why not in a sentence for the person and
// the audit. Separation of duties is the default for every other rule.
func Authorize(rec *airlockv1.ApprovalRecord, dir Directory, principal, action string) *Refusal {
	call := rec.GetCall()
	switch dir.Barred(rec, principal) {
	case calls.NotBarred:
		return nil
	case calls.NoPrincipal:
		return &Refusal{Action: action, Why: "no principal given: the front-end must say who decides"}
	case calls.RoleNotPerson:
		return &Refusal{Action: action, Why: fmt.Sprintf("%q names a role in rules, not a person: sign in as yourself", Requester)}
	case calls.UnverifiedRequester:
		return &Refusal{Action: action, Why: fmt.Sprintf("call %s asks the person it acts for to confirm it, but airlock could not verify that %s is that person (bind the agent to its person in policy.on_behalf_of, or submit through a front-end)", call.GetCallId(), principal)}
	case calls.OwnCall:
		return &Refusal{Action: action, Why: fmt.Sprintf("%s cannot decide call %s: the agent acts on their behalf, so another approver must decide", principal, call.GetCallId())}
	}
	return &Refusal{Action: action, Why: fmt.Sprintf("%s is not among the approvers of call %s (%s): ask one of them to decide", principal, call.GetCallId(), strings.Join(rec.GetDecision().GetApprovers(), ", "))}
}

// Decide applies a principal's decision to rec at now. It returns a
// *Refusal when the principal may not decide (nothing changes), an *Invalid
// when the decision is malformed, else the Outcome. A record that is no
// longer pending is never changed: the Outcome says its current state. A
// pending record past its deadline expires instead of being decided.
func Decide(rec *airlockv1.ApprovalRecord, d Decision, dir Directory, now time.Time) (Outcome, error) {
	if d.Kind < Approve || d.Kind > RequestChanges {
		return Outcome{}, invalid("decision kind is missing: approve, reject or request changes")
	}
	if d.By.GetId() == "" {
		return Outcome{}, invalid("the decision names no principal: the front-end must pass who decides")
	}
	if d.Kind != Approve && d.Edited != nil {
		return Outcome{}, invalid("edited arguments come only with an approval")
	}
	if d.Edited != nil && rec.GetCall().GetAgentRuns() {
		// The agent runs a gate-only call itself, with the arguments it
		// asked for: an approval of other arguments would approve something
		// that never runs, and let the asked-for ones run unreviewed.
		return Outcome{}, invalid("call %s is gate-only: the agent runs the tool itself with the arguments it asked for, so they cannot be edited; approve them as they are, or request changes so the agent submits a revised call", rec.GetCall().GetCallId())
	}
	if d.Kind == RequestChanges && strings.TrimSpace(d.Reason) == "" {
		return Outcome{}, invalid("requesting changes needs feedback: tell the agent what to change")
	}
	if r := Authorize(rec, dir, d.By.GetId(), d.Kind.Action()); r != nil {
		return Outcome{}, r
	}
	if rec.GetState() != Pending {
		out := Outcome{Message: Settled(rec)}
		if rec.GetDecidedBy().GetId() != d.By.GetId() && !voted(rec, d.By.GetId()) {
			out.Refused = RefusedDecided // a late decision, not a repeat of one's own
		}
		return out, nil
	}
	if !now.Before(Deadline(rec)) {
		return expire(rec, now), nil
	}
	if rec.GetQueued() {
		return Outcome{Message: waiting(rec)}, nil
	}
	next := proto.Clone(rec).(*airlockv1.ApprovalRecord)
	next.UpdatedAt = timestamppb.New(now)
	switch d.Kind {
	case Reject:
		next.State, next.DecidedBy, next.Reason = Rejected, d.By, d.Reason
		return Outcome{Record: next, Applied: true, Event: subject.Rejected, Message: "rejected by " + d.By.GetId()}, nil
	case RequestChanges:
		next.State, next.DecidedBy, next.Reason = ChangesRequested, d.By, d.Reason
		return Outcome{Record: next, Applied: true, Event: subject.ChangesRequested, Message: "changes requested by " + d.By.GetId()}, nil
	}
	return approve(next, d, dir, now)
}

func approve(next *airlockv1.ApprovalRecord, d Decision, dir Directory, now time.Time) (Outcome, error) {
	quorum := Quorum(next)
	reset := false
	if d.Edited != nil {
		digest, err := canon.Digest(d.Edited)
		if err != nil {
			return Outcome{}, invalid("edited arguments: %v", err)
		}
		if digest != next.ArgumentsDigest {
			merged, err := redecide(next, d)
			if err != nil {
				return Outcome{}, err
			}
			next.Decision = merged
			quorum = Quorum(next)
			if r := Authorize(next, dir, d.By.GetId(), "approve_edited"); r != nil {
				r.Why = fmt.Sprintf("the policy asks other approvers about the call with the edited arguments (rule %s: %s), and %s: the edit was not approved; request changes so that the agent submits these arguments itself, or reject the call",
					ruleName(merged.GetRuleId()), d.Redecided.GetReason(), strings.TrimSuffix(r.Why, ": ask one of them to decide"))
				return Outcome{}, r
			}
			// Earlier votes approved other arguments; they do not count for these.
			reset = len(next.Votes) > 0
			next.Votes = nil
			next.EditedArguments = proto.Clone(d.Edited).(*structpb.Struct)
			next.ArgumentsDigest = digest
		}
	}
	if d.Edited == nil && (next.EditedArguments != nil || d.SawDigest != "") && d.SawDigest != next.ArgumentsDigest {
		// Someone edited the arguments after this approver looked (or the
		// approver names other arguments than these): their vote must not
		// approve arguments they have not seen.
		return Outcome{Refused: RefusedDigest, Message: fmt.Sprintf("the arguments were edited (now %s…): review the edited arguments and approve them again", short(next.ArgumentsDigest))}, nil
	}
	for _, v := range next.Votes {
		if v.GetBy().GetId() == d.By.GetId() {
			return Outcome{Message: fmt.Sprintf("%s already approved: %d of %d approvals", d.By.GetId(), len(next.Votes), quorum)}, nil
		}
	}
	next.Votes = append(next.Votes, &airlockv1.Vote{By: d.By, At: timestamppb.New(now), Comment: d.Reason})
	if len(next.Votes) < quorum {
		msg := fmt.Sprintf("%d of %d approvals: waiting for %d more approver(s)", len(next.Votes), quorum, quorum-len(next.Votes))
		if reset {
			msg = "arguments edited, earlier approvals were for other arguments and no longer count; " + msg
		}
		return Outcome{Record: next, Applied: true, Vote: true, Message: msg}, nil
	}
	next.State, next.DecidedBy, next.Reason = Approved, d.By, d.Reason
	msg := "approved by " + voters(next)
	if next.EditedArguments != nil {
		msg += " with edited arguments"
	}
	return Outcome{Record: next, Applied: true, Event: subject.Approved, Vote: true, Message: msg}, nil
}

// voted reports whether principal's approval is among rec's votes.
func voted(rec *airlockv1.ApprovalRecord, principal string) bool {
	for _, v := range rec.GetVotes() {
		if v.GetBy().GetId() == principal {
			return true
		}
	}
	return false
}

// redecide applies the policy's decision about the edited arguments to the
// record's: deny refuses the edit; an ask is merged so that the stricter of
// the two applies to the edited call (the higher risk, the larger quorum,
// and the approvers the policy names for the edited call); an allow changes
// nothing (a person was asked, and still decides). The editor must be
// allowed to approve the edited call, or the edit is refused.
func redecide(next *airlockv1.ApprovalRecord, d Decision) (*airlockv1.Decision, error) {
	re := d.Redecided
	orig := next.GetDecision()
	if re == nil {
		return nil, invalid("the edited arguments were not checked against the policy, so they cannot be approved: try again")
	}
	switch re.GetAction() {
	case airlockv1.Action_ACTION_DENY:
		return nil, &Refusal{Action: "approve_edited", Why: fmt.Sprintf("the policy denies the call with the edited arguments (rule %s: %s): it was not approved; approve the original arguments, edit them otherwise, reject the call or request changes",
			ruleName(re.GetRuleId()), re.GetReason())}
	case airlockv1.Action_ACTION_ASK:
	default:
		return orig, nil
	}
	merged := proto.Clone(orig).(*airlockv1.Decision)
	if re.GetRisk() > merged.GetRisk() {
		merged.Risk = re.GetRisk()
	}
	if re.GetQuorum() > merged.GetQuorum() {
		merged.Quorum = re.GetQuorum()
	}
	changed := re.GetRisk() > orig.GetRisk() || re.GetQuorum() > max(orig.GetQuorum(), 1)
	if len(re.GetApprovers()) > 0 && !slices.Equal(re.GetApprovers(), orig.GetApprovers()) {
		merged.Approvers = slices.Clone(re.GetApprovers())
		changed = true
	}
	if !changed {
		return merged, nil
	}
	merged.RuleId, merged.PolicyRevision, merged.DecisionId = re.GetRuleId(), re.GetPolicyRevision(), re.GetDecisionId()
	merged.ArgumentsDigest, merged.DecidedAt = re.GetArgumentsDigest(), re.GetDecidedAt()
	merged.Reason = fmt.Sprintf("%s (the policy's decision on the edited arguments; the original arguments: %s)", re.GetReason(), orig.GetReason())
	return merged, nil
}

func ruleName(id string) string {
	if id == "" {
		return "(no rule)"
	}
	return id
}

func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}

func voters(rec *airlockv1.ApprovalRecord) string {
	var names []string
	for _, v := range rec.GetVotes() {
		names = append(names, v.GetBy().GetId())
	}
	return strings.Join(names, " and ")
}

// Settled describes a record that is no longer pending, for a person whose
// decision came too late: "already rejected by bob".
func Settled(rec *airlockv1.ApprovalRecord) string {
	by := ""
	if id := rec.GetDecidedBy().GetId(); id != "" {
		by = " by " + id
	}
	switch rec.GetState() {
	case Approved, Executing, Completed, Failed:
		if rec.GetState() == Approved {
			return "already approved" + by + "; nothing changed"
		}
		return "already approved" + by + " and " + StateName(rec.GetState()) + "; nothing changed"
	case Expired:
		return "the call expired at " + Deadline(rec).UTC().Format(time.RFC3339) + " without a decision; it will not run"
	case Canceled:
		return "the call was canceled" + by + "; it will not run"
	case Pending:
		return "still pending"
	case ChangesRequested:
		return "changes were already requested" + by + "; nothing changed (the agent may submit a new revision)"
	}
	return "already " + StateName(rec.GetState()) + by + "; nothing changed"
}

// Cancel withdraws a pending record. An agent (By.Type AGENT) may cancel
// only its own calls; a person may cancel a call they could decide or that
// acts on their behalf, and an operator (By.Operator, vouched for by the
// front-end) any call. Anything but pending is left as it is.
func Cancel(rec *airlockv1.ApprovalRecord, by *airlockv1.Actor, reason string, dir Directory, now time.Time) (Outcome, error) {
	switch by.GetType() {
	case airlockv1.ActorType_ACTOR_TYPE_AGENT:
		if by.GetId() != rec.GetCall().GetAgentId() {
			return Outcome{}, &Refusal{Action: "cancel", Why: fmt.Sprintf("agent %s cannot cancel call %s: it belongs to another agent", by.GetId(), rec.GetCall().GetCallId())}
		}
	case airlockv1.ActorType_ACTOR_TYPE_SERVICE:
	default:
		if by.GetId() == "" {
			return Outcome{}, invalid("the cancel request names no principal: the front-end must pass who cancels")
		}
		// An operator stops any pending call: a cancel only keeps a call
		// from running, which an operator's rule changes could do anyway.
		if !by.GetOperator() && !dir.MayCancel(rec, by.GetId()) {
			return Outcome{}, &Refusal{Action: "cancel", Why: fmt.Sprintf("%s cannot cancel call %s: only its approvers, the person it acts for or an admin can", by.GetId(), rec.GetCall().GetCallId())}
		}
	}
	if rec.GetState() != Pending {
		return Outcome{Message: Settled(rec)}, nil
	}
	next := proto.Clone(rec).(*airlockv1.ApprovalRecord)
	next.State, next.DecidedBy, next.Reason, next.UpdatedAt = Canceled, by, reason, timestamppb.New(now)
	if next.Reason == "" {
		next.Reason = "canceled by " + by.GetId()
	}
	return Outcome{Record: next, Applied: true, Event: subject.Canceled, Message: "canceled by " + by.GetId()}, nil
}

// Expire ends a pending record whose deadline has passed; otherwise it
// changes nothing.
func Expire(rec *airlockv1.ApprovalRecord, now time.Time) Outcome {
	if rec.GetState() != Pending || now.Before(Deadline(rec)) {
		return Outcome{}
	}
	return expire(rec, now)
}

func expire(rec *airlockv1.ApprovalRecord, now time.Time) Outcome {
	next := proto.Clone(rec).(*airlockv1.ApprovalRecord)
	next.State, next.UpdatedAt = Expired, timestamppb.New(now)
	next.DecidedBy = &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "approval"}
	next.Reason = "no decision before the deadline"
	return Outcome{Record: next, Event: subject.Expired, Message: Settled(next)}
}

// Timer is a reminder or an escalation that fell due.
type Timer string

const (
	Remind   Timer = "remind"
	Escalate Timer = "escalate"
)

// NextDue is when the sweeper next has something to do for rec, a pending
// record: its deadline, or an escalation or a reminder DueTimer fires
// before it. Until then neither Expire nor DueTimer changes rec, so a
// sweeper need look at a pending record only once its NextDue has come.
func NextDue(rec *airlockv1.ApprovalRecord) time.Time {
	at := Deadline(rec)
	created := rec.GetCreatedAt().AsTime()
	d := rec.GetDecision()
	if !rec.GetEscalated() && len(d.GetEscalateTo()) > 0 && d.GetEscalateAfter() != nil {
		if t := created.Add(d.GetEscalateAfter().AsDuration()); t.Before(at) {
			at = t
		}
	}
	if !rec.GetReminded() && d.GetRemindAfter() != nil && d.GetRemindAfter().AsDuration() > 0 {
		if t := created.Add(d.GetRemindAfter().AsDuration()); t.Before(at) {
			at = t
		}
	}
	return at
}

// DueTimer returns the record with the first due timer marked done
// (reminded, or escalated with escalate_to added to the approvers), and which
// timer it was; ok is false when nothing is due. Timers count from the
// record's creation and only run while it is pending and before its deadline.
func DueTimer(rec *airlockv1.ApprovalRecord, now time.Time) (next *airlockv1.ApprovalRecord, t Timer, ok bool) {
	if rec.GetState() != Pending || !now.Before(Deadline(rec)) {
		return nil, "", false
	}
	created := rec.GetCreatedAt().AsTime()
	d := rec.GetDecision()
	if !rec.GetEscalated() && len(d.GetEscalateTo()) > 0 && d.GetEscalateAfter() != nil && !now.Before(created.Add(d.GetEscalateAfter().AsDuration())) {
		next = proto.Clone(rec).(*airlockv1.ApprovalRecord)
		for _, a := range d.GetEscalateTo() {
			if !slices.Contains(next.Decision.Approvers, a) {
				next.Decision.Approvers = append(next.Decision.Approvers, a)
			}
		}
		next.Escalated, next.UpdatedAt = true, timestamppb.New(now)
		return next, Escalate, true
	}
	if !rec.GetReminded() && d.GetRemindAfter() != nil && d.GetRemindAfter().AsDuration() > 0 && !now.Before(created.Add(d.GetRemindAfter().AsDuration())) {
		next = proto.Clone(rec).(*airlockv1.ApprovalRecord)
		next.Reminded, next.UpdatedAt = true, timestamppb.New(now)
		return next, Remind, true
	}
	return nil, "", false
}

// Started moves an approved record to executing; any other state is left alone
// (an executor event can be redelivered, or arrive for a call policy allowed).
func Started(rec *airlockv1.ApprovalRecord, now time.Time) *airlockv1.ApprovalRecord {
	if rec.GetState() != Approved {
		return nil
	}
	next := proto.Clone(rec).(*airlockv1.ApprovalRecord)
	next.State, next.UpdatedAt = Executing, timestamppb.New(now)
	return next
}

// Finished moves an approved or executing record to completed or failed.
func Finished(rec *airlockv1.ApprovalRecord, ok bool, now time.Time) *airlockv1.ApprovalRecord {
	if rec.GetState() != Approved && rec.GetState() != Executing {
		return nil
	}
	next := proto.Clone(rec).(*airlockv1.ApprovalRecord)
	next.State, next.UpdatedAt = Failed, timestamppb.New(now)
	if ok {
		next.State = Completed
	}
	return next
}

// Final reports whether rec's decision is made (every state but pending);
// after it only the executor's progress changes the record.
func Final(rec *airlockv1.ApprovalRecord) bool { return rec.GetState() != Pending }
