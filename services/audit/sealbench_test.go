package audit

import (
	"crypto/hmac"
	"crypto/sha256"
	"testing"

	"github.com/airlock-gate/airlock/services/audit/record"
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
