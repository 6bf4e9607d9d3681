package domain

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/canon"
	"github.com/airlock-gate/airlock/services/shared/envelope"
	"github.com/airlock-gate/airlock/services/shared/preview"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// FinalEvent returns the lifecycle event that records how rec was decided
// (approved, rejected, changes_requested, expired, canceled), or nil for a
// record that is pending or only records the executor's progress. It depends
// on the record alone — id "<agent>.<call>.<revision>.<type>", time = the record's
// update time — so publishing it again after a crash or a retried request
// stores one event.
func FinalEvent(rec *airlockv1.ApprovalRecord) (*airlockv1.Event, error) {
	if rec.GetState() != Approved && calls.Approved(rec.GetState()) {
		return nil, nil // the executor's progress: its approval was recorded before
	}
	typ := calls.DecisionEvent(rec.GetState())
	if typ == "" {
		return nil, nil
	}
	ev := base(rec, typ)
	switch typ {
	case subject.Approved:
		a, err := approvedBody(rec)
		if err != nil {
			return nil, err
		}
		ev.Body = &airlockv1.Event_Approved{Approved: a}
	case subject.Rejected:
		reason := rec.GetReason()
		if reason == "" {
			reason = "rejected by " + rec.GetDecidedBy().GetId()
		}
		ev.Body = &airlockv1.Event_Rejected{Rejected: &airlockv1.Rejected{Reason: reason}}
	case subject.ChangesRequested:
		ev.Body = &airlockv1.Event_ChangesRequested{ChangesRequested: &airlockv1.ChangesRequested{Feedback: rec.GetReason()}}
	case subject.Expired:
		ev.Body = &airlockv1.Event_Expired{Expired: &airlockv1.Expired{Deadline: rec.GetDeadline()}}
	case subject.Canceled:
		ev.Body = &airlockv1.Event_Canceled{Canceled: &airlockv1.Canceled{Reason: rec.GetReason()}}
	}
	return ev, nil
}

func base(rec *airlockv1.ApprovalRecord, typ string) *airlockv1.Event {
	call := rec.GetCall()
	actor := rec.GetDecidedBy()
	if actor == nil {
		actor = &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "approval"}
	}
	ev := envelope.ForCall(call, actor)
	ev.EventId, ev.Time = RefOf(rec).EventID(typ), rec.GetUpdatedAt()
	return ev
}

// approvedBody binds the approval to exact arguments: the call carries the
// arguments to run (the edited ones after an edit) and their digest, and the
// agent's originals are kept beside them for the audit.
func approvedBody(rec *airlockv1.ApprovalRecord) (*airlockv1.Approved, error) {
	call := proto.Clone(rec.GetCall()).(*airlockv1.ToolCall)
	args := Arguments(rec)
	digest, err := canon.Digest(args)
	if err != nil {
		return nil, fmt.Errorf("digest of approved arguments of %s: %w", RefOf(rec), err)
	}
	a := &airlockv1.Approved{
		Decision:        rec.GetDecision(),
		Votes:           rec.GetVotes(),
		ArgumentsDigest: digest,
		PolicyRevision:  rec.GetPolicyRevision(),
	}
	if rec.GetEditedArguments() != nil {
		a.Edited = true
		a.OriginalArguments = call.GetArguments()
		if a.OriginalArgumentsDigest, err = canon.Digest(call.GetArguments()); err != nil {
			return nil, fmt.Errorf("digest of original arguments of %s: %w", RefOf(rec), err)
		}
		call.Arguments = proto.Clone(args).(*structpb.Struct)
	}
	a.Call = call
	if p := rec.GetPreview(); preview.Has(p) {
		a.PreviewDigest, a.Precondition = p.GetDigest(), p.GetPrecondition()
		// A dry run's own account is of the arguments the agent sent: after
		// an edit it differs by design, so only a state of the world (a
		// file's hash) is still checked.
		if a.Edited && strings.HasPrefix(a.Precondition, "preview:") {
			a.Precondition = ""
		}
	}
	return a, nil
}

// UnauthorizedEvent records a refused attempt by actor on the call of rec.
// Attempts can repeat, so the id is random (left empty for the envelope).
func UnauthorizedEvent(call *airlockv1.ToolCall, actor *airlockv1.Actor, r *Refusal) *airlockv1.Event {
	ev := attempt(call, actor)
	ev.Body = &airlockv1.Event_UnauthorizedAttempt{UnauthorizedAttempt: &airlockv1.UnauthorizedAttempt{Action: r.Action, Why: r.Why}}
	return ev
}

// attempt is the envelope of an event about actor's attempt on call (random id).
func attempt(call *airlockv1.ToolCall, actor *airlockv1.Actor) *airlockv1.Event {
	return envelope.ForCall(call, actor)
}

// NotifiedEvent records one delivery to one channel (kind announce, remind,
// escalate or outcome). Deliveries can repeat, so the id is random.
func NotifiedEvent(rec *airlockv1.ApprovalRecord, channel, ref, kind string) *airlockv1.Event {
	ev := envelope.ForCall(rec.GetCall(), &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "approval"})
	ev.Body = &airlockv1.Event_Notified{Notified: &airlockv1.Notified{Channel: channel, Ref: ref, Kind: kind}}
	return ev
}

// VoteEvent records the last vote of rec (just counted): who, the quorum
// progress and the arguments approved. Its id is derived from the voter and
// the digest, so republishing stores one event and a vote after an edit is
// a new one.
func VoteEvent(rec *airlockv1.ApprovalRecord) *airlockv1.Event {
	votes := rec.GetVotes()
	if len(votes) == 0 {
		return nil
	}
	v := votes[len(votes)-1]
	sum := sha256.Sum256([]byte(v.GetBy().GetId() + "\x00" + rec.GetArgumentsDigest()))
	ev := envelope.ForCall(rec.GetCall(), v.GetBy())
	ev.EventId, ev.Time = RefOf(rec).EventID(subject.VoteCast)+"."+hex.EncodeToString(sum[:8]), v.GetAt()
	ev.Body = &airlockv1.Event_VoteCast{VoteCast: &airlockv1.VoteCast{Vote: v, Votes: uint32(len(votes)), Quorum: uint32(Quorum(rec)),
		ArgumentsDigest: rec.GetArgumentsDigest(), Edited: rec.GetEditedArguments() != nil}}
	return ev
}

// RefusedEvent records a decision by actor that changed nothing (code, why).
// Its id is derived from the call revision, the actor and its channel, the
// action and the code: the same refusal repeated (a client sending one confirmation back
// over and over) is stored once per the stream's duplicate window, not
// once per request.
func RefusedEvent(call *airlockv1.ToolCall, actor *airlockv1.Actor, action, code, why string) *airlockv1.Event {
	ev := attempt(call, actor)
	sum := sha256.Sum256([]byte(actor.GetId() + "\x00" + actor.GetChannel() + "\x00" + action + "\x00" + code))
	ev.EventId = callref.Of(call).EventID(subject.DecisionRefused) + "." + hex.EncodeToString(sum[:8])
	ev.Body = &airlockv1.Event_DecisionRefused{DecisionRefused: &airlockv1.DecisionRefused{Action: action, Code: code, Why: why}}
	return ev
}

// GrantScope copies what g allows into an event body.
func GrantScope(g *airlockv1.StandingGrant) *airlockv1.GrantScope {
	return &airlockv1.GrantScope{GrantId: g.GetId(), AgentId: g.GetAgentId(), Server: g.GetServer(), Tool: g.GetTool(),
		ArgumentGlobs: g.GetArgumentGlobs(), UsesLeft: g.GetUsesLeft(), LimitedUses: g.GetLimitedUses(), ExpiresAt: g.GetExpiresAt(),
		FromCallId: g.GetFromCallId(), RuleId: g.GetRuleId()}
}

// GrantEvent is a system-wide event about grant g (created, revoked,
// expired), on airlock.evt._system.<grant id>.<type>; one per grant and
// type, so its id is "<grant id>.<type>".
func GrantEvent(g *airlockv1.StandingGrant, actor *airlockv1.Actor, body isEventBody) *airlockv1.Event {
	ev := &airlockv1.Event{AgentId: subject.SystemAgent, CallId: g.GetId(), Actor: actor}
	switch b := body.(type) {
	case *airlockv1.GrantCreated:
		ev.Body = &airlockv1.Event_GrantCreated{GrantCreated: b}
	case *airlockv1.GrantRevoked:
		ev.Body = &airlockv1.Event_GrantRevoked{GrantRevoked: b}
	case *airlockv1.GrantExpired:
		ev.Body = &airlockv1.Event_GrantExpired{GrantExpired: b}
	}
	ev.EventId = callref.System{Kind: callref.SystemGrant, ID: g.GetId()}.EventID(envelope.TypeOf(ev))
	return ev
}

// isEventBody is one of the grant event bodies GrantEvent takes.
type isEventBody interface{ ProtoReflect() protoreflect.Message }
