package calls

import (
	"slices"
	"strings"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/config"
)

// Who may decide a call is answered here, once: the approval service
// refuses a decision with it, and the console counts and marks what a
// person may act on with it.

// GroupPrefix marks a group in an approvers list ("group:oncall").
const GroupPrefix = "group:"

// Directory answers which principals belong to which group.
type Directory struct {
	groups map[string]map[string]bool
	// who is in vouched besides groups (Vouched).
	who     string
	vouched []string
}

// Vouched returns d with the groups a front-end vouched for the person
// acting (airlockv1.Actor.groups, the console's single sign-on) added for
// that person alone; d itself is unchanged.
func (d Directory) Vouched(a *airlockv1.Actor) Directory {
	if a.GetId() == "" || len(a.GetGroups()) == 0 {
		return d
	}
	d.who, d.vouched = a.GetId(), a.GetGroups()
	return d
}

// NewDirectory builds a directory from group → members lists; several maps
// (configuration groups, console users' groups) are merged.
func NewDirectory(sources ...map[string][]string) Directory {
	d := Directory{groups: map[string]map[string]bool{}}
	for _, src := range sources {
		for g, members := range src {
			g = strings.TrimPrefix(g, GroupPrefix)
			if d.groups[g] == nil {
				d.groups[g] = map[string]bool{}
			}
			for _, m := range members {
				d.groups[g][m] = true
			}
		}
	}
	return d
}

// DirectoryOf is the directory a configuration describes: approval.groups
// plus console.users[].groups. Every service that asks who may decide
// builds it this way, so they agree.
func DirectoryOf(cfg config.Config) Directory {
	users := map[string][]string{}
	for _, u := range cfg.Console.Users {
		for _, g := range u.Groups {
			users[g] = append(users[g], u.Name)
		}
	}
	return NewDirectory(cfg.Approval.Groups, users)
}

// Members lists a group's members, sorted.
func (d Directory) Members(group string) []string {
	var out []string
	for m := range d.groups[strings.TrimPrefix(group, GroupPrefix)] {
		out = append(out, m)
	}
	slices.Sort(out)
	return out
}

// Matches reports whether principal is named in approvers, directly or
// through a group.
func (d Directory) Matches(approvers []string, principal string) bool {
	if principal == "" {
		return false
	}
	for _, a := range approvers {
		if g, ok := strings.CutPrefix(a, GroupPrefix); ok {
			if d.groups[g][principal] || (principal == d.who && slices.Contains(d.vouched, g)) {
				return true
			}
			continue
		}
		if a == principal {
			return true
		}
	}
	return false
}

// Bar is why a person may not decide a call; NotBarred when they may.
type Bar int

const (
	// NotBarred: the person may decide the call.
	NotBarred Bar = iota
	// NoPrincipal: nobody was named.
	NoPrincipal
	// RoleNotPerson: "requester" was given as a person's name.
	RoleNotPerson
	// UnverifiedRequester: the rule asks the person the call acts for to
	// confirm it, but airlock could not verify that this is them.
	UnverifiedRequester
	// OwnCall: the call acts on the person's behalf (separation of duties).
	OwnCall
	// NotApprover: the person is not among the call's approvers.
	NotApprover
)

// Barred says whether principal may decide rec, and when not, why: they
// must match the record's approvers and must not be the person the call
// acts for — unless the approvers name the requester, who may then confirm
// their own call once airlock verified who they are. Separation of duties
// is the default for every other rule.
func (d Directory) Barred(rec *airlockv1.ApprovalRecord, principal string) Bar {
	call := rec.GetCall()
	approvers := rec.GetDecision().GetApprovers()
	selfConfirm := slices.Contains(approvers, Requester)
	switch {
	case principal == "":
		return NoPrincipal
	case principal == Requester:
		return RoleNotPerson
	case RequesterMayDecide(call, rec.GetDecision(), principal):
		return NotBarred
	case selfConfirm && principal == call.GetOnBehalfOf():
		return UnverifiedRequester
	case principal == call.GetOnBehalfOf():
		return OwnCall
	case !d.Matches(slices.DeleteFunc(slices.Clone(approvers), func(a string) bool { return a == Requester }), principal):
		return NotApprover
	}
	return NotBarred
}

// Deciders lists who may decide rec among the people its approvers name
// (a group's members, the verified requester), each checked with Barred,
// sorted. Empty means nobody it names can: the call can only expire or be
// withdrawn.
func (d Directory) Deciders(rec *airlockv1.ApprovalRecord) []string {
	var candidates []string
	for _, a := range rec.GetDecision().GetApprovers() {
		switch {
		case a == Requester:
			candidates = append(candidates, rec.GetCall().GetOnBehalfOf())
		case strings.HasPrefix(a, GroupPrefix):
			candidates = append(candidates, d.Members(a)...)
		default:
			candidates = append(candidates, a)
		}
	}
	slices.Sort(candidates)
	candidates = slices.Compact(candidates)
	return slices.DeleteFunc(candidates, func(p string) bool { return d.Barred(rec, p) != NotBarred })
}

// MayCancel reports whether principal, a person, may withdraw rec: the
// person it acts for, once airlock verified who that is (an agent's claim
// alone gives nobody a say, as for deciding), or one of its approvers
// (directly or through a group). It is who the approval service lets
// cancel, and whom the console offers the cancel to.
func (d Directory) MayCancel(rec *airlockv1.ApprovalRecord, principal string) bool {
	call := rec.GetCall()
	requester := principal == call.GetOnBehalfOf() && call.GetOnBehalfOfVerified()
	return principal != "" && principal != Requester && (requester || d.Matches(rec.GetDecision().GetApprovers(), principal))
}

// ActorName is who acted, in words, for a reason or a log line: the id,
// with the channel it came through ("alice via slack"), or "unknown".
func ActorName(a *airlockv1.Actor) string {
	if a.GetId() == "" {
		return "unknown"
	}
	if a.GetChannel() != "" {
		return a.GetId() + " via " + a.GetChannel()
	}
	return a.GetId()
}
