package executor

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/ledger"
	"github.com/airlock-gate/airlock/services/shared/ledger/ledgertest"
)

// memLiveness counts heartbeats.
type memLiveness struct{ beats atomic.Uint64 }

func (m *memLiveness) Beat(context.Context, callref.Ref, *airlockv1.ExecutionRecord) error {
	m.beats.Add(1)
	return nil
}
func (m *memLiveness) Look(context.Context, callref.Ref) (uint64, error) { return m.beats.Load(), nil }

var ref1 = callref.Ref{Agent: "bot", Call: "c1", Rev: 1}

func started(token string, attempt uint32) *airlockv1.Event {
	return &airlockv1.Event{AgentId: "bot", CallId: "c1", Revision: 1,
		Body: &airlockv1.Event_Started{Started: &airlockv1.Started{ExecutorId: "x-" + token, Attempt: attempt, Claim: token}}}
}

func completed() *airlockv1.Event {
	return &airlockv1.Event{AgentId: "bot", CallId: "c1", Revision: 1, Body: &airlockv1.Event_Completed{Completed: &airlockv1.Completed{Claim: "owner"}}}
}

func failed(reason string) *airlockv1.Event {
	return &airlockv1.Event{AgentId: "bot", CallId: "c1", Revision: 1, Body: &airlockv1.Event_Failed{Failed: &airlockv1.Failed{Reason: reason}}}
}

// world is a decided call whose execution ledger is empty, as the executor finds it.
func world() (*ledgertest.Mem, *memLiveness) { return ledgertest.NewMem(), &memLiveness{} }

// claimer returns a Claimer whose watch period runs during, instead of
// sleeping: the test decides what happens while an observer waits.
func claimer(l ledger.Ledger, live Liveness, during func()) *Claimer {
	c := NewClaimer(l, live, time.Second)
	var once sync.Once
	c.wait = func(context.Context, time.Duration) error {
		if during != nil {
			once.Do(during)
		}
		return nil
	}
	return c
}

func TestClaim(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		// setup prepares the ledger (and may return what runs during the watch).
		setup func(t *testing.T, l *ledgertest.Mem, live *memLiveness) (during func())
		want  Verdict
	}{
		{"first_claim_runs", func(*testing.T, *ledgertest.Mem, *memLiveness) func() { return nil }, Run},
		{"claim_of_an_ended_call_is_done", func(t *testing.T, l *ledgertest.Mem, live *memLiveness) func() {
			cl, _ := claimer(l, live, nil).Claim(ctx, ref1, started("a", 1))
			if _, err := claimer(l, live, nil).End(ctx, ref1, completed(), cl.Seq); err != nil {
				t.Fatal(err)
			}
			return nil
		}, Done},
		{"claim_while_the_owner_heartbeats_is_busy", func(t *testing.T, l *ledgertest.Mem, live *memLiveness) func() {
			_, _ = claimer(l, live, nil).Claim(ctx, ref1, started("a", 1))
			return func() { _ = live.Beat(ctx, ref1, nil) }
		}, Busy},
		{"claim_while_the_owner_finishes_is_done", func(t *testing.T, l *ledgertest.Mem, live *memLiveness) func() {
			cl, _ := claimer(l, live, nil).Claim(ctx, ref1, started("a", 1))
			return func() {
				if _, err := claimer(l, live, nil).End(ctx, ref1, failed(ReasonToolError), cl.Seq); err != nil {
					t.Fatal(err)
				}
			}
		}, Done},
		{"claim_whose_owner_went_silent_is_orphaned", func(t *testing.T, l *ledgertest.Mem, live *memLiveness) func() {
			_, _ = claimer(l, live, nil).Claim(ctx, ref1, started("a", 1))
			return nil
		}, Orphaned},
		{"claim_of_a_refused_call_is_done", func(t *testing.T, l *ledgertest.Mem, live *memLiveness) func() {
			_, _ = claimer(l, live, nil).Refuse(ctx, ref1, failed(ReasonUnknownTool))
			return nil
		}, Done},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, live := world()
			during := tt.setup(t, l, live)
			cl, err := claimer(l, live, during).Claim(ctx, ref1, started("b", 1))
			if err != nil {
				t.Fatal(err)
			}
			if cl.Verdict != tt.want {
				t.Fatalf("verdict %s, want %s", cl.Verdict, tt.want)
			}
		})
	}
}

func TestAClaimWhoseAckWasLostIsStillOwned(t *testing.T) {
	ctx := context.Background()
	l, live := world()
	// The append landed but its ack was lost: the handling tries again.
	if _, err := l.Append(ctx, started("mine", 1), 0); err != nil {
		t.Fatal(err)
	}
	cl, err := claimer(l, live, nil).Claim(ctx, ref1, started("mine", 1))
	if err != nil || cl.Verdict != Run || cl.Seq != 1 {
		t.Fatalf("claim = %v (%v), want run at 1", cl, err)
	}
}

func TestOneOfManyConcurrentClaimsRuns(t *testing.T) {
	l, live := world()
	var runs, others atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			cl, err := claimer(l, live, nil).Claim(context.Background(), ref1, started(fmt.Sprint("x", i), 1))
			if err != nil {
				t.Error(err)
				return
			}
			if cl.Verdict == Run {
				runs.Add(1)
			} else {
				others.Add(1)
			}
		}(i)
	}
	wg.Wait()
	if runs.Load() != 1 || others.Load() != 99 {
		t.Fatalf("%d claims ran, %d did not; want 1 and 99", runs.Load(), others.Load())
	}
}

func TestOrphanedClaims(t *testing.T) {
	ctx := context.Background()
	orphan := func(t *testing.T) (*ledgertest.Mem, *memLiveness, Claim, uint64) {
		l, live := world()
		dead, err := claimer(l, live, nil).Claim(ctx, ref1, started("dead", 1))
		if err != nil {
			t.Fatal(err)
		}
		cl, err := claimer(l, live, nil).Claim(ctx, ref1, started("b", 1))
		if err != nil || cl.Verdict != Orphaned {
			t.Fatalf("verdict %v (%v), want orphaned", cl.Verdict, err)
		}
		return l, live, cl, dead.Seq
	}

	t.Run("a_takeover_appends_the_next_attempt", func(t *testing.T) {
		l, live, cl, _ := orphan(t)
		next, err := claimer(l, live, nil).TakeOver(ctx, cl.State, started("b", 2))
		if err != nil || next.Verdict != Run {
			t.Fatalf("verdict %v (%v), want run", next.Verdict, err)
		}
		st, _ := l.Inspect(ctx, ref1)
		if st.Started.GetAttempt() != 2 || st.Started.GetClaim() != "b" {
			t.Fatalf("started after the takeover: %v", st.Started)
		}
	})
	t.Run("only_one_of_two_takeovers_wins", func(t *testing.T) {
		l, live, cl, _ := orphan(t)
		first, _ := claimer(l, live, nil).TakeOver(ctx, cl.State, started("b", 2))
		second, _ := claimer(l, live, nil).TakeOver(ctx, cl.State, failed(ReasonIndeterminate))
		if first.Verdict != Run || second.Verdict != Busy {
			t.Fatalf("verdicts %s and %s, want run and busy", first.Verdict, second.Verdict)
		}
	})
	t.Run("the_presumed_dead_owner_ends_nothing_after_a_takeover", func(t *testing.T) {
		l, live, cl, deadSeq := orphan(t)
		if _, err := claimer(l, live, nil).TakeOver(ctx, cl.State, failed(ReasonIndeterminate)); err != nil {
			t.Fatal(err)
		}
		mine, err := claimer(l, live, nil).End(ctx, ref1, completed(), deadSeq)
		if err != nil || mine {
			t.Fatalf("the old owner's end: stored=%v (%v), want dropped", mine, err)
		}
		if n := l.Terminals(); n != 1 {
			t.Fatalf("%d terminal events, want exactly 1", n)
		}
	})
	t.Run("the_presumed_dead_owner_ends_nothing_after_a_retry", func(t *testing.T) {
		l, live, cl, deadSeq := orphan(t)
		next, _ := claimer(l, live, nil).TakeOver(ctx, cl.State, started("b", 2))
		if mine, _ := claimer(l, live, nil).End(ctx, ref1, completed(), deadSeq); mine {
			t.Fatal("the old owner ended a call taken over for another attempt")
		}
		if mine, err := claimer(l, live, nil).End(ctx, ref1, completed(), next.Seq); err != nil || !mine {
			t.Fatalf("the new owner's end: %v (%v)", mine, err)
		}
		if n := l.Terminals(); n != 1 {
			t.Fatalf("%d terminal events, want exactly 1", n)
		}
	})
}

func TestEndingTwiceStoresOneTerminal(t *testing.T) {
	ctx := context.Background()
	l, live := world()
	cl, _ := claimer(l, live, nil).Claim(ctx, ref1, started("a", 1))
	// The end is retried after a lost ack.
	for range 3 {
		if _, err := claimer(l, live, nil).End(ctx, ref1, completed(), cl.Seq); err != nil {
			t.Fatal(err)
		}
	}
	if n := l.Terminals(); n != 1 {
		t.Fatalf("%d terminal events, want 1", n)
	}
}

func TestRefuse(t *testing.T) {
	ctx := context.Background()
	t.Run("refusing_an_unclaimed_call_ends_it_failed", func(t *testing.T) {
		l, live := world()
		cl, err := claimer(l, live, nil).Refuse(ctx, ref1, failed(ReasonArgumentsMismatch))
		if err != nil || cl.Verdict != Run {
			t.Fatalf("verdict %v (%v), want run", cl.Verdict, err)
		}
		later, _ := claimer(l, live, nil).Claim(ctx, ref1, started("b", 1))
		if later.Verdict != Done {
			t.Fatalf("a claim after the refusal got %s, want done: a refused call must never run", later.Verdict)
		}
	})
	t.Run("refusing_a_claimed_call_ends_nothing", func(t *testing.T) {
		l, live := world()
		_, _ = claimer(l, live, nil).Claim(ctx, ref1, started("a", 1))
		cl, err := claimer(l, live, func() { _ = live.Beat(ctx, ref1, nil) }).Refuse(ctx, ref1, failed(ReasonArgumentsMismatch))
		if err != nil || cl.Verdict != Busy || l.Terminals() != 0 {
			t.Fatalf("verdict %v, %d terminals (%v), want busy and none", cl.Verdict, l.Terminals(), err)
		}
	})
}

// stallingLedger is an in-memory ledger behind a connection that stalls: the first
// hang appends block until their attempt's deadline (with land, each is
// stored first and only its ack is lost), and the first staleReads reads
// answer as a replica that has not seen the call yet.
type stallingLedger struct {
	*ledgertest.Mem
	mu         sync.Mutex
	hang       int
	land       bool
	staleReads int
	appends    int
}

func (l *stallingLedger) Append(ctx context.Context, ev *airlockv1.Event, after uint64) (uint64, error) {
	l.mu.Lock()
	l.appends++
	stall := l.appends <= l.hang
	l.mu.Unlock()
	if !stall {
		return l.Mem.Append(ctx, ev, after)
	}
	if l.land {
		if _, err := l.Mem.Append(ctx, ev, after); err != nil {
			return 0, err
		}
	}
	<-ctx.Done()
	return 0, ctx.Err()
}

func (l *stallingLedger) Inspect(ctx context.Context, ref callref.Ref) (ledger.State, error) {
	l.mu.Lock()
	stale := l.staleReads > 0
	if stale {
		l.staleReads--
	}
	l.mu.Unlock()
	if stale {
		return ledger.State{}, nil
	}
	return l.Mem.Inspect(ctx, ref)
}

// An owner whose first appends of its end hang (a connection to a paused
// node) stores its result with a later attempt, well inside its budget,
// once the bus answers: exactly one end, its own. Each attempt has its own
// deadline; one append holding the whole budget left the call to an
// observer's take-over (failed/indeterminate) although the owner was alive
// with the result (airlock chaos, seed 2024).
func TestEndWhoseFirstAppendsHang(t *testing.T) {
	const attempt, budget = 50 * time.Millisecond, 10 * time.Second
	tests := []struct {
		name string
		l    func(*ledgertest.Mem) *stallingLedger
	}{
		{"hung_appends_never_landed", func(m *ledgertest.Mem) *stallingLedger { return &stallingLedger{Mem: m, hang: 3} }},
		{"the_first_hung_append_landed_its_ack_lost", func(m *ledgertest.Mem) *stallingLedger { return &stallingLedger{Mem: m, hang: 1, land: true} }},
		{"a_stale_read_after_the_stall_drops_nothing", func(m *ledgertest.Mem) *stallingLedger {
			return &stallingLedger{Mem: m, hang: 2, staleReads: 2}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, live := world()
			cl, err := claimer(m, live, nil).Claim(context.Background(), ref1, started("owner", 1))
			if err != nil || cl.Verdict != Run {
				t.Fatalf("claim %v (%v)", cl.Verdict, err)
			}
			l := tt.l(m)
			c := claimer(l, live, nil)
			c.attemptTimeout = attempt
			ctx, cancel := context.WithTimeout(context.Background(), budget)
			defer cancel()
			begin := time.Now()
			mine, err := c.End(ctx, ref1, completed(), cl.Seq)
			if err != nil || !mine {
				t.Fatalf("end: stored=%v (%v), want the owner's result stored", mine, err)
			}
			if took := time.Since(begin); took > budget/2 {
				t.Fatalf("the end took %s of its %s budget", took, budget)
			}
			st, _ := m.Inspect(context.Background(), ref1)
			if n := m.Terminals(); n != 1 || st.EndedBy != "owner" {
				t.Fatalf("%d terminal events, ended by %q; want exactly 1, the owner's", n, st.EndedBy)
			}
		})
	}
	t.Run("a_takeover_while_the_append_hung_wins", func(t *testing.T) {
		m, live := world()
		cl, _ := claimer(m, live, nil).Claim(context.Background(), ref1, started("owner", 1))
		// The observer ends the call indeterminate while the owner's first
		// append hangs; the owner's next attempt must not add a second end.
		l := &stallingLedger{Mem: m, hang: 1}
		c := claimer(l, live, nil)
		c.attemptTimeout = attempt
		c.wait = func(context.Context, time.Duration) error {
			st, _ := m.Inspect(context.Background(), ref1)
			if !st.Ended {
				if _, err := claimer(m, live, nil).TakeOver(context.Background(), st, failed(ReasonIndeterminate)); err != nil {
					t.Error(err)
				}
			}
			return nil
		}
		mine, err := c.End(context.Background(), ref1, completed(), cl.Seq)
		if err != nil || mine {
			t.Fatalf("end: stored=%v (%v), want dropped after the take-over", mine, err)
		}
		if n := m.Terminals(); n != 1 {
			t.Fatalf("%d terminal events, want exactly 1", n)
		}
	})
	t.Run("the_budget_bounds_every_attempt", func(t *testing.T) {
		m, live := world()
		cl, _ := claimer(m, live, nil).Claim(context.Background(), ref1, started("owner", 1))
		c := claimer(&stallingLedger{Mem: m, hang: 1 << 30}, live, nil)
		c.attemptTimeout = attempt
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		if mine, err := c.End(ctx, ref1, completed(), cl.Seq); err == nil || mine {
			t.Fatalf("end on a bus that never answers: stored=%v (%v), want an error", mine, err)
		}
		if n := m.Terminals(); n != 0 {
			t.Fatalf("%d terminal events, want none", n)
		}
	})
}
