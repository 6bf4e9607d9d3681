package approval

import (
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/approval/internal/domain"
	"github.com/airlock-gate/airlock/services/shared/calls"
)

// Whatever sequence of writes, deletes, purges (a TTL's expiry marker is
// one) and watch replays the bucket delivers, the index agrees with the
// bucket's content: the pending count and per-agent counts, each agent's
// bytes of records (approval.max_bytes_per_agent), the queued records, the records
// being announced by each announcer, the records a sweep is handed at any
// moment (exactly those whose NextDue came), each call's earlier pending
// revisions, and every list page (order, filter fields and the listed form
// handed out).
func TestTheIndexAgreesWithTheBucketAfterAnySequenceOfChanges(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprintf("seed_%d", seed), func(t *testing.T) {
			checkIndexModel(t, seed)
		})
	}
}

func checkIndexModel(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 7))
	ix := newIndex(slog.Default(), func() uint64 { return 0 })
	bucket := map[string]*airlockv1.ApprovalRecord{}
	now := time.Now().Truncate(time.Second)
	large, err := structpb.NewStruct(map[string]any{"content": strings.Repeat("x", 8<<10)})
	if err != nil {
		t.Fatal(err)
	}
	states := []airlockv1.ApprovalState{domain.Pending, domain.Pending, domain.Pending, domain.Approved, domain.Expired, domain.ChangesRequested, airlockv1.ApprovalState_APPROVAL_STATE_EXECUTING}
	mins := func(n int) time.Duration { return time.Duration(n) * time.Minute }
	random := func(key string) *airlockv1.ApprovalRecord {
		var agent, call string
		var rev uint32
		if _, err := fmt.Sscanf(strings.ReplaceAll(key, ".", " "), "%s %s %d", &agent, &call, &rev); err != nil {
			t.Fatal(err)
		}
		c := &airlockv1.ToolCall{AgentId: agent, CallId: call, Revision: rev, ThreadId: []string{"", "t1", "t2"}[r.IntN(3)], Tool: []string{"read", "write"}[r.IntN(2)], Server: "fs"}
		if r.IntN(4) == 0 {
			c.Arguments = large
		}
		d := &airlockv1.Decision{Risk: airlockv1.Risk(r.IntN(4)), QueuePerThread: r.IntN(2) == 0}
		if r.IntN(2) == 0 {
			d.RemindAfter = durationpb.New(mins(r.IntN(20) - 2))
		}
		if r.IntN(2) == 0 {
			d.EscalateAfter, d.EscalateTo = durationpb.New(mins(r.IntN(20))), []string{"group:oncall"}
		}
		return &airlockv1.ApprovalRecord{Call: c, Decision: d, State: states[r.IntN(len(states))],
			Queued: r.IntN(2) == 0, Reminded: r.IntN(3) == 0, Escalated: r.IntN(3) == 0, Announcer: []string{"", "r1", "r2"}[r.IntN(3)],
			CreatedAt: timestamppb.New(now.Add(mins(-r.IntN(10)))), UpdatedAt: timestamppb.New(now),
			Deadline: timestamppb.New(now.Add(mins(r.IntN(30) - 5)))}
	}
	var keys []string
	for _, a := range []string{"a", "b"} {
		for _, c := range []string{"c1", "c2", "c3"} {
			for rev := 1; rev <= 2; rev++ {
				keys = append(keys, fmt.Sprintf("%s.%s.%d", a, c, rev))
			}
		}
	}
	for step := range 300 {
		key := keys[r.IntN(len(keys))]
		switch n := r.IntN(10); {
		case n < 7:
			rec := random(key)
			bucket[key] = rec
			put(t, ix, rec)
		case n == 7:
			delete(bucket, key)
			ix.apply(kvEntry{key: key, op: []jetstream.KeyValueOp{jetstream.KeyValueDelete, jetstream.KeyValuePurge}[r.IntN(2)]})
		case n == 8:
			// A watch restarted: the bucket's content delivered again.
			for _, k := range slices.Sorted(maps.Keys(bucket)) {
				put(t, ix, bucket[k])
			}
		default:
			// A sweep at some moment; what it is handed is checked below.
			ix.dueRecords(now.Add(mins(r.IntN(40) - 10)))
		}
		compareIndex(t, fmt.Sprintf("step %d", step), ix, bucket, now.Add(mins(r.IntN(40)-10)))
	}
}

func compareIndex(t *testing.T, at string, ix *index, bucket map[string]*airlockv1.ApprovalRecord, now time.Time) {
	t.Helper()
	keyOf := func(r *airlockv1.ApprovalRecord) string { return domain.RefOf(r).Key() }
	keysOf := func(recs []*airlockv1.ApprovalRecord) []string {
		out := []string{}
		for _, r := range recs {
			out = append(out, keyOf(r))
		}
		return out
	}
	var pending, queued, due []string
	byAgent := map[string]int{}
	announcing := map[string][]string{}
	bytesBy := map[string]int64{}
	for k, r := range bucket {
		bytesBy[r.GetCall().GetAgentId()] += int64(proto.Size(r))
		if r.GetState() != domain.Pending {
			continue
		}
		pending = append(pending, k)
		byAgent[r.GetCall().GetAgentId()]++
		if r.GetQueued() && domain.InQueue(r) {
			queued = append(queued, k)
		}
		if a := r.GetAnnouncer(); a != "" {
			announcing[a] = append(announcing[a], k)
		}
		if !now.Before(domain.NextDue(r)) {
			due = append(due, k)
		}
	}
	if got := ix.pendingCount(); got != len(pending) {
		t.Fatalf("%s: %d pending counted, the bucket holds %d", at, got, len(pending))
	}
	if !maps.Equal(ix.pendingBy, byAgent) {
		t.Fatalf("%s: pending by agent %v, the bucket %v", at, ix.pendingBy, byAgent)
	}
	if !maps.Equal(ix.bytesBy, bytesBy) {
		t.Fatalf("%s: bytes by agent %v, the bucket %v", at, ix.bytesBy, bytesBy)
	}
	sorted := func(s []string) string { slices.Sort(s); return strings.Join(s, " ") }
	if got, want := sorted(keysOf(ix.queuedRecords())), sorted(queued); got != want {
		t.Fatalf("%s: queued %q, want %q", at, got, want)
	}
	if got, want := sorted(ix.announcers()), sorted(slices.Collect(maps.Keys(announcing))); got != want {
		t.Fatalf("%s: announcers %q, want %q", at, got, want)
	}
	for a, keys := range announcing {
		if got, want := sorted(ix.announcedBy(a)), sorted(keys); got != want {
			t.Fatalf("%s: announced by %s: %q, want %q", at, a, got, want)
		}
	}
	dueRecs := ix.dueRecords(now)
	if got, want := sorted(keysOf(dueRecs)), sorted(due); got != want {
		t.Fatalf("%s: due at %v: %q, want %q", at, now, got, want)
	}
	for i := 1; i < len(dueRecs); i++ {
		if domain.NextDue(dueRecs[i]).Before(domain.NextDue(dueRecs[i-1])) {
			t.Fatalf("%s: due records not earliest first", at)
		}
	}
	// Lists: every record in list order, each as a list carries it, and
	// filters on the fields beside the bytes agree with the bytes.
	var all []string
	for k := range bucket {
		all = append(all, k)
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := bucket[all[i]].GetCreatedAt().AsTime(), bucket[all[j]].GetCreatedAt().AsTime()
		if !a.Equal(b) {
			return a.After(b)
		}
		return all[i] < all[j]
	})
	page := ix.page("", nil, 0, func(e *entry) bool { return true })
	if got, want := strings.Join(keysOf(page), " "), strings.Join(all, " "); got != want {
		t.Fatalf("%s: list %q, want %q", at, got, want)
	}
	for _, rec := range page {
		if want := calls.Abridged(bucket[keyOf(rec)]); !proto.Equal(rec, want) {
			t.Fatalf("%s: %s listed as %v, want %v", at, keyOf(rec), rec, want)
		}
	}
	for _, agent := range []string{"a", "b"} {
		got := ix.page(agent, nil, 0, func(e *entry) bool {
			return e.pending() && e.thread == "t1" && e.server+"__"+e.tool == "fs__write" && e.risk >= airlockv1.Risk(2) && e.inQueue == (e.thread != "")
		})
		var want []string
		for _, k := range all {
			r := bucket[k]
			c := r.GetCall()
			if c.GetAgentId() == agent && r.GetState() == domain.Pending && c.GetThreadId() == "t1" && c.GetTool() == "write" && r.GetDecision().GetRisk() >= 2 && domain.InQueue(r) == (c.GetThreadId() != "") {
				want = append(want, k)
			}
		}
		if g, w := strings.Join(keysOf(got), " "), strings.Join(want, " "); g != w {
			t.Fatalf("%s: filtered list of %s %q, want %q", at, agent, g, w)
		}
	}
	for _, k := range all {
		ref := domain.RefOf(bucket[k])
		var want []string
		for rev := uint32(1); rev < ref.Rev; rev++ {
			if r := bucket[ref.WithRev(rev).Key()]; r != nil && r.GetState() == domain.Pending {
				want = append(want, ref.WithRev(rev).Key())
			}
		}
		if g, w := strings.Join(keysOf(ix.earlierPending(ref)), " "), strings.Join(want, " "); g != w {
			t.Fatalf("%s: earlier pending of %s %q, want %q", at, k, g, w)
		}
	}
}
