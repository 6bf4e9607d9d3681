package approval_test

import (
	"context"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// queuedAnnouncer is a channel that reports each call it is told about and
// whether the call was still waiting its thread's turn then.
type queuedAnnouncer struct {
	recorder
	told chan *airlockv1.ApprovalRecord
}

func (q *queuedAnnouncer) Announce(ctx context.Context, rec *airlockv1.ApprovalRecord) (string, error) {
	q.told <- rec
	return q.recorder.Announce(ctx, rec)
}

// A call queued behind its thread's turn is announced when its turn comes,
// not when its escalation falls due while it waits (reviewers would be
// shown a call they cannot decide yet).
func TestAQueuedCallIsNotAnnouncedByItsEscalation(t *testing.T) {
	w := newWorld(t)
	ch := &queuedAnnouncer{recorder: recorder{name: "rec"}, told: make(chan *airlockv1.ApprovalRecord, 16)}
	w.start(ch)
	d := func() *airlockv1.Decision {
		return &airlockv1.Decision{Approvers: []string{"group:reviewers"}, QueuePerThread: true, Timeout: seconds(60),
			EscalateAfter: seconds(0.3), EscalateTo: []string{"group:oncall"}}
	}
	w.pending(&airlockv1.ToolCall{CallId: "head", ThreadId: "t"}, d())
	w.pending(&airlockv1.ToolCall{CallId: "waits", ThreadId: "t"}, d())
	testenv.Eventually(t, 10*time.Second, "the waiting call's escalation to fall due", func() bool {
		r, err := w.api.Get(context.Background(), "bot", "waits", 0)
		return err == nil && r.GetEscalated() && r.GetQueued()
	})
	if _, err := w.approve("head", "alice"); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case rec := <-ch.told:
			if rec.GetCall().GetCallId() != "waits" {
				continue
			}
			if rec.GetQueued() {
				t.Fatal("a call still waiting its thread's turn was announced (its escalation fell due)")
			}
			return
		case <-timeout:
			t.Fatal("the waiting call was not announced when its turn came")
		}
	}
}
