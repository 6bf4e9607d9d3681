package approval_test

import (
	"context"
	"strings"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
	"github.com/airlock-gate/airlock/services/approval"
	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/subject"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// A hook that gives up waiting withdraws its call at once (`airlock hook
// --wait`, then up to 5 s of cancels) and tells its agent no. When this
// service's consumer is behind, the policy's approval_requested waits in
// the stream unrecorded: the agent's cancel found no record ("no approval
// for call bot/gave-up"), and the call was recorded pending a moment
// later, to wait for its deadline at the head of its thread's queue, the
// thread's next call behind it. Here a slow preview of another agent's
// call holds the service's only worker while bot withdraws its call.
func TestACallWithdrawnBeforeItIsRecordedIsNeverPutToPeople(t *testing.T) {
	w := newWorld(t, func(c *config.Config) {
		c.Approval.Workers = 1
		c.Approval.PreviewTimeout = time.Minute
	})
	asked, release := make(chan struct{}, 1), make(chan struct{})
	w.serveSlowPreview(asked, release)
	rec := &recorder{name: "rec"}
	w.start(rec)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Revision 1 of "two" is recorded before the consumer falls behind.
	w.pending(&airlockv1.ToolCall{CallId: "two", AgentRuns: true}, nil)

	w.ask(&airlockv1.ToolCall{AgentId: "other", CallId: "slow"}, nil)
	select {
	case <-asked:
	case <-ctx.Done():
		t.Fatal("the executor was never asked for the slow call's preview")
	}
	thread := func() *airlockv1.Decision {
		return &airlockv1.Decision{Approvers: []string{"group:reviewers"}, QueuePerThread: true}
	}
	w.ask(&airlockv1.ToolCall{CallId: "gave-up", ThreadId: "sess", AgentRuns: true}, thread())
	w.ask(&airlockv1.ToolCall{CallId: "next", ThreadId: "sess", AgentRuns: true}, thread())
	w.ask(&airlockv1.ToolCall{CallId: "two", Revision: 2, AgentRuns: true}, nil)

	nc, _ := testenv.Connect(t, w.nats.URL())
	bot, err := airlock.New(nc, "bot")
	if err != nil {
		t.Fatal(err)
	}
	const reason = "the agent's hook stopped waiting after 1s; the agent was told no"
	if err := bot.Cancel(ctx, "gave-up", reason); err != nil {
		t.Fatalf("withdrawing a call put to people but not recorded yet: %v", err)
	}
	if out := await(t, w, "bot", "gave-up"); out.Status != airlock.StatusCanceled || out.Reason != reason {
		t.Fatalf("the agent read %s (%q), want canceled with its reason", out.Status, out.Reason)
	}
	if r, err := w.api.Get(ctx, "bot", "gave-up", 0); err != nil || r.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_CANCELED {
		t.Fatalf("the withdrawn call's record: %v, %v", r.GetState(), err)
	}

	// The newest revision is the one withdrawn, not the one recorded.
	if err := bot.Cancel(ctx, "two", reason); err != nil {
		t.Fatalf("withdrawing revision 2, put to people but not recorded yet: %v", err)
	}
	if r, err := w.api.Get(ctx, "bot", "two", 2); err != nil || r.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_CANCELED {
		t.Fatalf("revision 2 after its agent withdrew it: %v, %v", r.GetState(), err)
	}

	close(release) // the consumer catches up with the requests behind the slow one
	testenv.Eventually(t, 20*time.Second, "the thread's next call to get its turn and be announced", func() bool {
		return rec.has("announce:next")
	})
	testenv.Settled(t, w.js, w.cfg.Stream.Name, approval.Durable, 20*time.Second)
	if r := w.waitState("gave-up", 1, airlockv1.ApprovalState_APPROVAL_STATE_CANCELED); r.GetDecidedBy().GetId() != "bot" {
		t.Fatalf("the withdrawn call was ended by %v, want its agent", r.GetDecidedBy())
	}
	if rec.has("announce:gave-up") {
		t.Fatal("the withdrawn call was announced to reviewers")
	}
	if n := len(w.events("bot", "gave-up", subject.Canceled)); n != 1 {
		t.Fatalf("the withdrawn call has %d canceled events, want 1", n)
	}
	for rev := uint32(1); rev <= 2; rev++ {
		if r, err := w.api.Get(ctx, "bot", "two", rev); err != nil || r.GetState() != airlockv1.ApprovalState_APPROVAL_STATE_CANCELED {
			t.Fatalf("revision %d of the withdrawn call: %v, %v, want canceled (revision 2 withdrawn, 1 superseded)", rev, r.GetState(), err)
		}
	}
	if r := w.waitState("next", 1, airlockv1.ApprovalState_APPROVAL_STATE_PENDING); r.GetQueued() {
		t.Fatal("the thread's next call still waits behind the withdrawn one")
	}
}

// serveSlowPreview stands in for the executor's preview endpoint: each
// request is signalled on asked and answered once release is closed.
func (w *world) serveSlowPreview(asked chan<- struct{}, release <-chan struct{}) {
	w.t.Helper()
	w.servePreviewBy(func(ctx context.Context) *airlockv1.Preview {
		select {
		case asked <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return &airlockv1.Preview{Unavailable: "a test's slow preview"}
	})
}

// An ended call's record leaves the bucket after approval.ended_retention,
// and the trail still asks about it: its agent's cancel then finds no
// record and must not take it for one not recorded yet — a canceled event
// after an approval would say a call that ran never did.
func TestACancelOfACallWhoseRecordLeftChangesNothing(t *testing.T) {
	w := newWorld(t, func(c *config.Config) { c.Approval.EndedRetention = time.Second })
	w.start()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w.pending(&airlockv1.ToolCall{CallId: "done", AgentRuns: true}, nil)
	if _, err := w.approve("done", "alice"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "the approved call's record to leave the bucket", func() bool {
		_, err := w.api.Get(ctx, "bot", "done", 0)
		return err != nil
	})
	nc, _ := testenv.Connect(t, w.nats.URL())
	bot, err := airlock.New(nc, "bot")
	if err != nil {
		t.Fatal(err)
	}
	err = bot.Cancel(ctx, "done", "too late")
	if err == nil || !strings.Contains(err.Error(), "waits for nobody: it ended approved") {
		t.Fatalf("canceling a call approved and gone from the bucket answered %v", err)
	}
	if n := len(w.events("bot", "done", subject.Canceled)); n != 0 {
		t.Fatalf("the approved call got %d canceled events", n)
	}
	if _, err := w.api.Get(ctx, "bot", "done", 0); err == nil {
		t.Fatal("the cancel wrote a record for the approved call")
	}
}
