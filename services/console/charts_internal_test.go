package console

import "testing"

func TestChartAxesUseRoundSteps(t *testing.T) {
	tests := []struct {
		name   string
		x, out float64
	}{
		{"a_step_of_one_and_a_half_rounds_up_to_two", 1.5, 2},
		{"a_step_of_three_rounds_up_to_five", 3, 5},
		{"a_step_of_seven_rounds_up_to_ten", 7, 10},
		{"a_round_step_stays", 20, 20},
		{"a_fraction_of_a_second_rounds_to_a_fraction", 0.26, 0.5},
		{"nothing_to_show_still_has_a_step", 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := niceStep(tt.x); got != tt.out {
				t.Errorf("niceStep(%v) = %v, want %v", tt.x, got, tt.out)
			}
		})
	}
}
