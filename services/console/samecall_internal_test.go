package console

import (
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	airlock "github.com/airlock-gate/airlock/sdk"
)

// A REST submit under a used call id is refused with 409 when the policy
// would refuse it as another call (services/policy sameRequest) and let
// through when it is the same call sent again: helper-183 found another
// reason, thread, idempotency key or person let through with 202, where
// the policy refused it without a word and the wait answered the recorded
// call's outcome.
func TestACallUnderAUsedIDDiffersAsThePolicyJudgesIt(t *testing.T) {
	args, _ := structpb.NewStruct(map[string]any{"path": "a.txt", "n": 1})
	rec := &airlockv1.ToolCall{Server: "demo", Tool: "write_file", Arguments: args, ThreadId: "t", Reason: "save", IdempotencyKey: "k", OnBehalfOf: "alice"}
	same := airlock.Call{Tool: "demo__write_file", Args: map[string]any{"path": "a.txt", "n": 1.0}, Thread: "t", Reason: "save", IdempotencyKey: "k", OnBehalfOf: "alice"}
	for _, tc := range []struct {
		name  string
		edit  func(*airlock.Call)
		bound bool
		want  string
	}{
		{"the_same_call_sent_again", func(*airlock.Call) {}, false, ""},
		{"server_and_tool_given_apart", func(c *airlock.Call) { c.Server, c.Tool = "demo", "write_file" }, false, ""},
		{"another_tool", func(c *airlock.Call) { c.Tool = "demo__echo" }, false, "tool"},
		{"other_arguments", func(c *airlock.Call) { c.Args = map[string]any{"path": "b.txt", "n": 1} }, false, "arguments"},
		{"run_by_the_agent", func(c *airlock.Call) { c.AgentRuns = true }, false, "agent_runs"},
		{"another_thread", func(c *airlock.Call) { c.Thread = "u" }, false, "thread_id"},
		{"another_reason", func(c *airlock.Call) { c.Reason = "other" }, false, "reason"},
		{"another_idempotency_key", func(c *airlock.Call) { c.IdempotencyKey = "j" }, false, "idempotency_key"},
		{"another_persons_token", func(c *airlock.Call) { c.OnBehalfOf = "bob" }, false, "person it acts for (the agent token's)"},
		{"another_persons_token_where_the_policy_binds_the_person", func(c *airlock.Call) { c.OnBehalfOf = "bob" }, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := same
			tc.edit(&c)
			if got := callDiffers(rec, c, tc.bound); got != tc.want {
				t.Fatalf("callDiffers = %q, want %q", got, tc.want)
			}
		})
	}
}
