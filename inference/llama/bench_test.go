package llama

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkDecode reports the backend's and the raw loop's generation rate
// on the tiny model (see docs/performance.md for the CLI version).
func BenchmarkDecode(b *testing.B) {
	for _, p := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("parallel=%d", p), func(b *testing.B) {
			o := testOptions(b)
			o.Threads, o.ThreadsBatch = 1, 1
			var last DecodeBench
			for b.Loop() {
				r, err := BenchDecode(context.Background(), o, p, 16, 128)
				if err != nil {
					b.Fatal(err)
				}
				last = r
			}
			b.ReportMetric(last.BackendRate(), "backend-tok/s")
			b.ReportMetric(last.RawRate(), "raw-tok/s")
			b.ReportMetric(last.Ratio(), "ratio")
		})
	}
}
