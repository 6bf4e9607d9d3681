package approval_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/callref"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// R-held F1: the first delivery of revision 2's approval_requested stores
// its record, naming this replica its announcer, and then fails (revision
// 1's record does not decode for a moment, so superseding it fails). The
// message, delivered again, finds the record naming a replica that runs:
// it was acknowledged, never announced, and revision 1 stayed pending.
func TestACallStoredByAnAttemptThatFailedIsAnnouncedAndSupersedesTheEarlierRevision(t *testing.T) {
	w := newWorld(t)
	chat := &recorder{name: "chat"}
	w.start(chat)
	w.pending(&airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Revision: 1}, nil)
	testenv.Eventually(t, 10*time.Second, "revision 1 to be announced", func() bool { return chat.has("announce:c1") })

	ctx := context.Background()
	kv, err := w.js.KeyValue(ctx, w.cfg.Buckets.Approvals)
	if err != nil {
		t.Fatal(err)
	}
	k1 := callref.Ref{Agent: "bot", Call: "c1", Rev: 1}.Key()
	orig, err := kv.Get(ctx, k1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, k1, []byte{0xff, 0xff, 0xff}); err != nil {
		t.Fatal(err)
	}
	retries := w.replica.Metrics.Handled.WithLabelValues("approval", "retry")
	before := testutil.ToFloat64(retries)
	w.ask(&airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Revision: 2}, nil)
	testenv.Eventually(t, 10*time.Second, "the first attempt at revision 2 to fail", func() bool { return testutil.ToFloat64(retries) > before })
	if _, err := kv.Get(ctx, callref.Ref{Agent: "bot", Call: "c1", Rev: 2}.Key()); err != nil {
		t.Fatalf("revision 2's failed attempt stored no record (%v): the failure is not the one under test", err)
	}
	if _, err := kv.Put(ctx, k1, orig.Value()); err != nil {
		t.Fatal(err)
	}

	testenv.Eventually(t, 10*time.Second, "revision 2 to be announced", func() bool { return len(chat.seenOf("announce:c1")) == 2 })
	testenv.Eventually(t, 10*time.Second, "revision 1 to be superseded", func() bool {
		rec, err := w.api.Get(ctx, "bot", "c1", 1)
		return err == nil && rec.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_CANCELED
	})
	testenv.Eventually(t, 10*time.Second, "revision 2's announcement to end", func() bool {
		rec, err := w.api.Get(ctx, "bot", "c1", 2)
		return err == nil && rec.GetAnnouncer() == "" && len(rec.GetNotifications()) == 1
	})
	if n := len(chat.seenOf("announce:c1")); n != 2 {
		t.Fatalf("the channel announced call c1 %d times, want once per revision", n)
	}
}
