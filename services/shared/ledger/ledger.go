// Package ledger is a call's execution ledger: the executor events of a call
// (started, completed, failed) in the events stream, on
// airlock.evt.<agent>.<call>.exec.*, appended to only with compare-and-append
// (JetStream's Nats-Expected-Last-Subject-Sequence on that wildcard).
// Nothing else is ever stored there, so a decision's duplicates,
// notifications or refused attempts never interfere with it.
//
// The executor claims a call on it (its first `started`) and ends it; the
// policy service records a gate-only call's report on it (its one
// `completed` or `failed`). Both read and append through this package: Stream
// is the production ledger, ledgertest.Mem an in-memory one with the same
// contract (ledgertest.Run) for the logic built on it.
package ledger

import (
	"context"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/callref"
)

// Ledger reads and appends to the execution ledgers of calls.
type Ledger interface {
	// Inspect returns what the ledger holds for the revision. Implementations
	// read the ledger's last sequence before anything else, so that an
	// Append after State.Last can only succeed if nothing was stored since.
	Inspect(ctx context.Context, ref callref.Ref) (State, error)
	// Append stores ev on its call's ledger if the ledger's last event is
	// still afterSeq (0: the ledger is empty), and returns ev's sequence;
	// otherwise it returns an error wrapping bus.ErrConflict.
	Append(ctx context.Context, ev *airlockv1.Event, afterSeq uint64) (uint64, error)
}

// ErrConflict is what a refused Append wraps: something was stored on the
// ledger since it was read.
var ErrConflict = bus.ErrConflict

// State is what the ledger holds for one call revision.
type State struct {
	// Started is the revision's newest `started` event, nil when none.
	Started *airlockv1.Started
	// StartedSeq is its sequence.
	StartedSeq uint64
	// Ended: a `completed` or `failed` of the revision is stored.
	Ended bool
	// EndedBy is the claim token of that terminal event.
	EndedBy string
	// Last is the sequence of the ledger's last event, of any revision (0: none).
	Last uint64
}

// Empty reports whether nothing at all is stored on the call's ledger.
func (s State) Empty() bool { return s.Last == 0 }

// ClaimOf is the claim token a ledger event carries ("" for any other event).
func ClaimOf(ev *airlockv1.Event) string {
	switch b := ev.GetBody().(type) {
	case *airlockv1.Event_Started:
		return b.Started.GetClaim()
	case *airlockv1.Event_Completed:
		return b.Completed.GetClaim()
	case *airlockv1.Event_Failed:
		return b.Failed.GetClaim()
	}
	return ""
}

// apply folds one ledger event stored at seq into st, for ref's revision.
// Both ledgers build a State with it, so they cannot disagree on one.
func apply(st *State, ref callref.Ref, ev *airlockv1.Event, seq uint64) {
	if max(ev.GetRevision(), 1) != ref.Rev {
		return
	}
	switch b := ev.GetBody().(type) {
	case *airlockv1.Event_Started:
		st.Started, st.StartedSeq = b.Started, seq
	case *airlockv1.Event_Completed, *airlockv1.Event_Failed:
		st.Ended, st.EndedBy = true, ClaimOf(ev)
	}
}

// Fold is the State of ref's revision after events, stored in order from
// sequence first on (an in-memory ledger's view).
func Fold(ref callref.Ref, events []*airlockv1.Event, first uint64) State {
	var st State
	for i, ev := range events {
		apply(&st, ref, ev, first+uint64(i))
	}
	if len(events) > 0 {
		st.Last = first + uint64(len(events)) - 1
	}
	return st
}
