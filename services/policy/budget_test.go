package policy

import (
	"testing"
	"time"

	"github.com/airlock-gate/airlock/services/shared/config"
)

// TestAgentBudget: each agent has a minute's calls and request bytes,
// refilled continuously; over it, as many requests as the call budget are
// refused in a minute and the rest dropped, the first drop flagged for the
// log; other agents are untouched.
func TestAgentBudget(t *testing.T) {
	type step struct {
		agent     string
		size      int
		at        time.Duration // since the start
		want      budgetVerdict
		firstDrop bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"within_the_call_budget", []step{
			{"bot", 10, 0, withinBudget, false}, {"bot", 10, 0, withinBudget, false}, {"bot", 10, 0, withinBudget, false}}},
		{"over_the_call_budget_refused_then_dropped", []step{
			{"bot", 10, 0, withinBudget, false}, {"bot", 10, 0, withinBudget, false}, {"bot", 10, 0, withinBudget, false},
			{"bot", 10, 0, overBudget, false}, {"bot", 10, 0, overBudget, false}, {"bot", 10, 0, overBudget, false},
			{"bot", 10, 0, dropped, true}, {"bot", 10, 0, dropped, false}}},
		// A request is charged twice (storedCopies): the stream stores it
		// with its decision.
		{"over_the_byte_budget", []step{
			{"bot", 300, 0, withinBudget, false}, {"bot", 300, 0, overBudget, false}, {"bot", 200, 0, withinBudget, false}}},
		{"a_request_as_large_as_the_budget_fits_a_full_one", []step{
			{"bot", 1000, 0, withinBudget, false}, {"bot", 1, 0, overBudget, false}}},
		{"another_agent_is_untouched", []step{
			{"bot", 1000, 0, withinBudget, false}, {"bot", 10, 0, overBudget, false}, {"victim", 1000, 0, withinBudget, false}}},
		{"refilled_over_time", []step{
			{"bot", 500, 0, withinBudget, false}, {"bot", 250, 0, overBudget, false},
			{"bot", 250, 30 * time.Second, withinBudget, false}, {"bot", 10, 30 * time.Second, overBudget, false}}},
		{"refusals_start_again_the_next_minute", []step{
			{"bot", 1000, 0, withinBudget, false},
			{"bot", 1000, 0, overBudget, false}, {"bot", 1000, 0, overBudget, false}, {"bot", 1000, 0, overBudget, false},
			{"bot", 1000, 0, dropped, true},
			{"bot", 1000, time.Minute, withinBudget, false}, {"bot", 1000, time.Minute, overBudget, false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newAgentBudgets(config.Limits{AgentCallsPerMinute: 3, AgentRequestBytesPerMinute: 1000}, 100)
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for i, s := range tt.steps {
				a := b.take(s.agent, s.size, start.Add(s.at))
				got, firstDrop := a.verdict, a.firstDrop
				if got != s.want || firstDrop != s.firstDrop {
					t.Fatalf("step %d (%s, %d bytes at %v): verdict %d first drop %v, want %d %v", i, s.agent, s.size, s.at, got, firstDrop, s.want, s.firstDrop)
				}
			}
		})
	}
}

// BenchmarkAgentBudgetTake is the budget's cost on every request's path
// (one agent, within budget): compare it with a call's CPU in `airlock
// bench roundtrip`.
func BenchmarkAgentBudgetTake(b *testing.B) {
	l := config.Default().Limits
	l.AgentCallsPerMinute, l.AgentRequestBytesPerMinute = 1<<40, 1<<50
	budgets := newAgentBudgets(l, 1000)
	now := time.Now()
	for i := 0; b.Loop(); i++ {
		budgets.take("bench", 700, now.Add(time.Duration(i)*time.Microsecond))
	}
}

// TestOverBudgetNotices: every request over budget, refused or dropped, is
// answered with a notice while the agent's notice budget lasts, saying
// when its budget holds the request again; past the notice budget it is
// not, until that refills; another agent has notices of its own.
func TestOverBudgetNotices(t *testing.T) {
	type step struct {
		agent      string
		at         time.Duration // since the start
		want       budgetVerdict
		notify     bool
		retryAfter time.Duration
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"within_budget_is_not_noticed", []step{{"bot", 0, withinBudget, false, 0}}},
		{"refused_and_dropped_are_noticed_until_the_notice_budget_is_spent", []step{
			{"bot", 0, withinBudget, false, 0}, {"bot", 0, withinBudget, false, 0},
			{"bot", 0, overBudget, true, 30 * time.Second}, {"bot", 0, overBudget, true, 30 * time.Second},
			{"bot", 0, dropped, true, 30 * time.Second}, {"bot", 0, dropped, false, 30 * time.Second},
			{"victim", 0, withinBudget, false, 0}}},
		{"the_notice_budget_refills", []step{
			{"bot", 0, withinBudget, false, 0}, {"bot", 0, withinBudget, false, 0},
			{"bot", 0, overBudget, true, 30 * time.Second}, {"bot", 0, overBudget, true, 30 * time.Second},
			{"bot", 0, dropped, true, 30 * time.Second}, {"bot", 0, dropped, false, 30 * time.Second},
			{"bot", 20 * time.Second, dropped, true, 10 * time.Second}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newAgentBudgets(config.Limits{AgentCallsPerMinute: 2, AgentRequestBytesPerMinute: 1000}, 3)
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for i, s := range tt.steps {
				a := b.take(s.agent, 10, start.Add(s.at))
				if a.verdict != s.want || a.notify != s.notify || a.retryAfter != s.retryAfter {
					t.Fatalf("step %d (%s at %v): verdict %d notify %v retry after %v, want %d %v %v", i, s.agent, s.at, a.verdict, a.notify, a.retryAfter, s.want, s.notify, s.retryAfter)
				}
			}
		})
	}
}
