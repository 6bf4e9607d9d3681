package domain

import (
	"fmt"
	"path"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/calls"
	"github.com/airlock-gate/airlock/services/shared/grant"
)

// NewGrant builds a standing grant ("always allow") from the call of rec:
// the agent, server and tool come from the call, narrowed by want's
// argument globs, pinned values (only_listed_arguments: no other
// argument), numeric ranges (each must hold the call's own number),
// command prefixes (each must start the call's own command),
// exact arguments (want.arguments_digest, which must be the record's), use
// limit and expiry, and the highest risk it answers: the call's (the
// policy's rating of it), or lower when want says so. Only a principal who may approve the call may create a
// grant from it — for a rule that asks the requester, the requester, whose
// remembered decision it then is: such a grant allows only calls made on
// that same person's behalf (StandingGrant.on_behalf_of), never anyone
// else's.
func NewGrant(rec *airlockv1.ApprovalRecord, want *airlockv1.StandingGrant, by *airlockv1.Actor, dir Directory, id string, now time.Time) (*airlockv1.StandingGrant, error) {
	if by.GetId() == "" {
		return nil, invalid("the grant request names no principal: the front-end must pass who creates it")
	}
	if r := Authorize(rec, dir, by.GetId(), "grant"); r != nil {
		return nil, r
	}
	if q := Quorum(rec); q > 1 {
		return nil, invalid("this call needs %d approvals: a standing grant would let one person stand in for all of them, so it cannot be made from it", q)
	}
	for ptr, glob := range want.GetArgumentGlobs() {
		if !strings.HasPrefix(ptr, "/") {
			return nil, invalid("argument constraint %q is not a JSON pointer: write it like /path", ptr)
		}
		if glob == "" {
			return nil, invalid("argument constraint %s has an empty glob: give a pattern such as /tmp/*", ptr)
		}
		if _, err := path.Match(glob, ""); err != nil {
			return nil, invalid("argument constraint %s: glob %q is malformed: %v", ptr, glob, err)
		}
	}
	for ptr, v := range want.GetArgumentValues() {
		if !strings.HasPrefix(ptr, "/") {
			return nil, invalid("pinned argument %q is not a JSON pointer: write it like /path", ptr)
		}
		if v == nil || v.GetKind() == nil {
			return nil, invalid("pinned argument %s has no value: give the exact JSON value it must have", ptr)
		}
		if _, ok := want.GetArgumentGlobs()[ptr]; ok {
			return nil, invalid("argument %s is both pinned to a value and matched by a glob: keep one", ptr)
		}
	}
	for ptr, r := range want.GetArgumentRanges() {
		if !strings.HasPrefix(ptr, "/") {
			return nil, invalid("numeric range %q is not on a JSON pointer: write it like /count", ptr)
		}
		if why := grant.CheckRange(r); why != "" {
			return nil, invalid("numeric range on %s: %s", ptr, why)
		}
		if _, ok := want.GetArgumentValues()[ptr]; ok {
			return nil, invalid("argument %s is both pinned to a value and given a range: keep one", ptr)
		}
		if v := calls.Arg(Arguments(rec), ptr); !grant.InRange(r, v) {
			return nil, invalid("numeric range %s..%s on %s does not hold the call's own value %s: remember a range around the number you reviewed", grant.Number(r.GetMin()), grant.Number(r.GetMax()), ptr, grant.ValueJSON(v))
		}
	}
	for _, ptr := range want.GetAnyArguments() {
		if !strings.HasPrefix(ptr, "/") {
			return nil, invalid("argument %q allowed any value is not a JSON pointer: write it like /path", ptr)
		}
	}
	for ptr, prefix := range want.GetCommandPrefixes() {
		if !strings.HasPrefix(ptr, "/") {
			return nil, invalid("command prefix %q is not on a JSON pointer: write it like /command", ptr)
		}
		v, _ := calls.StringArg(Arguments(rec), ptr)
		if strings.TrimSpace(prefix) == "" || !calls.CommandHasPrefix(v, prefix) {
			return nil, invalid("command prefix %q does not start the call's own command %q: remember a prefix of the command you reviewed (a plain command, without ; | & or redirection)", prefix, v)
		}
	}
	if d := want.GetArgumentsDigest(); d != "" && d != rec.GetArgumentsDigest() {
		return nil, invalid("the grant is pinned to arguments other than the call's (digest %s…): review the call again and pin the arguments you saw", short(d))
	}
	if want.GetLimitedUses() && want.GetUsesLeft() == 0 {
		return nil, invalid("a grant limited in uses needs uses_left of at least 1")
	}
	if exp := want.GetExpiresAt(); exp != nil && !exp.AsTime().After(now) {
		return nil, invalid("the grant's expiry %s is in the past: choose a later time", exp.AsTime().UTC().Format(time.RFC3339))
	}
	// The grant answers calls no riskier than the one reviewed; a request
	// may narrow that, never widen it.
	risk := rec.GetDecision().GetRisk()
	if risk == airlockv1.Risk_RISK_UNSPECIFIED {
		risk = airlockv1.Risk_RISK_MEDIUM
	}
	if want.GetMaxRisk() > risk {
		return nil, invalid("the grant asks to answer %s-risk calls, but the call it is made from is %s risk: a grant never reaches calls riskier than the one reviewed", calls.RiskName(want.GetMaxRisk()), calls.RiskName(risk))
	}
	if want.GetMaxRisk() != airlockv1.Risk_RISK_UNSPECIFIED {
		risk = want.GetMaxRisk()
	}
	call := rec.GetCall()
	g := &airlockv1.StandingGrant{
		Id:                  id,
		AgentId:             call.GetAgentId(),
		Server:              call.GetServer(),
		Tool:                call.GetTool(),
		ArgumentGlobs:       want.GetArgumentGlobs(),
		ArgumentValues:      want.GetArgumentValues(),
		ArgumentRanges:      want.GetArgumentRanges(),
		OnlyListedArguments: want.GetOnlyListedArguments(),
		AnyArguments:        want.GetAnyArguments(),
		UsesLeft:            want.GetUsesLeft(),
		LimitedUses:         want.GetLimitedUses() || want.GetUsesLeft() > 0,
		ExpiresAt:           want.GetExpiresAt(),
		CreatedBy:           by,
		CreatedAt:           timestamppb.New(now),
		FromCallId:          call.GetCallId(),
		RuleId:              rec.GetDecision().GetRuleId(),
		CommandPrefixes:     want.GetCommandPrefixes(),
		ArgumentsDigest:     want.GetArgumentsDigest(),
		MaxRisk:             risk,
	}
	if by.GetId() == call.GetOnBehalfOf() {
		// A requester remembers only their own decisions: the grant never
		// reaches calls made for someone else (who would have needed a
		// reviewer).
		g.OnBehalfOf = by.GetId()
	}
	return g, nil
}

// Revoke marks g revoked by by. Its creator may revoke it, and so may anyone
// who may approve the call it was created from (rec, nil when that record is
// gone). Revoking a revoked grant changes nothing.
func Revoke(g *airlockv1.StandingGrant, rec *airlockv1.ApprovalRecord, by *airlockv1.Actor, dir Directory) (next *airlockv1.StandingGrant, changed bool, err error) {
	if by.GetId() == "" {
		return nil, false, invalid("the revoke request names no principal: the front-end must pass who revokes")
	}
	if by.GetId() != g.GetCreatedBy().GetId() {
		if rec == nil {
			return nil, false, &Refusal{Action: "revoke", Why: fmt.Sprintf("%s cannot revoke grant %s: only %s, who created it, can", by.GetId(), g.GetId(), g.GetCreatedBy().GetId())}
		}
		if r := Authorize(rec, dir, by.GetId(), "revoke"); r != nil {
			return nil, false, &Refusal{Action: "revoke", Why: fmt.Sprintf("%s cannot revoke grant %s: only its creator or an approver of call %s can", by.GetId(), g.GetId(), g.GetFromCallId())}
		}
	}
	if g.GetRevoked() {
		return g, false, nil
	}
	next = proto.Clone(g).(*airlockv1.StandingGrant)
	next.Revoked, next.RevokedBy = true, by
	return next, true, nil
}

// GrantActive reports whether g can still allow a call at now: not revoked,
// not expired, uses left when limited.
func GrantActive(g *airlockv1.StandingGrant, now time.Time) bool { return grant.Live(g, now) }
