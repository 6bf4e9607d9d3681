// Package domain is the approval state machine as plain Go: records,
// transitions, who may decide, quorum, edits, timers and standing grants.
// It knows nothing of NATS; the service reads a record from KV, asks this
// package what the next record is, and writes it back with compare-and-set.
// Every function here is pure: the same record and input give the same result,
// which is what makes a CAS retry after a conflict safe.
package domain

import (
	"fmt"

	"github.com/airlock-gate/airlock/services/shared/calls"
)

// GroupPrefix marks a group in an approvers list ("group:oncall").
const GroupPrefix = calls.GroupPrefix

// Directory answers which principals belong to which group (calls.Directory:
// the console asks the same one who may decide).
type Directory = calls.Directory

// NewDirectory builds a directory from group → members lists; several maps
// (configuration groups, console users' groups) are merged.
func NewDirectory(sources ...map[string][]string) Directory { return calls.NewDirectory(sources...) }

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
