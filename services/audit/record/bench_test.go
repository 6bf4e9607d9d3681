package record_test

import (
	"testing"
	"time"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/audit/record"
)

func BenchmarkBuildAndSeal(b *testing.B) {
	t := &testing.T{}
	tc := &airlockv1.ToolCall{CallId: "c1", AgentId: "bot", Server: "fs", Tool: "write_file", Revision: 1,
		Arguments: args(t, map[string]any{"path": "/srv/app/config-1.yaml", "content": "key: value\nother: 42\n", "token": "t0ps3cret"})}
	ev := &airlockv1.Event{EventId: "e1", AgentId: "bot", CallId: "c1", Revision: 1, Body: &airlockv1.Event_ApprovalRequested{ApprovalRequested: &airlockv1.ApprovalRequested{Call: tc,
		Decision: &airlockv1.Decision{Action: airlockv1.Action_ACTION_ASK, Redact: []string{"/token"}, RuleId: "r", PolicyRevision: "p"}}}}
	m := msg(t, 1, ev)
	m.Time = time.Now()
	key, _, err := record.GenerateKey()
	if err != nil {
		b.Fatal(err)
	}
	sealer := key.Sealer()
	b.ReportAllocs()
	prev := record.GenesisHash
	for i := 0; i < b.N; i++ {
		r := record.Build(m)
		sealer.Seal(&r, prev)
		prev = r.Hash
	}
}
