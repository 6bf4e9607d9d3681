package bus_test

import (
	"context"
	"maps"
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
