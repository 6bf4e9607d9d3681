package approval_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// Seed 002: one pending confirmation per session, the later ones queue.
func TestAThreadsLaterCallsWaitTheirTurn(t *testing.T) {
	w := newWorld(t)
	rec := &recorder{name: "rec"}
	w.start(rec)
	queue := func() *airlockv1.Decision {
		return &airlockv1.Decision{Approvers: []string{"group:reviewers"}, QueuePerThread: true}
	}
	// The agent stamps its later call with an earlier time: airlock orders
	// the queue by when it received each call, never by what the agent says.
	early := timestamppb.New(time.Now().Add(-time.Hour))
	w.pending(&airlockv1.ToolCall{CallId: "q1", ThreadId: "sess"}, queue())
	w.pending(&airlockv1.ToolCall{CallId: "q2", ThreadId: "sess", CreatedAt: early}, queue())
	w.pending(&airlockv1.ToolCall{CallId: "q3", ThreadId: "sess"}, queue())
	// The same thread id of another agent is another queue.
	w.pending(&airlockv1.ToolCall{AgentId: "other", CallId: "o1", ThreadId: "sess"}, queue())
	testenv.Eventually(t, 10*time.Second, "the heads of both queues to be announced", func() bool {
		return rec.has("announce:q1") && rec.has("announce:o1")
	})
	for _, id := range []string{"q2", "q3"} {
		if r := w.waitState(id, 1, airlockv1.ApprovalState_APPROVAL_STATE_PENDING); !r.GetQueued() || rec.has("announce:"+id) {
			t.Fatalf("%s is not waiting its turn: queued=%v", id, r.GetQueued())
		}
	}

	t.Run("a_queued_call_cannot_be_decided_before_its_turn", func(t *testing.T) {
		resp, err := w.approve("q3", "alice")
		if err != nil || resp.GetChanged() {
			t.Fatalf("deciding a queued call: changed=%v, %v", resp.GetChanged(), err)
		}
		t.Logf("answer: %s", resp.GetMessage())
	})
	t.Run("deciding_the_head_releases_the_next_in_arrival_order", func(t *testing.T) {
		if _, err := w.approve("q1", "alice"); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 10*time.Second, "q2 to be announced", func() bool { return rec.has("announce:q2") })
		if rec.has("announce:q3") {
			t.Fatal("q3 was released together with q2")
		}
	})
	t.Run("a_withdrawn_head_releases_the_next_too", func(t *testing.T) {
		if _, err := w.decide("q2", "bob", airlockv1.DecisionKind_DECISION_KIND_REJECT, "no"); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 10*time.Second, "q3 to be announced", func() bool { return rec.has("announce:q3") })
		if resp, err := w.approve("q3", "alice"); err != nil || !resp.GetChanged() {
			t.Fatalf("approving the released q3: %v %v", resp, err)
		}
	})
}

func TestAQueuedCallStillExpiresOnItsOwn(t *testing.T) {
	w := newWorld(t)
	w.start()
	d := func(timeout float64) *airlockv1.Decision {
		return &airlockv1.Decision{QueuePerThread: true, Timeout: seconds(timeout)}
	}
	w.pending(&airlockv1.ToolCall{CallId: "head", ThreadId: "t"}, d(60))
	// Not waiting for waits to be pending: on a loaded machine the first
	// read can come after its 1 s deadline, and it is expired by then.
	// The expired record says it never left the queue.
	w.ask(&airlockv1.ToolCall{CallId: "waits", ThreadId: "t"}, d(1))
	if r := w.waitState("waits", 1, airlockv1.ApprovalState_APPROVAL_STATE_EXPIRED); !r.GetQueued() {
		t.Fatal("waits expired, but not while queued behind head: the test no longer shows a queued call expiring")
	}
}

// A thread's lock holds its turn for as long as the call holding it
// waits, however far past approval.ended_retention: a releaser that does
// not see that call (a replica whose index is a moment late) finds the
// lock and leaves the thread's new call queued behind it. A lock written
// with the retention as its TTL at every move of the turn was gone by
// then, and such a releaser released the new call beside the waiting one.
func TestAThreadsTurnOutlastsTheRetentionWhileItsCallWaits(t *testing.T) {
	w := newWorld(t, func(c *config.Config) { c.Approval.EndedRetention = 2 * time.Second })
	rec := &recorder{name: "rec"}
	w.start(rec)
	ctx := context.Background()
	kv, _ := approvalsBucket(t, w)
	queue := func() *airlockv1.Decision {
		return &airlockv1.Decision{Approvers: []string{"group:reviewers"}, QueuePerThread: true}
	}
	w.pending(&airlockv1.ToolCall{CallId: "head", ThreadId: "t"}, queue())
	testenv.Eventually(t, 10*time.Second, "head to be released and announced", func() bool { return rec.has("announce:head") })

	// A record ended after head took the turn, with the retention as its
	// TTL, leaves the bucket: the retention has passed for the lock too.
	w.pending(&airlockv1.ToolCall{CallId: "marker"}, nil)
	w.rejected("marker") // its own answer says so, not a later read
	testenv.Eventually(t, 30*time.Second, "the ended marker call to leave the bucket", func() bool {
		_, err := kv.Get(ctx, "bot.marker.1")
		return errors.Is(err, jetstream.ErrKeyNotFound)
	})

	later := w.pending(&airlockv1.ToolCall{CallId: "later", ThreadId: "t"}, queue())
	if err := w.service.ReleaseUnindexedForTest(ctx, later); err != nil {
		t.Fatal(err)
	}
	if r := w.waitState("later", 1, airlockv1.ApprovalState_APPROVAL_STATE_PENDING); !r.GetQueued() {
		t.Fatal("later was released beside head, which still holds the thread's turn: the thread's lock left the bucket while head waited")
	}
	if e, err := kv.Get(ctx, "_queue.bot.t"); err != nil || string(e.Value()) != "bot.head.1" {
		t.Fatalf("the thread's lock past the retention: %v; want it naming bot.head.1", err)
	}

	if _, err := w.decide("head", "alice", airlockv1.DecisionKind_DECISION_KIND_REJECT, "no"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "later to be released once head is decided", func() bool { return rec.has("announce:later") })
}

// The lock never moves off a pending call. A releaser won the turn for
// q1 as head ended and has not written q1's release yet; another replica,
// whose index does not yet show q1, releases the thread for q2, the one
// call it knows. It must release q1, whose turn the lock gives, and leave
// q2 queued: moving the lock to q2 released q2 while q1's release was on
// its way, two calls of one thread before reviewers at once.
func TestAReleaserThatDoesNotSeeTheHolderReleasesTheHolderNotItsOwnCall(t *testing.T) {
	w := newWorld(t, func(c *config.Config) { c.Approval.SweepInterval = time.Hour })
	rec := &recorder{name: "rec"}
	w.start(rec)
	ctx := context.Background()
	kv, _ := approvalsBucket(t, w)
	queue := func() *airlockv1.Decision {
		return &airlockv1.Decision{Approvers: []string{"group:reviewers"}, QueuePerThread: true}
	}
	w.pending(&airlockv1.ToolCall{CallId: "head", ThreadId: "t"}, queue())
	testenv.Eventually(t, 10*time.Second, "head to be released and announced", func() bool { return rec.has("announce:head") })
	w.pending(&airlockv1.ToolCall{CallId: "q1", ThreadId: "t"}, queue())
	q2 := w.pending(&airlockv1.ToolCall{CallId: "q2", ThreadId: "t"}, queue())

	// head ends and a releaser takes the turn for q1, then pauses before
	// its release write (written here as that releaser's two writes).
	if err := w.service.EndForTest(ctx, "bot.head.1", airlockv1.ApprovalState_APPROVAL_STATE_REJECTED); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "_queue.bot.t", []byte("bot.q1.1")); err != nil {
		t.Fatal(err)
	}

	if err := w.service.ReleaseUnindexedForTest(ctx, q2); err != nil {
		t.Fatal(err)
	}
	if r := w.waitState("q2", 1, airlockv1.ApprovalState_APPROVAL_STATE_PENDING); !r.GetQueued() || rec.has("announce:q2") {
		t.Fatal("q2 was released beside q1, whose turn the thread's lock gave")
	}
	testenv.Eventually(t, 10*time.Second, "q1, whose turn the lock gives, to be released and announced", func() bool { return rec.has("announce:q1") })
	if e, err := kv.Get(ctx, "_queue.bot.t"); err != nil || string(e.Value()) != "bot.q1.1" {
		t.Fatalf("the thread's lock: %v; want it naming bot.q1.1", err)
	}
}
