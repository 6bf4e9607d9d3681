package bench

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/embedded"
	"github.com/airlock-gate/airlock/services/shared/envelope"
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

// TestTheFloorsOperationsWithSPECsHeadersStoreExactlyThem: each operation
// of the goal's floor stores messages with exactly the headers SPEC §3
// requires (the CloudEvents attributes and traceparent; a
// compare-and-append also its two expectations), none of airlock's others,
// and records as large as the bare operation's; the bare operations store
// no header but a compare-and-append's expectations.
func TestTheFloorsOperationsWithSPECsHeadersStoreExactlyThem(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns, err := embedded.Start(embedded.Options{Port: -1, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Stop()
	nc, js, err := floorConn(ns.URL(), "floor-headers-test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	o := floorOptions{Concurrency: 2, Payload: 700}
	o.defaults()
	payload := make([]byte, o.Payload)
	spec, err := specFloorMsgs(payload)
	if err != nil {
		t.Fatal(err)
	}
	every := []string{envelope.HeaderCEID, envelope.HeaderCEType, envelope.HeaderCESource, envelope.HeaderCETime, envelope.HeaderCESpec, envelope.HeaderTraceparent}
	after := []string{envelope.HeaderExpectedLastSubjSeq, envelope.HeaderExpectedLastSubjSeqSubject}
	for _, tc := range []struct {
		name    string
		stream  string
		rig     func(floorMsgs) floorRig
		prepare bool // the messages are read after prepare (a work queue's ack removes them)
		want    []string
		bare    []string
	}{
		{"sync publish", "FLOOR_SYNC", func(fm floorMsgs) floorRig { return floorSyncPublishRig(ctx, js, o, fm) }, false, every, nil},
		{"compare-and-append", "FLOOR_CAS", func(fm floorMsgs) floorRig { return floorCASPublishRig(ctx, js, o, fm) }, false, append(slices.Clone(every), after...), after},
		{"delivery + ack", "FLOOR_PULL", func(fm floorMsgs) floorRig { return floorPullRig(ctx, js, o, fm, jetstream.LimitsPolicy) }, true, every, nil},
		{"delivery + ack from a work queue", "FLOOR_PULL_WQ", func(fm floorMsgs) floorRig { return floorPullRig(ctx, js, o, fm, jetstream.WorkQueuePolicy) }, true, every, nil},
		{"RePublish to a subscriber", "FLOOR_REPUB_SUB", func(fm floorMsgs) floorRig { return floorRePublishRig(ctx, ns.URL(), js, o, fm, true) }, false, every, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sizes []int
			for _, fm := range []floorMsgs{bareFloorMsgs(payload), spec} {
				rig := fm.rigFor(t, tc.rig)
				stream, want := tc.stream, tc.bare
				if fm.tag != "" {
					stream, want = tc.stream+"_SPEC", tc.want
				}
				if tc.prepare {
					if err := rig.prepare(4); err != nil {
						t.Fatal(err)
					}
				} else if err := rig.run(4); err != nil {
					t.Fatal(err)
				}
				s, err := js.Stream(ctx, stream)
				if err != nil {
					t.Fatal(err)
				}
				m, err := s.GetMsg(ctx, s.CachedInfo().State.LastSeq)
				if err != nil {
					t.Fatal(err)
				}
				if got := slices.Sorted(maps.Keys(m.Header)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
					t.Errorf("%s stores headers %v, want %v", stream, got, want)
				}
				for k, v := range m.Header {
					if len(v) != 1 || v[0] == "" {
						t.Errorf("%s: header %s is %q", stream, k, v)
					}
				}
				if fm.tag != "" {
					sizes = append(sizes, headerSize(m.Header)+len(m.Data))
				} else {
					sizes = append(sizes, len(m.Data))
				}
			}
			if bare, spec := sizes[0], sizes[1]; spec < bare*9/10 || spec > bare*11/10 {
				t.Errorf("a message with SPEC's headers takes %d B, a bare one %d B: the records should be as large", spec, bare)
			}
		})
	}
}

// rigFor sets up the rig mk makes for fm, stopped when t ends.
func (fm floorMsgs) rigFor(t *testing.T, mk func(floorMsgs) floorRig) floorRig {
	t.Helper()
	rig := mk(fm)
	if rig.err != nil {
		t.Fatal(rig.err)
	}
	t.Cleanup(rig.stop)
	return rig
}
