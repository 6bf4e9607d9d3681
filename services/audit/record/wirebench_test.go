package record

import (
	"testing"

	"google.golang.org/protobuf/proto"
)

// BenchmarkBuildWireVsGeneric compares the two paths on the same events.
func BenchmarkBuildWireVsGeneric(b *testing.B) {
	t := &testing.T{}
	var msgs []Msg
	for _, ev := range wireCorpus(t)[:9] {
		data, _ := proto.Marshal(ev)
		msgs = append(msgs, Msg{Seq: 1, Subject: "airlock.evt.a.c.requested", Data: data})
	}
	b.Run("wire", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_ = Build(msgs[i%len(msgs)])
		}
	})
	b.Run("generic", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			m := msgs[i%len(msgs)]
			_ = buildGeneric(Row{Seq: m.Seq}, m)
		}
	})
}
