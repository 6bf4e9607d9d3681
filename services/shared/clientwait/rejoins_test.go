package clientwait

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// countingKV counts the Gets that reach the bucket.
type countingKV struct {
	jetstream.KeyValue
	gets atomic.Int64
}

func (c *countingKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	c.gets.Add(1)
	return c.KeyValue.Get(ctx, key)
}

// newReplica is a gateway replica's view of the bucket, its Gets counted;
// follow: kept in step by a watch until ctx ends.
func newReplica(ctx context.Context, t *testing.T, js jetstream.JetStream, bucket string, follow bool) (*Rejoins, *countingKV) {
	t.Helper()
	s, err := Open(ctx, js, bucket)
	if err != nil {
		t.Fatal(err)
	}
	kv := &countingKV{KeyValue: s.kv}
	s.kv = kv
	v := s.Rejoins()
	if follow {
		go v.Follow(ctx, slog.New(slog.DiscardHandler))
	}
	return v, kv
}

// TestRejoinsAcrossReplicas: two gateway replicas on one bucket, each with
// its own view. A replica answers the keys of its own sessions from its
// view; every other key it asks the bucket, so an entry another replica
// wrote a moment ago is found, and an outcome is delivered once.
func TestRejoinsAcrossReplicas(t *testing.T) {
	n := testenv.StartNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	replica := func(follow bool) (*Rejoins, *countingKV) {
		return newReplica(ctx, t, deps.JS, deps.Config.Buckets.ClientWaits, follow)
	}
	// b follows no watch: whatever it finds of a's entries, it found in the
	// bucket.
	a, akv := replica(true)
	b, bkv := replica(false)

	t.Run("a_replica_answers_its_own_sessions_keys_without_asking_the_bucket", func(t *testing.T) {
		before := akv.gets.Load()
		if _, ok, err := a.Find(ctx, "r.own", true); err != nil || ok {
			t.Fatalf("a key never written: found=%v err=%v", ok, err)
		}
		if _, err := a.Join(ctx, "r.own", Rejoin{Call: "c1", Revision: 1}); err != nil {
			t.Fatal(err)
		}
		r, ok, err := a.Find(ctx, "r.own", true)
		if err != nil || !ok || r.Call != "c1" {
			t.Fatalf("the entry it wrote: %+v found=%v err=%v", r, ok, err)
		}
		if won, err := a.Deliver(ctx, "r.own", r); err != nil || !won {
			t.Fatalf("deliver: won=%v err=%v", won, err)
		}
		if _, ok, _ := a.Find(ctx, "r.own", true); ok {
			t.Fatal("the delivered entry is still found: its outcome would be returned again")
		}
		if got := akv.gets.Load() - before; got != 0 {
			t.Fatalf("%d Gets reached the bucket, want none", got)
		}
	})

	t.Run("an_entry_another_replica_just_wrote_is_found", func(t *testing.T) {
		if _, err := a.Join(ctx, "r.shared", Rejoin{Call: "c2", Revision: 1}); err != nil {
			t.Fatal(err)
		}
		before := bkv.gets.Load()
		r, ok, err := b.Find(ctx, "r.shared", false)
		if err != nil || !ok || r.Call != "c2" {
			t.Fatalf("the other replica's entry: %+v found=%v err=%v", r, ok, err)
		}
		if bkv.gets.Load() == before {
			t.Fatal("found without asking the bucket, which alone knows the other replica's writes")
		}
		// Both replicas return the outcome at once: one claims it.
		mine, _, _ := a.Find(ctx, "r.shared", true)
		won1, err1 := a.Deliver(ctx, "r.shared", mine)
		won2, err2 := b.Deliver(ctx, "r.shared", r)
		if err1 != nil || err2 != nil || won1 == won2 {
			t.Fatalf("two claims of one entry: won %v and %v (%v, %v), want exactly one", won1, won2, err1, err2)
		}
		if _, ok, _ := b.Find(ctx, "r.shared", false); ok {
			t.Fatal("the delivered entry is still found by the other replica")
		}
	})

	t.Run("a_change_another_writer_makes_reaches_the_view", func(t *testing.T) {
		if _, err := a.Join(ctx, "r.purged", Rejoin{Call: "c3", Revision: 1}); err != nil {
			t.Fatal(err)
		}
		if err := akv.KeyValue.Delete(ctx, "r.purged"); err != nil { // an operator's delete
			t.Fatal(err)
		}
		testenv.Eventually(t, 10*time.Second, "the view to show the entry deleted elsewhere", func() bool {
			_, ok, _ := a.Find(ctx, "r.purged", true)
			return !ok
		})
		if _, err := akv.KeyValue.Put(ctx, "r.purged", []byte(`{"call":"c4","revision":2}`)); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 10*time.Second, "the view to show the entry written elsewhere", func() bool {
			r, ok, _ := a.Find(ctx, "r.purged", true)
			return ok && r.Call == "c4" && r.Revision == 2
		})
	})

	t.Run("a_write_in_doubt_is_looked_up_in_the_bucket", func(t *testing.T) {
		gone, stop := context.WithCancel(ctx)
		stop()
		if _, err := a.Join(gone, "r.doubt", Rejoin{Call: "c5", Revision: 1}); err == nil {
			t.Fatal("a write with an ended context succeeded")
		}
		before := akv.gets.Load()
		if _, ok, err := a.Find(ctx, "r.doubt", true); err != nil || ok {
			t.Fatalf("found=%v err=%v", ok, err)
		}
		if akv.gets.Load() == before {
			t.Fatal("a key whose write failed was answered from the view")
		}
	})

	t.Run("a_late_message_of_the_watch_does_not_bring_back_a_delivered_entry", func(t *testing.T) {
		v, _ := replica(false)
		if _, err := v.Join(ctx, "r.late", Rejoin{Call: "c6", Revision: 1}); err != nil {
			t.Fatal(err)
		}
		r, _, _ := v.Find(ctx, "r.late", true)
		if won, err := v.Deliver(ctx, "r.late", r); err != nil || !won {
			t.Fatalf("deliver: won=%v err=%v", won, err)
		}
		// The watch shows the write of the entry after its delivery.
		v.saw("r.late", view{r: r, present: true, rev: r.entryRev})
		if _, ok, _ := v.Find(ctx, "r.late", true); ok {
			t.Fatal("the watch's late message brought the delivered entry back")
		}
	})
}

// TestRejoinsViewKeepsNothingOnceDelivered: the view holds what the bucket
// holds. An entry delivered — by this replica, whichever of its requests
// won the claim, and whether the watch showed the delete before or after
// the claim's answer — leaves nothing behind once the watch has shown the
// delete; otherwise every delivered outcome would cost each replica memory
// for as long as it runs (a hostile agent makes as many as it likes).
func TestRejoinsViewKeepsNothingOnceDelivered(t *testing.T) {
	n := testenv.StartNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, deps.JS, deps.Config.Buckets.ClientWaits)
	if err != nil {
		t.Fatal(err)
	}
	size := func(v *Rejoins) int {
		v.mu.Lock()
		defer v.mu.Unlock()
		return len(v.known)
	}
	for _, c := range []struct {
		name    string
		deliver func(t *testing.T, v *Rejoins, key string)
	}{
		{"two_requests_of_one_session_claim_the_same_outcome", func(t *testing.T, v *Rejoins, key string) {
			r, _, _ := v.Find(ctx, key, true)
			won1, err1 := v.Deliver(ctx, key, r)
			won2, err2 := v.Deliver(ctx, key, r)
			if err1 != nil || err2 != nil || won1 == won2 {
				t.Fatalf("two claims: won %v and %v (%v, %v), want exactly one", won1, won2, err1, err2)
			}
		}},
		{"the_watch_shows_the_delete_before_the_claim_is_answered", func(t *testing.T, v *Rejoins, key string) {
			r, _, _ := v.Find(ctx, key, true)
			// What the watch shows of the claim's delete (the next revision)
			// arrives before the claim's own answer.
			v.saw(key, view{rev: r.entryRev + 1})
			if won, err := v.Deliver(ctx, key, r); err != nil || !won {
				t.Fatalf("deliver: won=%v err=%v", won, err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fctx, stop := context.WithCancel(ctx)
			defer stop()
			v := s.Rejoins()
			go v.Follow(fctx, slog.New(slog.DiscardHandler))
			for i := range 20 {
				key := "r." + c.name + strconv.Itoa(i)
				if _, err := v.Join(ctx, key, Rejoin{Call: "c", Revision: 1}); err != nil {
					t.Fatal(err)
				}
				c.deliver(t, v, key)
				if _, ok, _ := v.Find(ctx, key, true); ok {
					t.Fatal("the delivered entry is still found")
				}
			}
			testenv.Eventually(t, 10*time.Second, "the view to keep nothing of 20 delivered entries", func() bool { return size(v) == 0 })
		})
	}
}

// TestRejoinsViewForgetsWhatTheBucketLetExpire: the bucket forgets an
// entry after its TTL without a message on the watch; the view forgets it
// too, so a replica neither rejoins a call the bucket no longer knows nor
// keeps, for as long as it runs, every entry whose client never called
// again.
func TestRejoinsViewForgetsWhatTheBucketLetExpire(t *testing.T) {
	n := testenv.StartNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := deps.JS.KeyValue(ctx, deps.Config.Buckets.ClientWaits)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.Config()
	cfg.TTL = time.Second
	if _, err := deps.JS.UpdateKeyValue(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, deps.JS, deps.Config.Buckets.ClientWaits)
	if err != nil {
		t.Fatal(err)
	}
	v := s.Rejoins()
	go v.Follow(ctx, slog.New(slog.DiscardHandler))
	if _, err := v.Join(ctx, "r.expiring", Rejoin{Call: "c", Revision: 1}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the bucket to let the entry expire", func() bool {
		_, err := kv.Get(ctx, "r.expiring")
		return errors.Is(err, jetstream.ErrKeyNotFound)
	})
	if r, ok, err := v.Find(ctx, "r.expiring", true); ok || err != nil {
		t.Fatalf("the view still finds the entry the bucket let expire: %+v (%v)", r, err)
	}
	testenv.Eventually(t, 10*time.Second, "the view to keep nothing of the expired entry", func() bool {
		v.mu.Lock()
		defer v.mu.Unlock()
		return len(v.known) == 0
	})
}

// stalledKV is a bucket whose watches read what is stored and then hear
// nothing more, as a watch whose consumer was on a NATS server that died:
// the client library starts it again only once two heartbeats are missed.
type stalledKV struct{ jetstream.KeyValue }

func (k stalledKV) Watch(ctx context.Context, keys string, _ ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	return k.WatchFiltered(ctx, []string{keys})
}

func (k stalledKV) WatchFiltered(ctx context.Context, _ []string, _ ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	updates := make(chan jetstream.KeyValueEntry, 1)
	updates <- nil // what was stored has been read: nothing
	return stalledWatcher{updates}, nil
}

type stalledWatcher struct{ updates chan jetstream.KeyValueEntry }

func (w stalledWatcher) Updates() <-chan jetstream.KeyValueEntry { return w.updates }
func (w stalledWatcher) Stop() error                             { return nil }

// TestOffersAreFoundWhileTheWatchIsStalled: an offer (a key every replica
// may write) that another replica stored is found at once, even by a
// replica whose watch has stopped hearing the bucket — after a NATS node
// was lost, a view of offers answered "none" for seconds, and a killed
// replica's waiting call was made again instead of rejoined (chaos, seed
// 17). An offer taken back is not found, and the view keeps no offers.
func TestOffersAreFoundWhileTheWatchIsStalled(t *testing.T) {
	n := testenv.StartNATS(t)
	deps := testenv.Deps(t, testenv.Config(n.URL()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, _ := newReplica(ctx, t, deps.JS, deps.Config.Buckets.ClientWaits, true)
	b, _ := newReplica(ctx, t, deps.JS, deps.Config.Buckets.ClientWaits, false)
	b.s.kv = stalledKV{b.s.kv}
	go b.Follow(ctx, slog.New(slog.DiscardHandler))

	const offer = OfferPrefix + "offer"
	if _, err := a.Join(ctx, offer, Rejoin{Call: "c1", Revision: 1}); err != nil {
		t.Fatal(err)
	}
	r, ok, err := b.Find(ctx, offer, true)
	if err != nil || !ok || r.Call != "c1" {
		t.Fatalf("a replica whose watch is stalled found %+v (found=%v, err=%v), want the offer of c1", r, ok, err)
	}
	if won, err := b.Deliver(ctx, offer, r); err != nil || !won {
		t.Fatalf("take the offer back: won=%v err=%v", won, err)
	}
	if _, ok, err := a.Find(ctx, offer, true); err != nil || ok {
		t.Fatalf("an offer another replica took back is found: found=%v err=%v", ok, err)
	}
	for name, v := range map[string]*Rejoins{"a": a, "b": b} {
		v.mu.Lock()
		held := len(v.known)
		v.mu.Unlock()
		if held != 0 {
			t.Errorf("replica %s's view holds %d keys after writing and taking back an offer, want none", name, held)
		}
	}
}
