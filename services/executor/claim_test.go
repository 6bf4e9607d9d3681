package executor

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// memStore is an in-memory ClaimStore with the same compare-and-set rules
// as the KV bucket, so the claim logic is tested without a broker.
type memStore struct {
	mu   sync.Mutex
	recs map[string]*airlockv1.ExecutionRecord
	revs map[string]uint64
	seq  uint64
}

func newMemStore() *memStore {
	return &memStore{recs: map[string]*airlockv1.ExecutionRecord{}, revs: map[string]uint64{}}
}

func (m *memStore) Create(_ context.Context, key string, rec *airlockv1.ExecutionRecord) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.recs[key]; ok {
		return 0, fmt.Errorf("%s: %w", key, ErrClaimExists)
	}
	m.seq++
	m.recs[key], m.revs[key] = proto.Clone(rec).(*airlockv1.ExecutionRecord), m.seq
	return m.seq, nil
}

func (m *memStore) Get(_ context.Context, key string) (*airlockv1.ExecutionRecord, uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.recs[key]
	if !ok {
		return nil, 0, fmt.Errorf("%s: not found", key)
	}
	return proto.Clone(rec).(*airlockv1.ExecutionRecord), m.revs[key], nil
}

func (m *memStore) Update(_ context.Context, key string, rec *airlockv1.ExecutionRecord, rev uint64) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.revs[key] != rev {
		return 0, fmt.Errorf("%s: %w", key, ErrClaimChanged)
	}
	m.seq++
	m.recs[key], m.revs[key] = proto.Clone(rec).(*airlockv1.ExecutionRecord), m.seq
	return m.seq, nil
}

var req1 = ClaimRequest{Key: "c1.1", CallID: "c1", Revision: 1, Digest: "d", IdempotencyKey: "c1.1"}

// claimer returns a Claimer whose watch period runs during, instead of
// sleeping: the test decides what happens while an observer waits.
func claimer(store ClaimStore, id string, during func()) *Claimer {
	c := NewClaimer(store, id, time.Second)
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
		// setup prepares the store (and may return what runs during the watch).
		setup func(t *testing.T, s *memStore) (during func())
		want  Verdict
	}{
		{"first_claim_runs", func(*testing.T, *memStore) func() { return nil }, Run},
		{"claim_of_an_ended_call_is_done", func(t *testing.T, s *memStore) func() {
			owner := claimer(s, "a", nil)
			cl, _ := owner.Claim(ctx, req1)
			if _, _, err := owner.Finish(ctx, req1.Key, cl, airlockv1.ExecutionState_EXECUTION_STATE_COMPLETED, "completed"); err != nil {
				t.Fatal(err)
			}
			return nil
		}, Done},
		{"claim_while_the_owner_heartbeats_is_busy", func(t *testing.T, s *memStore) func() {
			owner := claimer(s, "a", nil)
			cl, _ := owner.Claim(ctx, req1)
			return func() {
				if _, err := owner.Heartbeat(ctx, req1.Key, cl); err != nil {
					t.Fatal(err)
				}
			}
		}, Busy},
		{"claim_while_the_owner_finishes_is_done", func(t *testing.T, s *memStore) func() {
			owner := claimer(s, "a", nil)
			cl, _ := owner.Claim(ctx, req1)
			return func() {
				if _, _, err := owner.Finish(ctx, req1.Key, cl, airlockv1.ExecutionState_EXECUTION_STATE_FAILED, ReasonToolError); err != nil {
					t.Fatal(err)
				}
			}
		}, Done},
		{"claim_whose_owner_went_silent_is_orphaned", func(t *testing.T, s *memStore) func() {
			_, _ = claimer(s, "a", nil).Claim(ctx, req1)
			return nil
		}, Orphaned},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newMemStore()
			during := tt.setup(t, s)
			cl, err := claimer(s, "b", during).Claim(ctx, req1)
			if err != nil {
				t.Fatal(err)
			}
			if cl.Verdict != tt.want {
				t.Fatalf("verdict %s, want %s", cl.Verdict, tt.want)
			}
		})
	}
}

func TestOneOfManyConcurrentClaimsRuns(t *testing.T) {
	s := newMemStore()
	var runs, others atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			cl, err := claimer(s, fmt.Sprint("x", i), nil).Claim(context.Background(), req1)
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
	orphan := func(t *testing.T) (*memStore, Claim) {
		s := newMemStore()
		if _, err := claimer(s, "dead", nil).Claim(ctx, req1); err != nil {
			t.Fatal(err)
		}
		cl, err := claimer(s, "b", nil).Claim(ctx, req1)
		if err != nil || cl.Verdict != Orphaned {
			t.Fatalf("verdict %v (%v), want orphaned", cl.Verdict, err)
		}
		return s, cl
	}

	t.Run("retry_takes_the_next_attempt_with_the_same_idempotency_key", func(t *testing.T) {
		s, cl := orphan(t)
		next, err := claimer(s, "b", nil).Retry(ctx, req1.Key, cl)
		if err != nil || next.Verdict != Run {
			t.Fatalf("verdict %v (%v), want run", next.Verdict, err)
		}
		if next.Record.Attempt != 2 || next.Record.IdempotencyKey != "c1.1" || next.Record.ExecutorId != "b" {
			t.Fatalf("record after retry: %v", next.Record)
		}
	})
	t.Run("only_one_of_two_takeovers_wins", func(t *testing.T) {
		s, cl := orphan(t)
		first, _ := claimer(s, "b", nil).Retry(ctx, req1.Key, cl)
		second, _ := claimer(s, "c", nil).Abandon(ctx, req1.Key, cl)
		if first.Verdict != Run || second.Verdict != Busy {
			t.Fatalf("verdicts %s and %s, want run and busy", first.Verdict, second.Verdict)
		}
	})
	t.Run("abandon_ends_it_failed_indeterminate", func(t *testing.T) {
		s, cl := orphan(t)
		next, err := claimer(s, "b", nil).Abandon(ctx, req1.Key, cl)
		if err != nil || next.Verdict != Run {
			t.Fatalf("verdict %v (%v), want run", next.Verdict, err)
		}
		rec, _, _ := s.Get(ctx, req1.Key)
		if rec.State != airlockv1.ExecutionState_EXECUTION_STATE_FAILED || rec.Outcome != ReasonIndeterminate {
			t.Fatalf("record after abandon: %v", rec)
		}
	})
	t.Run("the_dead_owner_learns_it_lost_the_claim", func(t *testing.T) {
		s := newMemStore()
		dead := claimer(s, "dead", nil)
		mine, _ := dead.Claim(ctx, req1)
		cl, _ := claimer(s, "b", nil).Claim(ctx, req1)
		if _, err := claimer(s, "b", nil).Retry(ctx, req1.Key, cl); err != nil {
			t.Fatal(err)
		}
		if _, err := dead.Heartbeat(ctx, req1.Key, mine); err == nil {
			t.Fatal("heartbeat of a taken-over claim succeeded")
		}
		if _, _, err := dead.Finish(ctx, req1.Key, mine, airlockv1.ExecutionState_EXECUTION_STATE_COMPLETED, "completed"); err == nil {
			t.Fatal("finish of a taken-over claim succeeded")
		}
	})
}

func TestRefuse(t *testing.T) {
	ctx := context.Background()
	t.Run("refusing_an_unclaimed_call_settles_it_failed", func(t *testing.T) {
		s := newMemStore()
		cl, err := claimer(s, "a", nil).Refuse(ctx, req1, ReasonArgumentsMismatch)
		if err != nil || cl.Verdict != Run {
			t.Fatalf("verdict %v (%v), want run", cl.Verdict, err)
		}
		later, _ := claimer(s, "b", nil).Claim(ctx, req1)
		if later.Verdict != Done {
			t.Fatalf("a claim after the refusal got %s, want done: a refused call must never run", later.Verdict)
		}
	})
	t.Run("refusing_a_claimed_call_changes_nothing", func(t *testing.T) {
		s := newMemStore()
		_, _ = claimer(s, "a", nil).Claim(ctx, req1)
		cl, err := claimer(s, "b", nil).Refuse(ctx, req1, ReasonArgumentsMismatch)
		if err != nil || cl.Verdict != Done || cl.Record.State != airlockv1.ExecutionState_EXECUTION_STATE_RUNNING {
			t.Fatalf("verdict %v record %v (%v), want done with the running record", cl.Verdict, cl.Record, err)
		}
	})
}
