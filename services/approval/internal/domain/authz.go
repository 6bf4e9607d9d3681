// Package domain is the approval state machine as plain Go: records,
// transitions, who may decide, quorum, edits, timers and standing grants.
// It knows nothing of NATS; the service reads a record from KV, asks this
// package what the next record is, and writes it back with compare-and-set.
// Every function here is pure: the same record and input give the same result,
// which is what makes a CAS retry after a conflict safe.
package domain

import (
	"fmt"
	"slices"
	"strings"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

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

// Refusal is a decision attempt that was not allowed. Nothing changes; the
// service records it as an unauthorized_attempt event with Action and Why.
type Refusal struct {
	// Action is "approve", "reject", "request_changes", "cancel", "grant" or "revoke".
	Action string
	// Why is a sentence for the person and the audit.
	Why string
}

func (r *Refusal) Error() string { return r.Why }

// Invalid is a malformed decision (no principal, no feedback, ...): nothing
// changes and it is not an authorization matter.
type Invalid struct{ Why string }

func (e *Invalid) Error() string { return e.Why }

func invalid(format string, args ...any) *Invalid { return &Invalid{Why: fmt.Sprintf(format, args...)} }
