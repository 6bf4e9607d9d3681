package clientwait

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// TestALeaseIsRenewedOnItsLastWrite: a request renewing its lease writes
// on the revision it wrote last, without reading the entry first; after
// another write (another waiter's lease, the entry forgotten) it reads the
// entry once and keeps what that write left, as a renewal always did.
func TestALeaseIsRenewedOnItsLastWrite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := testenv.StartNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	replica, kv := newReplica(ctx, t, deps.JS, deps.Config.Buckets.ClientWaits, false)
	s := replica.s
	other, err := Open(ctx, deps.JS, deps.Config.Buckets.ClientWaits) // another replica
	if err != nil {
		t.Fatal(err)
	}
	own := s.Lease("agent", "renewed", "own")
	for i, tt := range []struct {
		name      string
		meanwhile func() error
		// wantGets: the entry reads the renewal made.
		wantGets    int64
		wantWaiters []string
	}{
		{"the_first_hold_reads_the_entry", nil, 1, []string{"own"}},
		{"a_renewal_nothing_else_wrote_before_reads_nothing", nil, 0, []string{"own"}},
		{"a_renewal_after_another_waiters_lease_keeps_that_lease", func() error {
			return other.Lease("agent", "renewed", "other").Hold(ctx, Presence{Endpoint: "bot", Until: time.Now().Add(time.Minute)})
		}, 1, []string{"other", "own"}},
		{"the_renewal_after_it_reads_nothing", nil, 0, []string{"other", "own"}},
		{"a_renewal_after_the_entry_was_forgotten_writes_it_anew", func() error {
			return other.Forget(ctx, "agent", "renewed")
		}, 1, []string{"own"}},
	} {
		if tt.meanwhile != nil {
			if err := tt.meanwhile(); err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
		}
		until := time.Now().Add(time.Minute + time.Duration(i)*time.Second).Truncate(time.Millisecond)
		before := kv.gets.Load()
		if err := own.Hold(ctx, Presence{Endpoint: "bot", Until: until}); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := kv.gets.Load() - before; got != tt.wantGets {
			t.Errorf("%s: the renewal read the entry %d times, want %d", tt.name, got, tt.wantGets)
		}
		p, ok, err := other.PresenceOf(ctx, "agent", "renewed")
		if err != nil || !ok {
			t.Fatalf("%s: the presence: %v %v", tt.name, ok, err)
		}
		var waiters []string
		for w := range p.Waiters {
			waiters = append(waiters, w)
		}
		slices.Sort(waiters)
		if !slices.Equal(waiters, tt.wantWaiters) || !p.Waiters["own"].Equal(until) {
			t.Errorf("%s: the presence holds %v, want leases of %v, own's until %s", tt.name, p.Waiters, tt.wantWaiters, until)
		}
	}
}
