package approval

import (
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// A rule may set a timeout as long as a Go duration goes ("2562047h",
// some 292 years), putting the deadline past 2262, beyond what unix
// nanoseconds hold: such a record is not due before its time, and a
// reminder it has is due when it comes, not at every sweep; and a deadline
// before 1678 is due, not wrapped around to the future.
func TestARecordWithADeadlinePastTheYear2262IsNotDueAtEverySweep(t *testing.T) {
	longest, err := time.ParseDuration("2562047h")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, tt := range []struct {
		name     string
		decision *airlockv1.Decision
		reminded bool
		dueAt    time.Duration // after now; 0: not due within an hour
	}{
		{"a_record_without_timers_is_not_due", nil, false, 0},
		{"a_reminder_is_due_when_it_comes", &airlockv1.Decision{RemindAfter: durationpb.New(10 * time.Minute)}, false, 10 * time.Minute},
		{"a_record_whose_reminder_was_sent_is_not_due", &airlockv1.Decision{RemindAfter: durationpb.New(10 * time.Minute)}, true, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ix := newIndex(slog.Default(), func() uint64 { return 0 })
			put(t, ix, &airlockv1.ApprovalRecord{Call: &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Revision: 1},
				State: airlockv1.ApprovalState_APPROVAL_STATE_PENDING, Decision: tt.decision, Reminded: tt.reminded,
				CreatedAt: timestamppb.New(now), Deadline: timestamppb.New(now.Add(longest))})
			for _, at := range []time.Duration{0, time.Minute, 10 * time.Minute, time.Hour} {
				want := tt.dueAt != 0 && at >= tt.dueAt
				if got := len(ix.dueRecords(now.Add(at))) == 1; got != want {
					t.Fatalf("%v after its creation the record is due: %v, want %v", at, got, want)
				}
			}
		})
	}
	// The other bound: a deadline before 1678 (none a service writes) is due.
	ix := newIndex(slog.Default(), func() uint64 { return 0 })
	put(t, ix, &airlockv1.ApprovalRecord{Call: &airlockv1.ToolCall{AgentId: "bot", CallId: "c1", Revision: 1},
		State: airlockv1.ApprovalState_APPROVAL_STATE_PENDING, CreatedAt: timestamppb.New(now),
		Deadline: timestamppb.New(time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC))})
	if len(ix.dueRecords(now)) != 1 {
		t.Fatal("a record whose deadline was in 1600 is not due")
	}
}
