package approval

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
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

// A decided record whose event the sweeper could not check or republish
// (the stream was unreachable, the lookup refused) is checked again at a
// later sweep instead of being forgotten until the replica restarts.
func TestUnsettledDecisionIsRetriedAfterAFailedCheck(t *testing.T) {
	tests := []struct {
		name  string
		state airlockv1.ApprovalState
		want  int
	}{
		{"decided_record_is_taken_again", airlockv1.ApprovalState_APPROVAL_STATE_APPROVED, 1},
		{"record_that_left_its_decision_is_not", airlockv1.ApprovalState_APPROVAL_STATE_EXECUTING, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := newIndex(slog.Default(), func() uint64 { return 0 })
			old := timestamppb.New(time.Now().Add(-time.Minute))
			rec := &airlockv1.ApprovalRecord{
				Call:      &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Revision: 1},
				State:     airlockv1.ApprovalState_APPROVAL_STATE_APPROVED,
				UpdatedAt: old,
			}
			put(t, ix, rec)
			ix.unsettled["bot.c1.1"] = true
			taken := ix.takeUnsettled(time.Now())
			if len(taken) != 1 {
				t.Fatalf("took %d records, want the decided one", len(taken))
			}
			if again := ix.takeUnsettled(time.Now()); len(again) != 0 {
				t.Fatalf("a taken record was taken again before it was put back: %v", again)
			}
			// Meanwhile the record may have moved on (the executor started it).
			put(t, ix, &airlockv1.ApprovalRecord{Call: rec.Call, State: tt.state, UpdatedAt: old})
			ix.unsettle(taken[0])
			if got := len(ix.takeUnsettled(time.Now())); got != tt.want {
				t.Fatalf("after a failed check %d records are taken again, want %d", got, tt.want)
			}
		})
	}
}

// The index hands out pages in list order (newest first, then by key)
// whatever order records arrive in, a page continues exactly where the
// previous one ended, an agent's pages hold only its records, and a record
// removed from the index leaves its pages.
func TestIndexPagesInListOrder(t *testing.T) {
	ix := newIndex(slog.Default(), func() uint64 { return 0 })
	base := time.Now()
	var want []string // list order: newest first, equal times by key
	// Arrival order differs from list order; c3 and c4 share a time.
	for _, r := range []struct {
		agent, call string
		at          int
	}{{"a", "c1", 1}, {"b", "c5", 5}, {"a", "c4", 3}, {"b", "c3", 3}, {"a", "c2", 2}, {"a", "c6", 6}} {
		rec := &airlockv1.ApprovalRecord{Call: &airlockv1.ToolCall{AgentId: r.agent, CallId: r.call, Revision: 1},
			State: airlockv1.ApprovalState_APPROVAL_STATE_PENDING, CreatedAt: timestamppb.New(base.Add(time.Duration(r.at) * time.Second))}
		put(t, ix, rec)
	}
	want = []string{"a.c6.1", "b.c5.1", "a.c4.1", "b.c3.1", "a.c2.1", "a.c1.1"}
	keys := func(recs []*airlockv1.ApprovalRecord) []string {
		var out []string
		for _, r := range recs {
			out = append(out, r.GetCall().GetAgentId()+"."+r.GetCall().GetCallId()+".1")
		}
		return out
	}
	all := func(*entry) bool { return true }
	tests := []struct {
		name  string
		agent string
		limit int
		want  []string
	}{
		{"everything_in_list_order", "", 0, want},
		{"pages_of_two_continue_where_the_last_ended", "", 2, want},
		{"an_agents_pages_hold_only_its_records", "a", 2, []string{"a.c6.1", "a.c4.1", "a.c2.1", "a.c1.1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			var after *pagePos
			for range 10 {
				page := ix.page(tt.agent, after, tt.limit, all)
				if len(page) == 0 {
					break
				}
				got = append(got, keys(page)...)
				pos, err := parsePageToken(pageTokenOf(page[len(page)-1]))
				if err != nil {
					t.Fatal(err)
				}
				after = pos
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Fatalf("pages %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("a_removed_record_leaves_its_pages", func(t *testing.T) {
		ix.apply(kvEntry{key: "b.c3.1", op: jetstream.KeyValueDelete})
		if got := strings.Join(keys(ix.page("", nil, 0, all)), " "); got != "a.c6.1 b.c5.1 a.c4.1 a.c2.1 a.c1.1" {
			t.Fatalf("after removing b.c3.1: %s", got)
		}
		if got := keys(ix.page("b", nil, 0, all)); len(got) != 1 || got[0] != "b.c5.1" {
			t.Fatalf("agent b after removing b.c3.1: %v", got)
		}
	})
}

// kvEntry is a bucket entry as the watch delivers it to index.apply.
type kvEntry struct {
	key string
	val []byte
	op  jetstream.KeyValueOp
}

func (e kvEntry) Bucket() string                  { return "approvals" }
func (e kvEntry) Key() string                     { return e.key }
func (e kvEntry) Value() []byte                   { return e.val }
func (e kvEntry) Revision() uint64                { return 1 }
func (e kvEntry) Created() time.Time              { return time.Time{} }
func (e kvEntry) Delta() uint64                   { return 0 }
func (e kvEntry) Operation() jetstream.KeyValueOp { return e.op }

func put(t *testing.T, ix *index, rec *airlockv1.ApprovalRecord) string {
	t.Helper()
	data, err := proto.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	key := fmt.Sprintf("%s.%s.%d", rec.GetCall().GetAgentId(), rec.GetCall().GetCallId(), rec.GetCall().GetRevision())
	ix.apply(kvEntry{key: key, val: data, op: jetstream.KeyValuePut})
	return key
}

// A sweep is handed only the pending records it has work for (a deadline
// passed, a reminder or escalation due), however many wait; one it could
// not settle is handed again at the next sweep, and one that changed is
// handed when its new time comes (or never, once decided).
func TestASweepIsHandedOnlyTheRecordsThatAreDue(t *testing.T) {
	ix := newIndex(slog.Default(), func() uint64 { return 0 })
	now := time.Now()
	rec := func(id string, deadline time.Duration, d *airlockv1.Decision) *airlockv1.ApprovalRecord {
		return &airlockv1.ApprovalRecord{Call: &airlockv1.ToolCall{AgentId: "bot", CallId: id, Revision: 1},
			State: airlockv1.ApprovalState_APPROVAL_STATE_PENDING, Decision: d,
			CreatedAt: timestamppb.New(now.Add(-time.Hour)), Deadline: timestamppb.New(now.Add(deadline))}
	}
	for i := range 1000 {
		put(t, ix, rec(fmt.Sprintf("later%d", i), time.Hour, nil))
	}
	expired := rec("expired", -time.Second, nil)
	put(t, ix, expired)
	reminded := rec("remind", time.Hour, &airlockv1.Decision{RemindAfter: durationpb.New(time.Minute)})
	put(t, ix, reminded)
	keys := func(recs []*airlockv1.ApprovalRecord) []string {
		var out []string
		for _, r := range recs {
			out = append(out, r.GetCall().GetCallId())
		}
		slices.Sort(out)
		return out
	}
	if got := keys(ix.dueRecords(now)); !slices.Equal(got, []string{"expired", "remind"}) {
		t.Fatalf("due %v, want the expired and the reminded record alone", got)
	}
	if got := keys(ix.dueRecords(now)); !slices.Equal(got, []string{"expired", "remind"}) {
		t.Fatalf("a due record nobody changed is not handed again: %v", got)
	}
	// The sweeper expired one and reminded the other: the watch delivers both.
	expired.State = airlockv1.ApprovalState_APPROVAL_STATE_EXPIRED
	put(t, ix, expired)
	reminded.Reminded = true
	put(t, ix, reminded)
	if got := keys(ix.dueRecords(now)); len(got) != 0 {
		t.Fatalf("records the sweeper dealt with are due again: %v", got)
	}
	if got := keys(ix.dueRecords(now.Add(time.Hour))); len(got) != 1001 {
		t.Fatalf("at the deadline of the others %d are due, want 1001", len(got))
	}
	if ix.pendingCount() != 1001 {
		t.Fatalf("%d pending, want 1001", ix.pendingCount())
	}
	ix.apply(kvEntry{key: "bot.later0.1", op: jetstream.KeyValueDelete})
	if got := len(ix.dueRecords(now.Add(time.Hour))); got != 1000 || ix.pendingCount() != 1000 {
		t.Fatalf("a deleted record is still due or counted: %d due, %d pending", got, ix.pendingCount())
	}
}

// The index hands out each record exactly as a list carries it
// (calls.Abridged), from the bytes it holds: a small record whole, a
// record with large arguments without them.
func TestTheIndexHandsOutRecordsAsListsCarryThem(t *testing.T) {
	small, err := structpb.NewStruct(map[string]any{"path": "/tmp/a", "n": 3})
	if err != nil {
		t.Fatal(err)
	}
	large, err := structpb.NewStruct(map[string]any{"content": strings.Repeat("x", 8<<10)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		args *structpb.Struct
	}{{"a_small_record_whole", small}, {"a_large_record_abridged", large}} {
		t.Run(tt.name, func(t *testing.T) {
			ix := newIndex(slog.Default(), func() uint64 { return 0 })
			full := &airlockv1.ApprovalRecord{Call: &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Revision: 2, ThreadId: "t", Server: "demo", Tool: "write_file", Arguments: tt.args},
				State: airlockv1.ApprovalState_APPROVAL_STATE_PENDING, Decision: &airlockv1.Decision{Risk: airlockv1.Risk_RISK_HIGH, Approvers: []string{"group:reviewers"}},
				CreatedAt: timestamppb.Now(), Deadline: timestamppb.New(time.Now().Add(time.Hour))}
			put(t, ix, full)
			got := ix.page("bot", nil, 0, func(e *entry) bool {
				return e.pending() && e.thread == "t" && e.tool == "write_file" && e.risk == airlockv1.Risk_RISK_HIGH
			})
			if len(got) != 1 || !proto.Equal(got[0], calls.Abridged(full)) {
				t.Fatalf("handed out %v, want the listed form %v", got, calls.Abridged(full))
			}
		})
	}
}

// An indexed record that does not decode is handed out reduced to its call
// and state, and the failure is logged with the record's key rather than
// passing silently.
func TestAnUndecodableIndexedRecordIsLoggedWithItsKey(t *testing.T) {
	var logged strings.Builder
	ix := newIndex(slog.New(slog.NewTextHandler(&logged, nil)), func() uint64 { return 0 })
	put(t, ix, &airlockv1.ApprovalRecord{Call: &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Revision: 2, Tool: "write_file"},
		State: airlockv1.ApprovalState_APPROVAL_STATE_PENDING, CreatedAt: timestamppb.Now()})
	ix.recs["bot.c1.2"].data = []byte{0xff, 0xff, 0xff} // not protobuf
	got := ix.page("", nil, 0, func(*entry) bool { return true })
	if len(got) != 1 || got[0].GetCall().GetCallId() != "c1" || got[0].GetCall().GetTool() != "write_file" || got[0].GetState() != airlockv1.ApprovalState_APPROVAL_STATE_PENDING {
		t.Fatalf("handed out %v, want the record reduced to its call and state", got)
	}
	if out := logged.String(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "key=bot.c1.2") || !strings.Contains(out, "err=") {
		t.Fatalf("the decode failure was not logged with the record's key; log: %q", out)
	}
}

// A thread queue's lock (domain.QueueKey) is bytes its agent put in the
// bucket: it counts toward the agent's share (key and value) until it
// leaves, as a record does; keys that are neither count toward nobody.
func TestAThreadQueuesLockCountsTowardItsAgentsBytes(t *testing.T) {
	lock := func(key, holder string) kvEntry {
		return kvEntry{key: key, val: []byte(holder), op: jetstream.KeyValuePut}
	}
	tests := []struct {
		name string
		ops  []kvEntry
		want map[string]int64
	}{
		{"lock_put", []kvEntry{lock("_queue.bot.t1", "bot.c1.1")}, map[string]int64{"bot": 13 + 8}},
		{"lock_moved_to_a_longer_holder", []kvEntry{lock("_queue.bot.t1", "bot.c1.1"), lock("_queue.bot.t1", "bot.c22.1")},
			map[string]int64{"bot": 13 + 9}},
		{"lock_expired", []kvEntry{lock("_queue.bot.t1", "bot.c1.1"), {key: "_queue.bot.t1", op: jetstream.KeyValuePurge}},
			map[string]int64{}},
		{"lock_deleted", []kvEntry{lock("_queue.bot.t1", "bot.c1.1"), {key: "_queue.bot.t1", op: jetstream.KeyValueDelete}},
			map[string]int64{}},
		{"locks_of_two_agents", []kvEntry{lock("_queue.bot.t1", "bot.c1.1"), lock("_queue.other.t1", "other.c1.1")},
			map[string]int64{"bot": 13 + 8, "other": 15 + 10}},
		{"a_key_naming_no_thread", []kvEntry{lock("_queue.bot", "x")}, map[string]int64{}},
		{"other_reserved_key", []kvEntry{lock("_other", "x")}, map[string]int64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := newIndex(slog.Default(), func() uint64 { return 0 })
			for _, e := range tt.ops {
				ix.apply(e)
			}
			if !maps.Equal(ix.bytesBy, tt.want) {
				t.Fatalf("bytes by agent %v, want %v", ix.bytesBy, tt.want)
			}
		})
	}
}

// The sweeper retires the thread locks no release retired (a release cut
// short after the thread's last call): those naming no pending call, of a
// thread with no queued call, not yet retired. A lock naming a pending
// call holds its turn; a thread with a queued call is the release's; a
// retired lock has its TTL already, and retiring it again would push its
// expiry back.
func TestTheSweeperIsHandedTheLocksNoReleaseRetired(t *testing.T) {
	call := func(id, thread string, state airlockv1.ApprovalState, queued bool) *airlockv1.ApprovalRecord {
		return &airlockv1.ApprovalRecord{Call: &airlockv1.ToolCall{AgentId: "bot", CallId: id, Revision: 1, ThreadId: thread},
			Decision: &airlockv1.Decision{QueuePerThread: true}, State: state, Queued: queued, CreatedAt: timestamppb.Now()}
	}
	const (
		pending  = airlockv1.ApprovalState_APPROVAL_STATE_PENDING
		rejected = airlockv1.ApprovalState_APPROVAL_STATE_REJECTED
	)
	lock := func(val []byte) kvEntry { return kvEntry{key: "_queue.bot.t", val: val, op: jetstream.KeyValuePut} }
	tests := []struct {
		name string
		recs []*airlockv1.ApprovalRecord
		lock []byte
		want []string
	}{
		{"holder_ended", []*airlockv1.ApprovalRecord{call("c1", "t", rejected, false)}, []byte("bot.c1.1"), []string{"_queue.bot.t"}},
		{"holder_gone_from_the_bucket", nil, []byte("bot.c1.1"), []string{"_queue.bot.t"}},
		{"holder_pending", []*airlockv1.ApprovalRecord{call("c1", "t", pending, false)}, []byte("bot.c1.1"), nil},
		{"holder_ended_and_a_call_queued", []*airlockv1.ApprovalRecord{call("c1", "t", rejected, false), call("c2", "t", pending, true)},
			[]byte("bot.c1.1"), nil},
		{"holder_ended_and_another_threads_call_queued", []*airlockv1.ApprovalRecord{call("c1", "t", rejected, false), call("c2", "u", pending, true)},
			[]byte("bot.c1.1"), []string{"_queue.bot.t"}},
		{"retired", []*airlockv1.ApprovalRecord{call("c1", "t", rejected, false)}, domain.RetiredLock("bot.c1.1"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := newIndex(slog.Default(), func() uint64 { return 0 })
			for _, rec := range tt.recs {
				put(t, ix, rec)
			}
			ix.apply(lock(tt.lock))
			if got := ix.strandedLocks(); !slices.Equal(got, tt.want) {
				t.Fatalf("stranded locks %v, want %v", got, tt.want)
			}
		})
	}
}
