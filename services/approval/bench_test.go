package approval_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/shared/testenv"
)

// BenchmarkApproveRoundTrip measures one approval as a front-end sees it:
// request to the decide endpoint, CAS write of the record, the approved
// event stored in the stream, reply.
func BenchmarkApproveRoundTrip(b *testing.B) {
	w := newWorld(b)
	w.start()
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = fmt.Sprintf("bench-%d", i)
		w.ask(&airlockv1.ToolCall{CallId: ids[i]}, nil)
	}
	for _, id := range ids {
		testenv.Eventually(b, 60*time.Second, "call "+id+" to be pending", func() bool {
			rec, err := w.api.Get(context.Background(), "bot", id, 0)
			return err == nil && rec.GetState() == airlockv1.ApprovalState_APPROVAL_STATE_PENDING
		})
	}
	b.ResetTimer()
	for _, id := range ids {
		resp, err := w.approve(id, "alice")
		if err != nil || !resp.Changed {
			b.Fatalf("approve %s: %v %v", id, resp, err)
		}
	}
}
