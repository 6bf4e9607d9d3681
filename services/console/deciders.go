package console

import (
	"context"
	"html/template"
	"strings"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/calls"
)

// mayAct reports whether p may decide rec: the console's own gate
// (mayDecide: a reviewer, or the requester of a self-confirmed call) and
// the approval service's rule about that very call (calls.Directory.Barred:
// its approvers, separation of duties), so that the inbox counts only what
// a decision by p would not be refused for.
func (con *Console) mayAct(p Principal, rec *airlockv1.ApprovalRecord) bool {
	return mayActIn(con.dir, p, rec)
}

// mayActIn is mayAct with the directory given: the push notifier
// (push.go), which runs without a Console, asks it of each subscriber.
func mayActIn(dir calls.Directory, p Principal, rec *airlockv1.ApprovalRecord) bool {
	return mayDecide(p, rec) && dir.Vouched(p.Actor("")).Barred(rec, p.Name) == calls.NotBarred
}

// dirFor is the directory as the approval service reads it for p's
// decisions: with the groups the console vouches for p (single sign-on).
func (con *Console) dirFor(p Principal) calls.Directory {
	return con.dir.Vouched(p.Actor(""))
}

// whyNot says in a few words why p may not decide rec ("" when p may).
func (con *Console) whyNot(p Principal, rec *airlockv1.ApprovalRecord) string {
	if !mayDecide(p, rec) {
		if len(p.Roles) == 0 {
			return "You have no role that can decide calls"
		}
		return "Your role (" + strings.Join(p.Roles, ", ") + ") cannot decide calls"
	}
	switch con.dirFor(p).Barred(rec, p.Name) {
	case calls.NotBarred:
		return ""
	case calls.OwnCall:
		if !rec.GetCall().GetOnBehalfOfVerified() {
			return "You cannot decide it: the agent says it acts for you (" + calls.Unverified + "), and a call made for someone is decided by someone else"
		}
		return "You cannot decide a call made on your behalf"
	case calls.UnverifiedRequester:
		return "It asks the person it acts for to confirm it, but airlock could not verify that you are that person"
	case calls.NotApprover:
		return "You are not among its approvers"
	}
	return "You cannot decide it"
}

// asPerson fills in what p may do with a call: whether p may decide it,
// and when not, why and who can.
func (con *Console) asPerson(p Principal, rec *airlockv1.ApprovalRecord) func(*callView) {
	return func(v *callView) {
		v.YouMayDecide = con.mayAct(p, rec)
		v.Deciders = con.dir.Deciders(rec)
		v.WhyNotYou = con.whyNot(p, rec)
	}
}

// mayCancel reports whether p may withdraw rec (the call page's form; the
// approval service decides).
func (con *Console) mayCancel(p Principal, rec *airlockv1.ApprovalRecord) bool {
	return mayRead(p, rec) && (p.Operator() || con.dirFor(p).MayCancel(rec, p.Name))
}

// inboxRows renders pending calls for p, split into those p may decide
// and the others (which show who can).
func (con *Console) inboxRows(ctx context.Context, p Principal, recs []*airlockv1.ApprovalRecord) (yours, others template.HTML, n, m int) {
	var y, o strings.Builder
	for _, rec := range recs {
		if con.mayAct(p, rec) {
			y.WriteString(string(con.inboxRow(ctx, p, rec)))
			n++
		} else {
			o.WriteString(string(con.inboxRow(ctx, p, rec)))
			m++
		}
	}
	return template.HTML(y.String()), template.HTML(o.String()), n, m
}

// inboxRow is one pending call as p's inbox shows it, flagged when it
// cannot run even approved.
func (con *Console) inboxRow(ctx context.Context, p Principal, rec *airlockv1.ApprovalRecord) template.HTML {
	unknownTool := con.unknownTool(ctx, p, rec.GetCall())
	as := con.asPerson(p, rec)
	return con.rowAs("row", rec, func(v *callView) {
		as(v)
		v.UnknownTool = unknownTool
	})
}
