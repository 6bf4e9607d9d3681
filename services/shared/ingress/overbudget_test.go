package ingress_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/ingress"
)

// A notice ends a wait only when it is about the revision waited for (a
// wait that names none: the agent's newest request) and that revision is
// not recorded; a notice from before notices named a revision reads as 1.
func TestAnOverBudgetNoticeAnswersTheWaitForItsRevision(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		notice, want, recorded uint32
		answers                bool
	}{
		{"a_new_call", 1, 1, 0, true},
		{"a_new_call_waited_for_without_a_revision", 1, 0, 0, true},
		{"revision_2_while_revision_1_is_waited_for", 2, 1, 1, false},
		{"revision_2_waited_for", 2, 2, 1, true},
		{"revision_2_newest_asked_without_a_revision", 2, 0, 1, true},
		{"a_repeat_of_a_recorded_revision", 1, 1, 1, false},
		{"a_repeat_waited_for_without_a_revision", 1, 0, 1, false},
		{"revision_1_while_revision_2_is_waited_for", 1, 2, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := ingress.NewOverBudget("bot", "c1", tc.notice, 1, 1000, time.Second)
			if got := n.Answers(tc.want, tc.recorded); got != tc.answers {
				t.Fatalf("notice about revision %d, wait for %d, %d recorded: answers %v, want %v", tc.notice, tc.want, tc.recorded, got, tc.answers)
			}
		})
	}
	t.Run("a_notice_naming_no_revision", func(t *testing.T) {
		data, _ := json.Marshal(map[string]any{"agent_id": "bot", "call_id": "c1", "reason": "over", "retry_after_seconds": 3})
		n, err := ingress.DecodeOverBudget(data, "bot", "c1")
		if err != nil || n.Revision != 1 {
			t.Fatalf("%+v %v; want revision 1", n, err)
		}
	})
}
