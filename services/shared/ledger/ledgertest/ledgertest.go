// Package ledgertest has an in-memory execution ledger and the contract
// every ledger passes (the production stream ledger and the in-memory one
// alike), so that the logic tested on the in-memory one holds on the stream.
package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/ledger"
)

// Mem is an in-memory execution ledger with the stream's rule: an append
// succeeds only right after the call ledger's last event. Sequences are
// per call (index+1), which is all the contract promises: increasing.
type Mem struct {
	mu    sync.Mutex
	calls map[string][]*airlockv1.Event
}

// NewMem returns an empty ledger.
func NewMem() *Mem { return &Mem{calls: map[string][]*airlockv1.Event{}} }

func key(agent, call string) string { return agent + "." + call }

// Inspect implements ledger.Ledger.
func (l *Mem) Inspect(_ context.Context, ref callref.Ref) (ledger.State, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return ledger.Fold(ref, l.calls[key(ref.Agent, ref.Call)], 1), nil
}

// Append implements ledger.Ledger.
func (l *Mem) Append(_ context.Context, ev *airlockv1.Event, after uint64) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := key(ev.GetAgentId(), ev.GetCallId())
	if have := uint64(len(l.calls[k])); have != after {
		return 0, fmt.Errorf("the ledger of %s ends at %d, not %d: %w", k, have, after, ledger.ErrConflict)
	}
	l.calls[k] = append(l.calls[k], proto.Clone(ev).(*airlockv1.Event))
	return uint64(len(l.calls[k])), nil
}

// Terminals counts the completed and failed events on every call's ledger.
func (l *Mem) Terminals() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, evs := range l.calls {
		for _, ev := range evs {
			if ev.GetCompleted() != nil || ev.GetFailed() != nil {
				n++
			}
		}
	}
	return n
}

// Run checks that the ledgers newLedger returns keep the ledger contract.
// Each subtest gets a fresh ledger.
func Run(t *testing.T, newLedger func(t *testing.T) ledger.Ledger) {
	ctx := context.Background()
	ref := callref.Ref{Agent: "bot", Call: "c1", Rev: 2}
	ev := func(agent, call string, rev uint32, body any) *airlockv1.Event {
		e := &airlockv1.Event{AgentId: agent, CallId: call, Revision: rev}
		switch b := body.(type) {
		case *airlockv1.Started:
			e.Body = &airlockv1.Event_Started{Started: b}
		case *airlockv1.Completed:
			e.Body = &airlockv1.Event_Completed{Completed: b}
		case *airlockv1.Failed:
			e.Body = &airlockv1.Event_Failed{Failed: b}
		}
		return e
	}
	mustAppend := func(t *testing.T, l ledger.Ledger, e *airlockv1.Event, after uint64) uint64 {
		t.Helper()
		seq, err := l.Append(ctx, e, after)
		if err != nil {
			t.Fatalf("append after %d: %v", after, err)
		}
		if seq <= after {
			t.Fatalf("append after %d stored at %d", after, seq)
		}
		return seq
	}
	inspect := func(t *testing.T, l ledger.Ledger, r callref.Ref) ledger.State {
		t.Helper()
		st, err := l.Inspect(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	t.Run("an_empty_ledger_holds_nothing", func(t *testing.T) {
		if st := inspect(t, newLedger(t), ref); st != (ledger.State{}) || !st.Empty() {
			t.Fatalf("empty ledger: %+v", st)
		}
	})
	t.Run("a_claim_is_seen_with_its_sequence", func(t *testing.T) {
		l := newLedger(t)
		seq := mustAppend(t, l, ev("bot", "c1", 2, &airlockv1.Started{Claim: "A"}), 0)
		st := inspect(t, l, ref)
		if st.Started.GetClaim() != "A" || st.StartedSeq != seq || st.Last != seq || st.Ended {
			t.Fatalf("after a claim at %d: %+v", seq, st)
		}
	})
	t.Run("an_append_after_a_stale_sequence_is_a_conflict", func(t *testing.T) {
		l := newLedger(t)
		mustAppend(t, l, ev("bot", "c1", 2, &airlockv1.Started{Claim: "A"}), 0)
		_, err := l.Append(ctx, ev("bot", "c1", 2, &airlockv1.Started{Claim: "B"}), 0)
		if !errors.Is(err, ledger.ErrConflict) {
			t.Fatalf("second claim on the empty ledger: %v, want a conflict", err)
		}
		if st := inspect(t, l, ref); st.Started.GetClaim() != "A" {
			t.Fatalf("the refused claim changed the ledger: %+v", st)
		}
	})
	t.Run("an_end_names_its_claim", func(t *testing.T) {
		l := newLedger(t)
		seq := mustAppend(t, l, ev("bot", "c1", 2, &airlockv1.Started{Claim: "A"}), 0)
		end := mustAppend(t, l, ev("bot", "c1", 2, &airlockv1.Failed{Claim: "A", Reason: "tool_error"}), seq)
		st := inspect(t, l, ref)
		if !st.Ended || st.EndedBy != "A" || st.Last != end || st.StartedSeq != seq {
			t.Fatalf("after an end at %d: %+v", end, st)
		}
	})
	t.Run("another_revision_moves_only_the_last_sequence", func(t *testing.T) {
		l := newLedger(t)
		seq := mustAppend(t, l, ev("bot", "c1", 1, &airlockv1.Completed{Claim: "report.7"}), 0)
		st := inspect(t, l, ref)
		if st.Started != nil || st.Ended || st.Last != seq || st.Empty() {
			t.Fatalf("revision 2 after revision 1 ended at %d: %+v", seq, st)
		}
		if got := inspect(t, l, callref.Ref{Agent: "bot", Call: "c1", Rev: 1}); !got.Ended || got.EndedBy != "report.7" {
			t.Fatalf("revision 1: %+v", got)
		}
	})
	t.Run("each_call_has_its_own_ledger", func(t *testing.T) {
		l := newLedger(t)
		mustAppend(t, l, ev("bot", "c1", 2, &airlockv1.Started{Claim: "A"}), 0)
		mustAppend(t, l, ev("other", "c1", 2, &airlockv1.Started{Claim: "B"}), 0)
		mustAppend(t, l, ev("bot", "c2", 2, &airlockv1.Started{Claim: "C"}), 0)
		if st := inspect(t, l, ref); st.Started.GetClaim() != "A" {
			t.Fatalf("bot/c1 after claims on other calls: %+v", st)
		}
	})
}
