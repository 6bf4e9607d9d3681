package decide_test

import (
	"context"
	"slices"
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// Evaluate takes the compiled rules' decision without running topdown only
// for a policy whose decision is, by its structure, that decision whenever
// it is defined; any other policy is evaluated, and both ways decide alike.
func TestOnlyAPolicyPassingTheCompiledDecisionThroughSkipsTopdown(t *testing.T) {
	const passThrough = `package airlock

decision := d if {
	d := data.airlock_compiled_rules.decision
} else := {"action": "ask", "rule_id": "", "reason": "no rule"}
`
	tests := []struct {
		name    string
		modules map[string]string
		want    bool
		// wantRule is the rule id of bot's fs__read_file decision.
		wantRule string
	}{
		{"the shipped policy", mustDefault(t).Modules, true, "read-only"},
		{"passes it through", map[string]string{"a.rego": passThrough}, true, "r1"},
		{"changes it", map[string]string{"a.rego": `package airlock

decision := object.union(d, {"rule_id": "changed"}) if {
	d := data.airlock_compiled_rules.decision
} else := {"action": "ask", "rule_id": "", "reason": "no rule"}
`}, false, "changed"},
		{"adds a condition", map[string]string{"a.rego": `package airlock

decision := d if {
	d := data.airlock_compiled_rules.decision
	input.call.agent_id != "bot"
} else := {"action": "deny", "rule_id": "cond", "reason": "bot"}
`}, false, "cond"},
		{"reads it with another call", map[string]string{"a.rego": `package airlock

decision := d if {
	d := data.airlock_compiled_rules.decision with input.call.tool as "other"
} else := {"action": "deny", "rule_id": "with", "reason": "another call"}
`}, false, "with"},
		{"a second definition", map[string]string{"a.rego": passThrough, "b.rego": `package airlock

decision := {"action": "deny", "rule_id": "second", "reason": "x"} if input.call.agent_id == "x"
`}, false, "r1"},
		{"a default", map[string]string{"a.rego": passThrough + `
default decision := {"action": "deny", "rule_id": "default", "reason": "x"}
`}, false, "r1"},
		{"another rule for the compiled decision", map[string]string{"a.rego": passThrough, "b.rego": `package airlock_compiled_rules

decision := {"action": "deny", "rule_id": "mine", "reason": "x"} if input.call.agent_id == "x"
`}, false, "r1"},
	}
	data := map[string]any{"airlock": map[string]any{"rules": []any{
		map[string]any{"id": "r1", "priority": 1, "server": "fs", "tool": "read_file", "effect": "allow", "risk": "low"},
	}}}
	calls := []*airlockv1.ToolCall{
		call("fs", "read_file", map[string]any{"path": "/tmp/a"}),
		call("fs", "write_file", map[string]any{"path": "/tmp/a"}),
		{AgentId: "x", Server: "fs", Tool: "read_file"},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := data
			if tt.name == "the shipped policy" {
				d = mustDefault(t).Data
			}
			ev := evaluatorOf(t, tt.modules, d, nil, nil)
			if got := ev.CompiledDecidesForTest(); got != tt.want {
				t.Errorf("skips topdown: %v, want %v", got, tt.want)
			}
			for i, c := range calls {
				now := time.Now()
				got, err := ev.Evaluate(ctx, c, now)
				want, wantErr := ev.EvaluateInTopdownForTest(ctx, c, now)
				if got.Action != want.Action || got.RuleId != want.RuleId || got.Reason != want.Reason || got.Risk != want.Risk ||
					!slices.Equal(got.Redact, want.Redact) || (err == nil) != (wantErr == nil) {
					t.Errorf("%s/%s__%s: Evaluate gives %v %q (%q), topdown %v %q (%q)", c.AgentId, c.Server, c.Tool, got.Action, got.RuleId, got.Reason, want.Action, want.RuleId, want.Reason)
				}
				if i == 0 && got.RuleId != tt.wantRule {
					t.Errorf("bot's fs__read_file: rule %q, want %q", got.RuleId, tt.wantRule)
				}
			}
		})
	}
}
