package approval

import (
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
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
			ix.recs["bot.c1.1"], ix.unsettled["bot.c1.1"] = rec, true
			taken := ix.takeUnsettled(time.Now())
			if len(taken) != 1 {
				t.Fatalf("took %d records, want the decided one", len(taken))
			}
			if again := ix.takeUnsettled(time.Now()); len(again) != 0 {
				t.Fatalf("a taken record was taken again before it was put back: %v", again)
			}
			// Meanwhile the record may have moved on (the executor started it).
			ix.recs["bot.c1.1"] = &airlockv1.ApprovalRecord{Call: rec.Call, State: tt.state, UpdatedAt: old}
			ix.unsettle(taken[0])
			if got := len(ix.takeUnsettled(time.Now())); got != tt.want {
				t.Fatalf("after a failed check %d records are taken again, want %d", got, tt.want)
			}
		})
	}
}
