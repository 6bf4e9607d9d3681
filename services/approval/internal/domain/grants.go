package domain

import (
	"fmt"
	"path"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/grant"
)

// NewGrant builds a standing grant ("always allow") from the call of rec:
// the agent, server and tool come from the call, narrowed by want's
// argument globs and pinned values (only_listed_arguments: no other
// argument), use limit and expiry. Only a principal who may approve the
// call may create a grant from it.
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
	for _, ptr := range want.GetAnyArguments() {
		if !strings.HasPrefix(ptr, "/") {
			return nil, invalid("argument %q allowed any value is not a JSON pointer: write it like /path", ptr)
		}
	}
	if want.GetLimitedUses() && want.GetUsesLeft() == 0 {
		return nil, invalid("a grant limited in uses needs uses_left of at least 1")
	}
	if exp := want.GetExpiresAt(); exp != nil && !exp.AsTime().After(now) {
		return nil, invalid("the grant's expiry %s is in the past: choose a later time", exp.AsTime().UTC().Format(time.RFC3339))
	}
	call := rec.GetCall()
	g := &airlockv1.StandingGrant{
		Id:                  id,
		AgentId:             call.GetAgentId(),
		Server:              call.GetServer(),
		Tool:                call.GetTool(),
		ArgumentGlobs:       want.GetArgumentGlobs(),
		ArgumentValues:      want.GetArgumentValues(),
		OnlyListedArguments: want.GetOnlyListedArguments(),
		AnyArguments:        want.GetAnyArguments(),
		UsesLeft:            want.GetUsesLeft(),
		LimitedUses:         want.GetLimitedUses() || want.GetUsesLeft() > 0,
		ExpiresAt:           want.GetExpiresAt(),
		CreatedBy:           by,
		CreatedAt:           timestamppb.New(now),
		FromCallId:          call.GetCallId(),
		RuleId:              rec.GetDecision().GetRuleId(),
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
