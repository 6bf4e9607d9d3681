package audit

import (
	"fmt"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	airlockv1 "github.com/airlock-gate/airlock/proto/airlock/v1"
	"github.com/airlock-gate/airlock/services/audit/record"
	"github.com/airlock-gate/airlock/services/shared/bus"
	"github.com/airlock-gate/airlock/services/shared/canon"
)

// BenchmarkBuildAll builds batches of approval flows as the sink does; its
// B/op is what the sink allocates per batch (the arenas are used again).
func BenchmarkBuildAll(b *testing.B) {
	msgs := benchMsgs(b)
	b.Run("sink", func(b *testing.B) {
		b.ReportAllocs()
		cpu0 := processCPU()
		bufs := newBatchBufs()
		for i := 0; i < b.N; i++ {
			_, release := buildRows(bufs, msgs)
			release()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/event")
		b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N*len(msgs)), "cpu-ns/event")
	})
	b.Run("one goroutine, arena", func(b *testing.B) {
		b.ReportAllocs()
		cpu0 := processCPU()
		var a record.Arena
		for i := 0; i < b.N; i++ {
			for _, m := range msgs {
				_ = a.Build(m)
			}
			a.Reset()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/event")
		b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N*len(msgs)), "cpu-ns/event")
	})
	b.Run("one goroutine, no arena", func(b *testing.B) {
		b.ReportAllocs()
		cpu0 := processCPU()
		for i := 0; i < b.N; i++ {
			for _, m := range msgs {
				_ = record.Build(m)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/event")
		b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N*len(msgs)), "cpu-ns/event")
	})
}

// buildRows builds msgs as the sink's fetcher does, into a buffer of bufs.
func buildRows(bufs *batchBufs, msgs []record.Msg) ([]record.Row, func()) {
	b := newRowBatch(bufs, len(msgs), slog.New(slog.DiscardHandler))
	for _, m := range msgs {
		b.add(m)
	}
	return b.rows()
}

// benchMsgs are 10,000 encoded events of approve → execute flows, the same
// mix `airlock bench audit` publishes (services/airlock/internal/bench).
func benchMsgs(b *testing.B) []record.Msg {
	var msgs []record.Msg
	for i := 0; len(msgs) < 10000; i++ {
		call := fmt.Sprintf("bench-%d", i)
		args, _ := structpb.NewStruct(map[string]any{"path": fmt.Sprintf("/srv/app/config-%d.yaml", i), "content": "key: value\nother: 42\n", "token": "t0ps3cret"})
		tc := &airlockv1.ToolCall{CallId: call, AgentId: "bench", ThreadId: "th-bench", Server: "fs", Tool: "write_file", Arguments: args, Revision: 1}
		digest, _ := canon.Digest(args)
		d := &airlockv1.Decision{Action: airlockv1.Action_ACTION_ASK, Reason: "writes need a person", RuleId: "ask-writes", Risk: airlockv1.Risk_RISK_MEDIUM, Redact: []string{"/token"}, PolicyRevision: "rev-1", DecisionId: "d-" + call, ArgumentsDigest: digest}
		actor := &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_SERVICE, Id: "bench"}
		for j, ev := range []*airlockv1.Event{
			{Body: &airlockv1.Event_Requested{Requested: &airlockv1.Requested{Call: tc}}},
			{Body: &airlockv1.Event_ApprovalRequested{ApprovalRequested: &airlockv1.ApprovalRequested{Call: tc, Decision: d}}},
			{Body: &airlockv1.Event_Notified{Notified: &airlockv1.Notified{Channel: "console", Kind: "announce"}}},
			{Body: &airlockv1.Event_Approved{Approved: &airlockv1.Approved{Call: tc, Decision: d, ArgumentsDigest: digest}}, Actor: &airlockv1.Actor{Type: airlockv1.ActorType_ACTOR_TYPE_HUMAN, Id: "alice"}},
			{Body: &airlockv1.Event_Started{Started: &airlockv1.Started{ExecutorId: "ex", Attempt: 1}}},
			{Body: &airlockv1.Event_Completed{Completed: &airlockv1.Completed{ResultJson: `{"ok":true}`, Latency: durationpb.New(3 * time.Millisecond), Attempt: 1}}},
		} {
			ev.EventId, ev.AgentId, ev.CallId, ev.Revision, ev.ThreadId = fmt.Sprintf("%s.%d", call, j), "bench", call, 1, "th-bench"
			if ev.Actor == nil {
				ev.Actor = actor
			}
			m, err := bus.Encode(ev, "airlock/bench", "")
			if err != nil {
				b.Fatal(err)
			}
			msgs = append(msgs, record.Msg{Seq: uint64(len(msgs) + 1), Time: time.Now(), Subject: m.Subject, Header: m.Header, Data: m.Data})
		}
	}
	return msgs
}

// processCPU is the CPU time (user + system, every thread) this process
// has spent: steadier than wall time on a busy machine.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
