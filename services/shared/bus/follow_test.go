package bus_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// endableKV is a bucket whose watches a test may end (end), as a closed
// connection or a restart that failed ends one, and whose next starts fail
// with the errors in fail, one each.
type endableKV struct {
	jetstream.KeyValue
	mu      sync.Mutex
	current chan struct{} // closed: the latest watch ends
	fail    []error
	failing int          // every error put in fail
	starts  atomic.Int32 // every Watch call
	watches atomic.Int32 // the watches started
}

func (k *endableKV) Watch(ctx context.Context, keys string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	k.starts.Add(1)
	k.mu.Lock()
	if len(k.fail) > 0 {
		err := k.fail[0]
		k.fail = k.fail[1:]
		k.mu.Unlock()
		return nil, err
	}
	k.mu.Unlock()
	w, err := k.KeyValue.Watch(ctx, keys, opts...)
	if err != nil {
		return nil, err
	}
	k.watches.Add(1)
	end := make(chan struct{})
	k.mu.Lock()
	k.current = end
	k.mu.Unlock()
	ew := &endedOnDemand{w: w, updates: make(chan jetstream.KeyValueEntry)}
	go func() {
		defer close(ew.updates)
		for {
			select {
			case <-end:
				return
			case e, open := <-w.Updates():
				if !open {
					return
				}
				select {
				case ew.updates <- e:
				case <-end:
					return
				}
			}
		}
	}()
	return ew, nil
}

// end ends the latest watch, and makes the next starts fail with errs.
func (k *endableKV) end(errs ...error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.fail = append(k.fail, errs...)
	k.failing += len(errs)
	close(k.current)
}

// discard is a logger for what Follow logs.
var discard = slog.New(slog.DiscardHandler)

type endedOnDemand struct {
	w       jetstream.KeyWatcher
	updates chan jetstream.KeyValueEntry
}

func (e *endedOnDemand) Updates() <-chan jetstream.KeyValueEntry { return e.updates }
func (e *endedOnDemand) Stop() error                             { return e.w.Stop() }

// TestFollowStartsItsWatchAgain: Follow hands out what is stored (replayed),
// its mark, then changes; when its watch ends, or the connection
// reconnected, it starts the watch again, which replays what is stored
// then, marks its end, and goes on with what changes after.
func TestFollowStartsItsWatchAgain(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	for _, tt := range []struct {
		name  string
		again func(kv *endableKV, reconnects *atomic.Uint64)
	}{
		{"when_its_watch_ends", func(kv *endableKV, _ *atomic.Uint64) { kv.end() }},
		{"when_the_connection_reconnected", func(_ *endableKV, reconnects *atomic.Uint64) { reconnects.Add(1) }},
		// No server answering, a cluster without a leader: tried again.
		{"when_its_watch_ends_and_new_starts_fail_for_a_while", func(kv *endableKV, _ *atomic.Uint64) {
			kv.end(nats.ErrTimeout, nats.ErrJetStreamNotEnabled, &nats.APIError{Code: 503, ErrorCode: nats.JSErrCodeJetStreamNotAvailable, Description: "JetStream system temporarily unavailable"}, errors.New("anything else"))
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			bucket, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "follow_" + tt.name})
			if err != nil {
				t.Fatal(err)
			}
			put := func(k, v string) {
				t.Helper()
				if _, err := bucket.PutString(ctx, k, v); err != nil {
					t.Fatal(err)
				}
			}
			put("a.1", "one")
			put("a.2", "two")
			put("b.1", "elsewhere")
			kv := &endableKV{KeyValue: bucket}
			var reconnects atomic.Uint64
			changes, err := bus.Follow(ctx, kv, "a.>", bus.FollowOptions{What: "the test's entries", Log: discard, Reconnects: reconnects.Load})
			if err != nil {
				t.Fatal(err)
			}
			next := func() string {
				t.Helper()
				select {
				case c, open := <-changes:
					switch {
					case !open:
						t.Fatal("Follow's changes ended")
					case c.Entry == nil && c.Replayed:
						return "replayed mark"
					case c.Entry == nil:
						return "mark"
					case c.Replayed:
						return "replayed " + c.Entry.Key() + "=" + string(c.Entry.Value())
					}
					return c.Entry.Key() + "=" + string(c.Entry.Value())
				case <-time.After(10 * time.Second):
					t.Fatal("Follow handed out nothing more within 10s")
				}
				return ""
			}
			expect := func(want ...string) {
				t.Helper()
				for _, w := range want {
					if got := next(); got != w {
						t.Fatalf("Follow handed out %q, want %q", got, w)
					}
				}
			}
			// A replay hands out the stored entries in revision order.
			expect("replayed a.1=one", "replayed a.2=two", "mark")
			put("a.1", "uno")
			expect("a.1=uno")
			tt.again(kv, &reconnects)
			expect("replayed a.2=two", "replayed a.1=uno", "mark")
			put("a.2", "dos")
			expect("a.2=dos")
			if got := kv.watches.Load(); got != 2 {
				t.Fatalf("%d watches started, want 2", got)
			}
			if got, want := kv.starts.Load(), 2+int32(kv.failing); got != want {
				t.Fatalf("%d starts, want %d (2 watches, %d that failed)", got, want, kv.failing)
			}
		})
	}
}

// TestFollowEnds: a first start that cannot succeed is returned (the bucket
// is gone), and the changes end when the connection closes — neither is
// tried again for ever.
func TestFollowEnds(t *testing.T) {
	n := testenv.StartNATS(t)
	nc, js := testenv.Connect(t, n.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "follow_ends"})
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteKeyValue(ctx, "follow_ends"); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.Follow(ctx, kv, ">", bus.FollowOptions{What: "a bucket gone", Log: discard}); err == nil || ctx.Err() != nil {
		t.Fatalf("following a bucket that is gone: %v (context: %v), want its failure at once", err, ctx.Err())
	}

	kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "follow_ends"})
	if err != nil {
		t.Fatal(err)
	}
	changes, err := bus.Follow(ctx, kv, ">", bus.FollowOptions{What: "the test's entries", Log: discard})
	if err != nil {
		t.Fatal(err)
	}
	if c := <-changes; c.Entry != nil {
		t.Fatalf("an empty bucket's first change is %v, want its mark", c.Entry.Key())
	}
	nc.Close()
	for {
		select {
		case _, open := <-changes:
			if !open {
				return
			}
		case <-ctx.Done():
			t.Fatal("the changes went on after the connection closed")
		}
	}
}

// TestFollowsFirstStart: a first start that fails is tried again when it
// may succeed so (no server answered, no JetStream leader yet), or when
// told to persist; one that cannot is returned, having started nothing.
func TestFollowsFirstStart(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bucket, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "follow_first"})
	if err != nil {
		t.Fatal(err)
	}
	gone := jetstream.ErrBucketNotFound
	for _, tt := range []struct {
		name    string
		fail    error
		persist bool
		started bool
	}{
		{"a_timeout_is_tried_again", nats.ErrTimeout, false, true},
		{"no_jetstream_answering_is_tried_again", nats.ErrJetStreamNotEnabled, false, true},
		{"a_cluster_without_a_leader_is_tried_again", &nats.APIError{Code: 503, ErrorCode: nats.JSErrCodeJetStreamNotAvailable, Description: "JetStream system temporarily unavailable"}, false, true},
		{"a_bucket_gone_is_returned", gone, false, false},
		{"a_bucket_gone_is_tried_again_when_told_to_persist", gone, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			kv := &endableKV{KeyValue: bucket, fail: []error{tt.fail}}
			fctx, stop := context.WithCancel(ctx)
			defer stop()
			changes, err := bus.Follow(fctx, kv, ">", bus.FollowOptions{What: "the test's entries", Log: discard, Persist: tt.persist})
			switch {
			case !tt.started && (err == nil || !errors.Is(err, tt.fail) || kv.watches.Load() != 0):
				t.Fatalf("Follow: %v with %d watches, want %v returned and none started", err, kv.watches.Load(), tt.fail)
			case tt.started && err != nil:
				t.Fatalf("Follow: %v, want %v tried again", err, tt.fail)
			case tt.started:
				if c := <-changes; c.Entry != nil || kv.starts.Load() != 2 {
					t.Fatalf("first change %v after %d starts, want the empty bucket's mark after 2", c.Entry, kv.starts.Load())
				}
			}
		})
	}
}
