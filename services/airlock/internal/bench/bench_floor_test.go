package bench

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/embedded"
)

// TestMessagingFloorMeasuresEveryOperation runs the floor briefly against an
// embedded server: every operation must have been carried out (a failed
// publish, CAS, KV write or delivery fails the run) and carry its figures.
func TestMessagingFloorMeasuresEveryOperation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns, err := embedded.Start(embedded.Options{Port: -1, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Stop()
	f, err := measureFloor(ctx, ns.URL(), floorOptions{Samples: 50, Ops: 400, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]floorOp{
		"sync publish": f.SyncPublish, "async publish": f.AsyncPublish, "compare-and-append": f.CASPublish,
		"KV create": f.KVCreate, "KV update": f.KVUpdate, "direct get": f.DirectGet,
		"pull delivery and ack": f.PullDeliverAck, "pull from a work queue": f.PullDeliverAckWorkQueue, "core publish": f.CorePubSub, "raw hop": f.RawHop,
		"atomic batch of two": f.BatchAppend2,
	}
	for name, op := range ops {
		if !(op.Latency.P50us > 0 && op.Latency.P99us >= op.Latency.P50us && op.CPUPerOpUs > 0 && op.PerSecond > 0) {
			t.Errorf("%s: figures missing or inconsistent: %+v", name, op)
		}
	}
	mix := floorMix{SyncPublish: 1, KVCreate: 2}
	if got, want := f.CPUus(mix), f.SyncPublish.CPUPerOpUs+2*f.KVCreate.CPUPerOpUs; got != want {
		t.Errorf("CPUus(%+v) = %v, want %v", mix, got, want)
	}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"sync_publish"`, `"async_publish"`, `"cas_publish"`, `"kv_create"`, `"kv_update"`, `"direct_get_last"`, `"pull_deliver_ack"`, `"pull_deliver_ack_work_queue"`, `"core_publish_deliver"`, `"republish"`, `"republish_delivered"`, `"batch_append_2"`, `"raw_hop"`, `"cpu_us_per_op"`, `"p99_us"`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON lacks %s: %s", key, b)
		}
	}
}
