package bench

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/spf13/cobra"

	"github.com/airlock-gate/airlock/services/policy/policybench"
	"github.com/airlock-gate/airlock/services/shared/config"
)

// TestEveryBenchExitsOneWhenAGoalIsMissed: each bench report names the
// goals it missed, and benchRun (the body of every bench command) turns a
// missed goal into exit status 1 after printing the figures.
func TestEveryBenchExitsOneWhenAGoalIsMissed(t *testing.T) {
	roundtrip := func(p50, p99, cpu bool) *roundtripReport {
		r := &roundtripReport{}
		r.Goals.P50Met, r.Goals.P99Met, r.Goals.CPUMet = p50, p99, cpu
		return r
	}
	for _, tc := range []struct {
		name     string
		report   any
		wantExit int // 0 or 1
	}{
		{"roundtrip_meeting_every_goal_exits_0", roundtrip(true, true, true), 0},
		{"roundtrip_missing_p99_exits_1", roundtrip(true, false, true), 1},
		{"roundtrip_missing_cpu_exits_1", roundtrip(true, true, false), 1},
		{"gateway_meeting_its_goal_exits_0", &gatewayReport{GoalMet: true}, 0},
		{"gateway_missing_its_goal_exits_1", &gatewayReport{GoalMet: false, Ratio: 2, GoalMax: 1.3}, 1},
		{"audit_meeting_its_goal_exits_0", auditBenchResult{MeetsGoal: true, ChainVerified: true}, 0},
		{"audit_missing_its_ratio_exits_1", auditBenchResult{MeetsGoal: false, ChainVerified: true}, 1},
		{"audit_whose_chain_does_not_verify_exits_1", auditBenchResult{MeetsGoal: true, ChainVerified: false}, 1},
		{"policy_meeting_both_goals_exits_0", &policybench.Result{MeetsP50: true, MeetsP99: true}, 0},
		{"policy_missing_p50_exits_1", &policybench.Result{MeetsP50: false, MeetsP99: true}, 1},
		{"fanout_meeting_its_goal_exits_0", &fanoutReport{GoalMet: true}, 0},
		{"fanout_missing_its_goal_exits_1", &fanoutReport{GoalMet: false, Ratio: 2, GoalMax: 1.2}, 1},
		{"pending_meeting_every_goal_exits_0", &pendingReport{Figures: []pendingFigure{{Name: "inbox", Met: true}}}, 0},
		{"pending_missing_one_ratio_exits_1", &pendingReport{Figures: []pendingFigure{{Name: "inbox", Met: true}, {Name: "feed", Ratio: 3, Met: false}}}, 1},
		{"floor_has_no_goal_and_exits_0", &messagingFloor{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := &cobra.Command{Use: "bench-under-test"}
			cmd.SetContext(context.Background())
			printed := false
			err := benchRun(cmd, Env{Load: func() (config.Config, error) { return config.Default(), nil }}, "", false, func(context.Context, config.Config) (any, error) { return tc.report, nil },
				func(io.Writer, any) { printed = true })
			if !printed {
				t.Fatal("the figures were not printed")
			}
			switch {
			case tc.wantExit == 0 && err != nil:
				t.Fatalf("want success, got %v", err)
			case tc.wantExit == 1 && !errors.Is(err, ErrGoalMissed):
				t.Fatalf("want exit status 1, got %v", err)
			}
		})
	}
}
