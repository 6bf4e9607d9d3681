package approval

import (
	"log/slog"
	"strings"
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

// The index hands out pages in list order (newest first, then by key)
// whatever order records arrive in, a page continues exactly where the
// previous one ended, an agent's pages hold only its records, and a record
// removed from the index leaves its pages.
func TestIndexPagesInListOrder(t *testing.T) {
	ix := newIndex(slog.Default(), func() uint64 { return 0 })
	base := time.Now()
	var want []string // list order: newest first, equal times by key
	// Arrival order differs from list order; c3 and c4 share a time.
	for _, r := range []struct {
		agent, call string
		at          int
	}{{"a", "c1", 1}, {"b", "c5", 5}, {"a", "c4", 3}, {"b", "c3", 3}, {"a", "c2", 2}, {"a", "c6", 6}} {
		rec := &airlockv1.ApprovalRecord{Call: &airlockv1.ToolCall{AgentId: r.agent, CallId: r.call, Revision: 1},
			State: airlockv1.ApprovalState_APPROVAL_STATE_PENDING, CreatedAt: timestamppb.New(base.Add(time.Duration(r.at) * time.Second))}
		key := r.agent + "." + r.call + ".1"
		ix.recs[key] = rec
		ix.order(key, rec)
	}
	want = []string{"a.c6.1", "b.c5.1", "a.c4.1", "b.c3.1", "a.c2.1", "a.c1.1"}
	keys := func(recs []*airlockv1.ApprovalRecord) []string {
		var out []string
		for _, r := range recs {
			out = append(out, r.GetCall().GetAgentId()+"."+r.GetCall().GetCallId()+".1")
		}
		return out
	}
	all := func(*airlockv1.ApprovalRecord) bool { return true }
	tests := []struct {
		name  string
		agent string
		limit int
		want  []string
	}{
		{"everything_in_list_order", "", 0, want},
		{"pages_of_two_continue_where_the_last_ended", "", 2, want},
		{"an_agents_pages_hold_only_its_records", "a", 2, []string{"a.c6.1", "a.c4.1", "a.c2.1", "a.c1.1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			var after *pagePos
			for range 10 {
				page := ix.page(tt.agent, after, tt.limit, all)
				if len(page) == 0 {
					break
				}
				got = append(got, keys(page)...)
				last := page[len(page)-1]
				pos := orderOf(keys(page[len(page)-1:])[0], last)
				after = &pos
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Fatalf("pages %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("a_removed_record_leaves_its_pages", func(t *testing.T) {
		ix.unorder("b.c3.1", ix.recs["b.c3.1"])
		delete(ix.recs, "b.c3.1")
		if got := strings.Join(keys(ix.page("", nil, 0, all)), " "); got != "a.c6.1 b.c5.1 a.c4.1 a.c2.1 a.c1.1" {
			t.Fatalf("after removing b.c3.1: %s", got)
		}
		if got := keys(ix.page("b", nil, 0, all)); len(got) != 1 || got[0] != "b.c5.1" {
			t.Fatalf("agent b after removing b.c3.1: %v", got)
		}
	})
}
