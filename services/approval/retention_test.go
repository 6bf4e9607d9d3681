package approval_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// Ended approval records carry the retention as a per-key TTL, so the NATS
// server removes them (R5 F2: 50 asked-then-cancelled calls of 200 KB
// arguments grew the bucket by 52 MB, for ever); a reader of a removed call
// is told where its history is.
func TestEndedApprovalsLeaveTheBucketAfterTheirRetention(t *testing.T) {
	// The retention outlasts the loop below on a loaded machine: an ended
	// record (and its lock) read after it passed is gone.
	w := newWorld(t, func(c *config.Config) { c.Approval.EndedRetention = 5 * time.Second })
	w.start()
	ctx := context.Background()
	kv, bytesHeld := approvalsBucket(t, w)
	pad := strings.Repeat("x", 200<<10)
	const calls = 5
	for i := range calls {
		id := "c" + string(rune('a'+i))
		args, _ := structpb.NewStruct(map[string]any{"path": "/tmp/x", "pad": pad})
		w.pending(&airlockv1.ToolCall{CallId: id, Arguments: args}, nil)
		// Written: pending, with no TTL yet, the record holds its 200 KiB.
		// Measured now, not once every call ended: a loaded machine can
		// take longer than the retention over the loop, and the first
		// records are gone by then.
		if b := bytesHeld(); b < 200<<10 {
			t.Fatalf("the bucket holds %d bytes with %s pending: its record of 200 KiB was not written", b, id)
		}
		w.rejected(id) // its own answer says so, not a later read
	}
	testenv.Eventually(t, 30*time.Second, "ended records to leave the bucket", func() bool {
		for i := range calls {
			if _, err := kv.Get(ctx, "bot.c"+string(rune('a'+i))+".1"); !errors.Is(err, jetstream.ErrKeyNotFound) {
				return false
			}
		}
		return true
	})
	testenv.Eventually(t, 30*time.Second, "the bucket to hold under 64 KiB", func() bool { return bytesHeld() < 64<<10 })
	_, err := w.api.Get(ctx, "bot", "ca", 0)
	if err == nil || !strings.Contains(err.Error(), "airlock audit query --call ca") {
		t.Fatalf("reading a removed call: %v, want an error naming `airlock audit query --call ca`", err)
	}
}

// A call refused past its agent's share is recorded ended from the start,
// with the call's arguments: it leaves the bucket after the retention too,
// or an agent asking past its share would fill the bucket for ever.
func TestACallRefusedPastItsAgentsShareLeavesTheBucketAfterTheRetention(t *testing.T) {
	w := newWorld(t, func(c *config.Config) {
		c.Approval.EndedRetention = 2 * time.Second
		c.Approval.MaxPendingPerAgent = 1
	})
	w.start()
	ctx := context.Background()
	kv, err := w.js.KeyValue(ctx, w.cfg.Buckets.Approvals)
	if err != nil {
		t.Fatal(err)
	}
	w.pending(&airlockv1.ToolCall{CallId: "first"}, nil)
	w.ask(&airlockv1.ToolCall{CallId: "past"}, nil)
	// The refusal's canceled event, published once its ended record was
	// stored, says it was recorded: a read of the record itself may come
	// after the 2 s retention removed it (a loaded machine), and then
	// waits for a state no record has any more.
	testenv.WaitForEvent(t, w.js, "airlock.evt.bot.past.>", "canceled", 10*time.Second)
	testenv.Eventually(t, 30*time.Second, "the refused call's record to leave the bucket", func() bool {
		_, err := kv.Get(ctx, "bot.past.1")
		return errors.Is(err, jetstream.ErrKeyNotFound)
	})
}

// A thread queue's lock (domain.QueueKey) leaves the bucket with its
// thread's last call, after the ended records' retention (R6): an agent
// whose calls are queued per thread and that opens a fresh thread per call
// (and ends each) left a lock per call in the bucket every agent shares,
// for ever. (While a call of the thread waits, its lock stays:
// TestAThreadsTurnOutlastsTheRetentionWhileItsCallWaits.)
func TestThreadQueueLocksLeaveTheBucketWithTheirThreadsLastCall(t *testing.T) {
	// The retention outlasts the loop below on a loaded machine: an ended
	// record (and its lock) read after it passed is gone.
	w := newWorld(t, func(c *config.Config) { c.Approval.EndedRetention = 5 * time.Second })
	w.start()
	ctx := context.Background()
	kv, _ := approvalsBucket(t, w)
	locks := func() int {
		keys, err := bus.Keys(ctx, kv, ">")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, k := range keys {
			if strings.HasPrefix(k, "_queue.") {
				n++
			}
		}
		return n
	}
	const calls = 4
	for i := range calls {
		id := "q" + string(rune('a'+i))
		w.pending(&airlockv1.ToolCall{CallId: id, ThreadId: "thread-" + id}, &airlockv1.Decision{Approvers: []string{"group:reviewers"}, QueuePerThread: true})
		// Recorded queued, it is released a moment later: a decision before
		// its turn changes nothing (a fresh-clone CI once rejected it first).
		testenv.Eventually(t, 10*time.Second, id+" to have its thread's turn", func() bool {
			r, err := w.api.Get(ctx, "bot", id, 0)
			return err == nil && !r.GetQueued()
		})
		w.rejected(id) // its own answer says so, not a later read
	}
	if n := locks(); n == 0 {
		t.Fatalf("no thread lock in the bucket after %d queued calls on threads of their own: the test no longer exercises the locks", calls)
	}
	testenv.Eventually(t, 30*time.Second, "the threads' locks to leave the bucket", func() bool { return locks() == 0 })
}

// A thread's lock takes the retention as its TTL even when no release ran
// after the thread's last call ended (its replica stopped between ending
// the call and releasing, or the release's write failed): a sweep retires
// it, once. It stayed in the bucket without a TTL until a later call of
// the thread ended (for a thread never used again, for ever, counting
// toward its agent's share); and a sweep rewriting it at every round would
// push its expiry back for ever.
func TestASweepRetiresAThreadLockNoReleaseRetiredOnce(t *testing.T) {
	const retention = 5 * time.Second
	w := newWorld(t, func(c *config.Config) {
		c.Approval.EndedRetention = retention
		c.Approval.SweepInterval = time.Hour // the test runs each sweep (SweepForTest)
	})
	rec := &recorder{name: "rec"}
	w.start(rec)
	ctx := context.Background()
	kv, _ := approvalsBucket(t, w)
	w.pending(&airlockv1.ToolCall{CallId: "last", ThreadId: "t"}, &airlockv1.Decision{Approvers: []string{"group:reviewers"}, QueuePerThread: true})
	testenv.Eventually(t, 10*time.Second, "last to be released", func() bool { return rec.has("announce:last") })

	// The replica deciding last writes the decision and stops before its
	// release: the record ends, and nothing touches the thread's lock.
	e, err := kv.Get(ctx, "bot.last.1")
	if err != nil {
		t.Fatal(err)
	}
	ended := &airlockv1.ApprovalRecord{}
	if err := proto.Unmarshal(e.Value(), ended); err != nil {
		t.Fatal(err)
	}
	ended.State, ended.Reason, ended.UpdatedAt = airlockv1.ApprovalState_APPROVAL_STATE_REJECTED, "no", timestamppb.Now()
	ended.DecidedBy = &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "alice", Channel: "console"}
	data, err := proto.Marshal(ended)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Update(ctx, "bot.last.1", data, e.Revision()); err != nil {
		t.Fatal(err)
	}

	stream, err := w.js.Stream(ctx, "KV_"+w.cfg.Buckets.Approvals)
	if err != nil {
		t.Fatal(err)
	}
	lock := "$KV." + w.cfg.Buckets.Approvals + "._queue.bot.t"
	var retired *jetstream.RawStreamMsg
	testenv.Eventually(t, 10*time.Second, "a sweep to give the thread's lock the retention as its TTL", func() bool {
		w.service.SweepForTest(ctx)
		m, err := stream.GetLastMsgForSubject(ctx, lock)
		if err != nil {
			t.Fatalf("reading the thread's lock: %v", err)
		}
		ttl, err := time.ParseDuration(m.Header.Get(jetstream.MsgTTLHeader))
		if err != nil || ttl != retention {
			return false
		}
		retired = m
		return true
	})

	// The sweeps that follow, whether or not their index has seen the
	// retiring write yet, leave the lock as it is.
	for range 2 {
		w.service.SweepForTest(ctx)
	}
	m, err := stream.GetLastMsgForSubject(ctx, lock)
	if err != nil {
		t.Fatalf("reading the retired lock (the machine may have taken the whole %s retention since): %v", retention, err)
	}
	if m.Sequence != retired.Sequence {
		t.Fatalf("a later sweep rewrote the retired lock (stream sequence %d, then %d): every sweep would push its expiry back", retired.Sequence, m.Sequence)
	}
	testenv.Eventually(t, 30*time.Second, "the thread's lock to leave the bucket", func() bool {
		_, err := kv.Get(ctx, "_queue.bot.t")
		return errors.Is(err, jetstream.ErrKeyNotFound)
	})
}

// A new call arriving in a thread whose lock is retired (its last call
// ended, the lock marked and given the retention as its TTL), or whose
// retired lock has since left the bucket, takes the turn: it is released
// at once, and the lock names it again without a TTL, so that it holds the
// turn however long the call waits and the thread's next call queues
// behind it.
func TestANewCallTakesTheTurnOfAThreadWhoseLockIsRetired(t *testing.T) {
	for _, tt := range []struct {
		name      string
		retention time.Duration
		gone      bool // wait for the retired lock to leave the bucket first
	}{
		{"marked_retired", time.Hour, false},
		{"retired_and_expired", 2 * time.Second, true},
	} {
		t.Run(tt.name, func(t *testing.T) { newCallTakesARetiredTurn(t, tt.retention, tt.gone) })
	}
}

func newCallTakesARetiredTurn(t *testing.T, retention time.Duration, gone bool) {
	w := newWorld(t, func(c *config.Config) { c.Approval.EndedRetention = retention })
	rec := &recorder{name: "rec"}
	w.start(rec)
	ctx := context.Background()
	kv, _ := approvalsBucket(t, w)
	stream, err := w.js.Stream(ctx, "KV_"+w.cfg.Buckets.Approvals)
	if err != nil {
		t.Fatal(err)
	}
	queue := func() *airlockv1.Decision {
		return &airlockv1.Decision{Approvers: []string{"group:reviewers"}, QueuePerThread: true}
	}
	const lockKey = "_queue.bot.t"
	// lock is the thread's lock as last written, and its TTL ("" for none).
	lock := func() (value, ttl string) {
		t.Helper()
		m, err := stream.GetLastMsgForSubject(ctx, "$KV."+w.cfg.Buckets.Approvals+"."+lockKey)
		if err != nil {
			t.Fatalf("reading the thread's lock: %v", err)
		}
		return string(m.Data), m.Header.Get(jetstream.MsgTTLHeader)
	}

	// Every write of the lock, seen as its writer makes it: the retiring
	// write is taken from there, not read from the bucket, where a 2 s
	// retention can remove it before a read comes (a loaded machine).
	lockWrites, err := w.deps.NC.SubscribeSync("$KV." + w.cfg.Buckets.Approvals + "." + lockKey)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lockWrites.Unsubscribe() }()
	testenv.Subscribed(t, w.deps.NC)

	w.pending(&airlockv1.ToolCall{CallId: "first", ThreadId: "t"}, queue())
	testenv.Eventually(t, 10*time.Second, "first to be released", func() bool { return rec.has("announce:first") })
	if _, err := w.decide("first", "alice", airlockv1.DecisionKind_DECISION_KIND_REJECT, "no"); err != nil {
		t.Fatal(err)
	}
	var retiredAs, retiredTTL string
	for !strings.HasPrefix(retiredAs, "_retired.") {
		m, err := lockWrites.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("waiting for the thread's lock to be retired: %v", err)
		}
		retiredAs, retiredTTL = string(m.Data), m.Header.Get(jetstream.MsgTTLHeader)
	}
	if retiredAs != "_retired.bot.first.1" || retiredTTL != retention.String() {
		t.Fatalf("the lock was retired as %q with TTL %q; want _retired.bot.first.1 with TTL %s", retiredAs, retiredTTL, retention)
	}
	if gone {
		// It leaves the bucket only if it was stored with its TTL.
		testenv.Eventually(t, 30*time.Second, "the retired lock to leave the bucket", func() bool {
			_, err := kv.Get(ctx, lockKey)
			return errors.Is(err, jetstream.ErrKeyNotFound)
		})
	} else if v, ttl := lock(); v != "_retired.bot.first.1" || ttl != retention.String() {
		// Kept an hour, the retiring write is what the bucket holds.
		t.Fatalf("the retired lock is %q with TTL %q; want _retired.bot.first.1 with TTL %s", v, ttl, retention)
	}

	w.pending(&airlockv1.ToolCall{CallId: "second", ThreadId: "t"}, queue())
	testenv.Eventually(t, 10*time.Second, "second, arriving in the thread whose lock is retired, to be released", func() bool { return rec.has("announce:second") })
	if r := w.waitState("second", 1, airlockv1.ApprovalState_APPROVAL_STATE_PENDING); r.GetQueued() {
		t.Fatal("second is announced but still queued")
	}
	if v, ttl := lock(); v != "bot.second.1" || ttl != "" {
		t.Fatalf("the thread's lock after second took the turn is %q with TTL %q; want bot.second.1 with no TTL (it must outlast the call)", v, ttl)
	}
	if e, err := kv.Get(ctx, lockKey); err != nil || string(e.Value()) != "bot.second.1" {
		t.Fatalf("the thread's lock read from the bucket: %v; want it naming bot.second.1", err)
	}

	// The turn is real again: the thread's next call waits for second.
	w.pending(&airlockv1.ToolCall{CallId: "third", ThreadId: "t"}, queue())
	w.service.SweepForTest(ctx) // a release of the thread, done when it returns
	if r := w.waitState("third", 1, airlockv1.ApprovalState_APPROVAL_STATE_PENDING); !r.GetQueued() || rec.has("announce:third") {
		t.Fatalf("third was released beside second (queued=%v): the retired lock was not replaced by second's turn", r.GetQueued())
	}
	if _, err := w.decide("second", "alice", airlockv1.DecisionKind_DECISION_KIND_REJECT, "no"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "third to be released once second is decided", func() bool { return rec.has("announce:third") })
}
