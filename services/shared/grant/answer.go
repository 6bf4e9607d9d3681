package grant

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/calls"
)

// AnswerAsk is the one rule by which standing grants answer the policy —
// the policy service deciding a call, its shadow deciding a candidate's, a
// replay re-deciding history: an ask d becomes an allow by the first grant
// of gs, in the order given, that answer returns. answer judges one grant
// (the policy's decide.GrantApplies; the live policy service also spends a
// use) and returns the grant as it then stands, or nil when it does not
// answer. A deny or an allow is never answered, and neither is an ask when
// no grant answers: d is returned as it is. The allow is a copy of d naming
// the grant (its id, else the id gs gave it) and who made it, with what
// only a person's decision needs dropped (approvers, quorum, timeout,
// notify); the policy's rule, risk and reason stay in it.
func AnswerAsk(d *airlockv1.Decision, gs []*airlockv1.StandingGrant, answer func(*airlockv1.StandingGrant) *airlockv1.StandingGrant) *airlockv1.Decision {
	if d.GetAction() != airlockv1.Action_ACTION_ASK {
		return d
	}
	for _, g := range gs {
		used := answer(g)
		if used == nil {
			continue
		}
		id := used.GetId()
		if id == "" {
			id = g.GetId()
		}
		allow := proto.Clone(d).(*airlockv1.Decision)
		allow.Action, allow.GrantId = airlockv1.Action_ACTION_ALLOW, id
		allow.Reason = fmt.Sprintf("standing grant %s (created by %s) allows it; the policy said: %s", id, calls.ActorName(used.GetCreatedBy()), d.GetReason())
		allow.Approvers, allow.Quorum, allow.Timeout, allow.Notify = nil, 0, nil, nil
		return allow
	}
	return d
}
