package audit

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/audit/record"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/canon"
	"github.com/airlock-gate/airlock/services/shared/subject"
)

// BenchmarkSeal seals built batches as the writer does, and measures the
// keyed hash alone over the same bytes: the least any chain under the key
// costs per row (docs/benchmarks.md, `bench audit`).
func BenchmarkSeal(b *testing.B) {
	msgs := benchMsgs(b)
	rows, release := buildRows(newBatchBufs(), msgs)
	defer release()
	key, _, _ := record.GenerateKey()
	perEvent := func(b *testing.B, cpu0 int64) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/event")
		b.ReportMetric(float64(processCPU().Nanoseconds()-cpu0)/float64(b.N*len(msgs)), "cpu-ns/event")
	}
	b.Run("sealer", func(b *testing.B) {
		s := key.Sealer()
		b.ReportAllocs()
		b.ResetTimer()
		cpu0 := processCPU().Nanoseconds()
		for i := 0; i < b.N; i++ {
			s.Chain(rows, record.GenesisHash)
		}
		perEvent(b, cpu0)
	})
	b.Run("HMAC-SHA256 of the row's bytes alone", func(b *testing.B) {
		canon := make([][]byte, len(rows))
		size := 0
		for i := range rows {
			canon[i] = record.AppendCanonicalFields([]byte(record.GenesisHash), &rows[i])
			size += len(canon[i])
		}
		mac := hmac.New(sha256.New, make([]byte, record.KeySize))
		sum := make([]byte, 0, sha256.Size)
		b.ResetTimer()
		cpu0 := processCPU().Nanoseconds()
		for i := 0; i < b.N; i++ {
			for _, c := range canon {
				mac.Reset()
				mac.Write(c)
				sum = mac.Sum(sum[:0])
			}
		}
		perEvent(b, cpu0)
		b.ReportMetric(float64(size)/float64(len(rows)), "bytes/row")
	})
}

// BenchmarkBuildSealKinds builds and seals one event per op, as the sink
// does (built into its batch's arena, sealed onto the chain), for each
// kind a call writes: the approve → execute flow `bench audit` publishes
// and an auto-allowed call's decision. ns/op and allocs/op are per event.
func BenchmarkBuildSealKinds(b *testing.B) {
	msgs := append(benchMsgs(b), allowedMsgs(b, 1000)...)
	byKind := map[string][]record.Msg{}
	var kinds []string
	for _, m := range msgs {
		_, _, kind, _ := subject.Tokens(m.Subject)
		if byKind[kind] == nil {
			kinds = append(kinds, kind)
		}
		byKind[kind] = append(byKind[kind], m)
	}
	key, _, err := record.GenerateKey()
	if err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, msgs []record.Msg) {
		var a record.Arena
		s := key.Sealer()
		rows := make([]record.Row, len(msgs))
		prev := record.GenesisHash
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			j := i % len(msgs)
			if j == 0 {
				clear(rows)
				a.Reset()
			}
			a.BuildInto(&rows[j], msgs[j])
			s.Seal(&rows[j], prev)
			prev = rows[j].Hash
		}
	}
	for _, kind := range kinds {
		b.Run(kind, func(b *testing.B) { run(b, byKind[kind]) })
	}
	b.Run("mix", func(b *testing.B) { run(b, msgs) })
}

// allowedMsgs are n encoded `allowed` events of auto-allowed calls, the
// decision an auto-allowed round trip writes.
func allowedMsgs(b *testing.B, n int) []record.Msg {
	var msgs []record.Msg
	for i := range n {
		call := fmt.Sprintf("auto-%d", i)
		args, _ := structpb.NewStruct(map[string]any{"text": fmt.Sprintf("hello %d", i)})
		tc := &airlockv1.ToolCall{CallId: call, AgentId: "bench", ThreadId: "th-bench", Server: "demo", Tool: "echo", Arguments: args, Revision: 1}
		digest, _ := canon.Digest(args)
		d := &airlockv1.Decision{Action: airlockv1.Action_ACTION_ALLOW, Reason: "reads are fine", RuleId: "allow-echo", Risk: airlockv1.Risk_RISK_LOW, PolicyRevision: "rev-1", DecisionId: "d-" + call, ArgumentsDigest: digest}
		ev := &airlockv1.Event{EventId: call + ".1", AgentId: "bench", CallId: call, Revision: 1, ThreadId: "th-bench",
			Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "policy"},
			Body:  &airlockv1.Event_Allowed{Allowed: &airlockv1.Allowed{Call: tc, Decision: d}}}
		m, err := bus.Encode(ev, "airlock/bench", "")
		if err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, record.Msg{Seq: uint64(i + 1), Time: time.Now(), Subject: m.Subject, Header: m.Header, Data: m.Data})
	}
	return msgs
}
