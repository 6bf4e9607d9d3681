package audit

import (
	"testing"

	"github.com/airlock-gate/airlock/services/audit/record"
)

// BenchmarkSeal seals built batches as the writer does.
func BenchmarkSeal(b *testing.B) {
	msgs := benchMsgs(b)
	rows, release := buildAll(msgs)
	defer release()
	key, _, _ := record.GenerateKey()
	s := key.Sealer()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		s.Chain(rows, record.GenesisHash)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/event")
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N*len(msgs)), "cpu-ns/event")
}
