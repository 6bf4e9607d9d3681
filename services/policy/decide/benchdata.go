package decide

import (
	"fmt"

	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
)

// BenchRules returns n run-time rules shaped like a real deployment's: 70% exact
// server/tool rules, 20% tool-name globs, 10% argument-glob rules. None
// matches BenchCall, so every one of them is checked before the default
// rules decide: the slowest path through the rules.
func BenchRules(n int) []*airlockv1.PolicyRule {
	effects := []string{"allow", "ask", "deny"}
	out := make([]*airlockv1.PolicyRule, 0, n)
	for i := 0; i < n; i++ {
		r := &airlockv1.PolicyRule{Id: fmt.Sprintf("bench-%03d", i), Priority: int32(20 + i), Effect: effects[i%3], Risk: "medium"}
		switch {
		case i%10 < 7:
			r.Server, r.Tool = fmt.Sprintf("srv%d", i), fmt.Sprintf("tool_%d", i)
		case i%10 < 9:
			r.ToolPattern = fmt.Sprintf("op%d_*", i)
		default:
			r.Server, r.Tool = "fs", fmt.Sprintf("tool_%d", i)
			r.Args = map[string]string{"/path": fmt.Sprintf("/data/%d/**", i)}
		}
		out = append(out, r)
	}
	return out
}

// BenchCall is the call every measurement decides: a read the default
// rules allow after all the run-time rules were checked.
func BenchCall() *airlockv1.ToolCall {
	args, _ := structpb.NewStruct(map[string]any{"path": "/home/me/notes.txt", "encoding": "utf-8"})
	return &airlockv1.ToolCall{
		CallId: "bench-1", AgentId: "bench", ThreadId: "t1", Revision: 1,
		Server: "fs", Tool: "read_file", Arguments: args, Reason: "look up my notes",
	}
}

// BenchCallSeveralRules is a call more than one rule matches: demo__echo
// (rules demo-echo and read-only of the default policy), the call
// `airlock bench roundtrip` makes.
func BenchCallSeveralRules() *airlockv1.ToolCall {
	args, _ := structpb.NewStruct(map[string]any{"text": "hello from the bench"})
	return &airlockv1.ToolCall{
		CallId: "bench-2", AgentId: "bench", ThreadId: "t1", Revision: 1,
		Server: "demo", Tool: "echo", Arguments: args, Reason: "say hello",
	}
}
