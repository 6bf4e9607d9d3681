package bus_test

import (
	"context"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// ReadAll hands out each current entry under its filter with its newest
// value, once: deleted keys and keys outside the filter are left out, and
// an empty filter's read ends at once.
func TestReadAllHandsOutEachCurrentEntryOnce(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "readall", History: 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, put := range [][2]string{{"a.1", "old"}, {"a.1", "new"}, {"a.2", "two"}, {"a.3", "gone"}, {"b.1", "other"}} {
		if _, err := kv.PutString(ctx, put[0], put[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := kv.Delete(ctx, "a.3"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, filter string
		want         map[string]string
	}{
		{"every_entry_under_the_filter_with_its_newest_value", "a.>", map[string]string{"a.1": "new", "a.2": "two"}},
		{"the_whole_bucket", ">", map[string]string{"a.1": "new", "a.2": "two", "b.1": "other"}},
		{"a_filter_nothing_matches", "c.>", map[string]string{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]string{}
			if err := bus.ReadAll(ctx, kv, tt.filter, func(e jetstream.KeyValueEntry) {
				if _, twice := got[e.Key()]; twice {
					t.Errorf("%s handed out twice", e.Key())
				}
				got[e.Key()] = string(e.Value())
			}); err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tt.want) {
				t.Fatalf("read %v, want %v", got, tt.want)
			}
		})
	}
}

// stallingKV is a bucket whose first watch hands out the first handed of
// its initial values and then nothing, not even their end: as a watch does
// when the rest of what its consumer counted expired before it was
// delivered. Later watches are the bucket's.
type stallingKV struct {
	jetstream.KeyValue
	handed  int
	watches atomic.Int32
}

func (k *stallingKV) Watch(ctx context.Context, keys string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	w, err := k.KeyValue.Watch(ctx, keys, opts...)
	if err != nil || k.watches.Add(1) > 1 {
		return w, err
	}
	stalled := stalledWatcher{w: w, updates: make(chan jetstream.KeyValueEntry, k.handed)}
	for range k.handed {
		if e := <-w.Updates(); e != nil {
			stalled.updates <- e
		}
	}
	return stalled, nil
}

type stalledWatcher struct {
	w       jetstream.KeyWatcher
	updates chan jetstream.KeyValueEntry
}

func (s stalledWatcher) Updates() <-chan jetstream.KeyValueEntry { return s.updates }
func (s stalledWatcher) Stop() error                             { return s.w.Stop() }

// TestReadsOfABucketEndWhenTheirWatchStalls: every read of stored entries
// (ReadAll, ReadKey, Keys, History) ends with what is stored even when its
// watch stalls before the end of its initial values — a console test
// waited 24 minutes on kv.History of a key whose marker expired in between
// — and hands out nothing twice across the watch's new start.
func TestReadsOfABucketEndWhenTheirWatchStalls(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bucket, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "stalls", History: 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, put := range [][2]string{{"a.1", "old"}, {"a.1", "new"}, {"a.2", "two"}, {"a.3", "three"}} {
		if _, err := bucket.PutString(ctx, put[0], put[1]); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		name   string
		handed int // before the first watch stalls
		read   func(context.Context, jetstream.KeyValue) ([]string, error)
		want   []string
	}{
		{"read_all_stalled_at_once", 0, readAll, []string{"a.1=new", "a.2=two", "a.3=three"}},
		{"read_all_stalled_part_way", 2, readAll, []string{"a.1=new", "a.2=two", "a.3=three"}},
		{"keys", 1, func(ctx context.Context, kv jetstream.KeyValue) ([]string, error) { return bus.Keys(ctx, kv, "a.>") }, []string{"a.1", "a.2", "a.3"}},
		{"read_key", 0, func(ctx context.Context, kv jetstream.KeyValue) ([]string, error) {
			e, err := bus.ReadKey(ctx, kv, "a.2")
			if err != nil {
				return nil, err
			}
			return []string{string(e.Value())}, nil
		}, []string{"two"}},
		{"history", 1, func(ctx context.Context, kv jetstream.KeyValue) ([]string, error) {
			entries, err := bus.History(ctx, kv, "a.1")
			var values []string
			for _, e := range entries {
				values = append(values, string(e.Value()))
			}
			return values, err
		}, []string{"old", "new"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			kv := &stallingKV{KeyValue: bucket, handed: tt.handed}
			// Well past the first start's wait, short of a hang.
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			got, err := tt.read(rctx, kv)
			if err != nil {
				t.Fatalf("the read with a stalled watch: %v", err)
			}
			slices.Sort(got)
			if want := slices.Sorted(slices.Values(tt.want)); !slices.Equal(got, want) {
				t.Fatalf("read %q, want %q", got, want)
			}
			if n := kv.watches.Load(); n != 2 {
				t.Fatalf("%d watches, want 2 (the stalled one and a new start)", n)
			}
		})
	}
}

// readAll is ReadAll's entries as key=value, failing on one handed out twice.
func readAll(ctx context.Context, kv jetstream.KeyValue) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	err := bus.ReadAll(ctx, kv, "a.>", func(e jetstream.KeyValueEntry) {
		if seen[e.Key()] {
			out = append(out, e.Key()+" twice")
		}
		seen[e.Key()] = true
		out = append(out, e.Key()+"="+string(e.Value()))
	})
	return out, err
}

// TestAWatchWhoseInitialValuesStallGoesOnLive: a long-running Watch whose
// first start stalls part way through what is stored is started again,
// hands out each stored entry once, ends them with nil, and then hands out
// what is written afterwards.
func TestAWatchWhoseInitialValuesStallGoesOnLive(t *testing.T) {
	n := testenv.StartNATS(t)
	_, js := testenv.Connect(t, n.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bucket, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "stalls"})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a.1", "a.2", "a.3"} {
		if _, err := bucket.PutString(ctx, k, "v"); err != nil {
			t.Fatal(err)
		}
	}
	kv := &stallingKV{KeyValue: bucket, handed: 2}
	w, err := bus.Watch(ctx, kv, "a.>")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	next := func() jetstream.KeyValueEntry {
		t.Helper()
		select {
		case e := <-w.Updates():
			return e
		case <-ctx.Done():
			t.Fatal("the watch handed out nothing more")
			return nil
		}
	}
	var stored []string
	for e := next(); e != nil; e = next() {
		stored = append(stored, e.Key())
	}
	if slices.Sort(stored); !slices.Equal(stored, []string{"a.1", "a.2", "a.3"}) {
		t.Fatalf("initial values %q, want each stored key once", stored)
	}
	if _, err := bucket.PutString(ctx, "a.4", "later"); err != nil {
		t.Fatal(err)
	}
	if e := next(); e == nil || e.Key() != "a.4" {
		t.Fatalf("after the initial values: %v, want a.4", e)
	}
	if n := kv.watches.Load(); n != 2 {
		t.Fatalf("%d watches, want 2", n)
	}
}

// TestAStalledReadEndsWhenItsConnectionCloses: a read whose watch stalled
// and whose connection then closed ends with an error (its new start
// cannot succeed), instead of trying again for ever under a context with
// no deadline.
func TestAStalledReadEndsWhenItsConnectionCloses(t *testing.T) {
	n := testenv.StartNATS(t)
	nc, js := testenv.Connect(t, n.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bucket, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "stalls"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bucket.PutString(ctx, "a.1", "v"); err != nil {
		t.Fatal(err)
	}
	kv := &stallingKV{KeyValue: bucket}
	ended := make(chan error, 1)
	go func() {
		_, err := bus.Keys(context.Background(), kv, "a.>")
		ended <- err
	}()
	testenv.Eventually(t, 10*time.Second, "the read's first watch", func() bool { return kv.watches.Load() > 0 })
	nc.Close()
	select {
	case err := <-ended:
		if err == nil {
			t.Fatal("the read ended without an error after its connection closed")
		}
	case <-ctx.Done():
		t.Fatal("the read went on after its connection closed")
	}
}
