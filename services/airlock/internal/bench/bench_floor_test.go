package bench

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/airlock-gate/airlock/services/shared/embedded"
	"github.com/airlock-gate/airlock/services/shared/envelope"
)

// startTestServer starts an embedded NATS server on a free port with a
// file store of the test's, stopped when the test ends.
func startTestServer(t *testing.T) *embedded.Server {
	t.Helper()
	ns, err := embedded.Start(embedded.Options{Port: -1, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Stop)
	return ns
}

// TestMessagingFloorMeasuresEveryOperation runs the floor briefly against an
// embedded server: every operation must have been carried out (a failed
// publish, CAS, KV write or delivery fails the run) and carry its figures.
func TestMessagingFloorMeasuresEveryOperation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := startTestServer(t)
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
// of the goal's floor stores messages with exactly the headers SPEC §3 and
// exactly-once require of the call's message it stands for (the
// CloudEvents attributes and traceparent with the values specFloorMsgs
// gives them; the decision its own message id; a compare-and-append its two
// expectations), none of airlock's others, and records exactly as large as
// the bare operation's; the sync publishes (and the RePublishes measured
// against them) store the request and the decision in turn, as a call's
// two; the bare operations store no header but a compare-and-append's
// expectations.
func TestTheFloorsOperationsWithSPECsHeadersStoreExactlyThem(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := startTestServer(t)
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
	after := []string{envelope.HeaderExpectedLastSubjSeq, envelope.HeaderExpectedLastSubjSeqSubject}
	request, decision, appended := spec.request, spec.decision, spec.appended
	for _, tc := range []struct {
		name    string
		stream  string
		rig     func(floorMsgs) floorRig
		prepare bool // the messages are read after prepare (a work queue's ack removes them)
		// kinds: the call's messages it stores (each of them when more
		// than one), by their ce-type; bare: the headers of a bare one.
		kinds []nats.Header
		bare  []string
	}{
		{"sync publish", "FLOOR_SYNC", func(fm floorMsgs) floorRig { return floorSyncPublishRig(ctx, js, o, fm) }, false, []nats.Header{request, decision}, nil},
		{"compare-and-append", "FLOOR_CAS", func(fm floorMsgs) floorRig { return floorCASPublishRig(ctx, js, o, fm) }, false, []nats.Header{appended}, after},
		{"delivery + ack", "FLOOR_PULL", func(fm floorMsgs) floorRig { return floorPullRig(ctx, js, o, fm, jetstream.LimitsPolicy) }, true, []nats.Header{decision}, nil},
		{"delivery + ack from a work queue", "FLOOR_PULL_WQ", func(fm floorMsgs) floorRig { return floorPullRig(ctx, js, o, fm, jetstream.WorkQueuePolicy) }, true, []nats.Header{request}, nil},
		{"RePublish to a subscriber", "FLOOR_REPUB_SUB", func(fm floorMsgs) floorRig { return floorRePublishRig(ctx, ns.URL(), js, o, fm, true) }, false, []nats.Header{request, decision}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, fm := range []floorMsgs{bareFloorMsgs(payload), spec} {
				rig := fm.rigFor(t, tc.rig)
				stream := tc.stream
				if fm.tag != "" {
					stream = tc.stream + "_SPEC"
				}
				const n = 4
				if tc.prepare {
					if err := rig.prepare(n); err != nil {
						t.Fatal(err)
					}
				} else if err := rig.run(n); err != nil {
					t.Fatal(err)
				}
				s, err := js.Stream(ctx, stream)
				if err != nil {
					t.Fatal(err)
				}
				// Every message stored, none taken for a duplicate.
				if got := s.CachedInfo().State.Msgs; got != n {
					t.Fatalf("%s stores %d messages of %d published", stream, got, n)
				}
				seen, ids := map[string]int{}, map[string]bool{}
				for seq := s.CachedInfo().State.FirstSeq; seq <= s.CachedInfo().State.LastSeq; seq++ {
					m, err := s.GetMsg(ctx, seq)
					if err != nil {
						t.Fatal(err)
					}
					if fm.tag == "" {
						if got := slices.Sorted(maps.Keys(m.Header)); !slices.Equal(got, slices.Sorted(slices.Values(tc.bare))) || len(m.Data) != o.Payload {
							t.Errorf("%s stores headers %v and %d B, want %v and %d B", stream, got, len(m.Data), tc.bare, o.Payload)
						}
						continue
					}
					typ := envelope.HeaderValue(m.Header, envelope.HeaderCEType)
					i := slices.IndexFunc(tc.kinds, func(h nats.Header) bool { return envelope.HeaderValue(h, envelope.HeaderCEType) == typ })
					if i < 0 {
						t.Fatalf("%s stores a message of ce-type %q, want one of the call's %v", stream, typ, tc.kinds)
					}
					seen[typ]++
					want := tc.kinds[i]
					if got := slices.Sorted(maps.Keys(m.Header)); !slices.Equal(got, slices.Sorted(maps.Keys(want))) {
						t.Errorf("%s stores headers %v for %s, want %v", stream, got, typ, slices.Sorted(maps.Keys(want)))
					}
					for k, v := range want {
						got := envelope.HeaderValue(m.Header, k)
						switch {
						case k == envelope.HeaderMsgID:
							// Its own each time, as long as a call's.
							if len(got) != len(v[0]) || ids[got] {
								t.Errorf("%s: the decision's message id %q, want one of its own as long as %q", stream, got, v[0])
							}
							ids[got] = true
						case slices.Contains(after, k):
							if got == "" {
								t.Errorf("%s: expectation %s is empty", stream, k)
							}
						case got != v[0]:
							t.Errorf("%s: %s is %q, want %q as specFloorMsgs gives it", stream, k, got, v[0])
						}
					}
					if size := headerSize(m.Header) + len(m.Data); size != o.Payload {
						t.Errorf("%s stores %d B of header and body, want %d as the bare message's body", stream, size, o.Payload)
					}
				}
				if fm.tag != "" && len(seen) != len(tc.kinds) {
					t.Errorf("%s stores the call's messages %v, want each of %d kinds", stream, seen, len(tc.kinds))
				}
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
