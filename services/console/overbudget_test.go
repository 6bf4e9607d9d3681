package console

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/airlock-gate/airlock/services/shared/ingress"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// The notices kept stay bounded however often one call is heard and
// forgotten (a REST agent resubmitting the same call over its budget).
func TestHeardOverBudgetStaysBoundedWhenOneCallIsResubmitted(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	h := newHeardOverBudget(func() time.Time { return now })
	data, err := json.Marshal(ingress.NewOverBudget("agent-a", "call-1", 10, 1000, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	notice := &nats.Msg{Subject: subject.OverBudgetNotice("agent-a", "call-1"), Data: data}
	for range 3 * maxHeardOverBudget {
		h.hear(notice)
		if _, ok := h.get("agent-a", "call-1"); !ok {
			t.Fatal("the notice just heard is not kept")
		}
		h.forget("agent-a", "call-1")
	}
	if len(h.order) != 0 || len(h.calls) != 0 {
		t.Fatalf("after every notice was forgotten, %d keys in order and %d calls are kept; want none", len(h.order), len(h.calls))
	}
}
