package llama

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
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

// TestBenchDecodeChunked checks that both sides of the chunked reference
// generate every token asked for, with prompts longer than a decode and a
// cached prefix, and that a batch narrower than the sequences is refused.
func TestBenchDecodeChunked(t *testing.T) {
	o := testOptions(t)
	o.Batch = 16
	for _, tc := range []struct {
		name                            string
		parallel, prefix, prompt, fresh int
	}{
		{"one decode", 2, 0, 4, 3},
		{"chunked", 3, 0, 20, 4},
		{"chunked behind a prefix", 2, 23, 20, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := BenchDecodeChunked(context.Background(), o, tc.parallel, tc.prefix, tc.prompt, tc.fresh)
			if err != nil {
				t.Fatal(err)
			}
			want := int64(tc.parallel * tc.fresh)
			if r.RawTokens != want || r.BackendTokens != want {
				t.Errorf("got raw %d, backend %d tokens, want %d each", r.RawTokens, r.BackendTokens, want)
			}
		})
	}
	t.Run("batch narrower than parallel", func(t *testing.T) {
		o := o
		o.Batch = 2
		if _, err := BenchDecodeChunked(context.Background(), o, 3, 0, 4, 2); err == nil {
			t.Error("got no error, want one")
		}
	})
}

// TestDecodeTable: the table's fourth column is the ratio, which
// scripts/gpu-check.sh reads.
func TestDecodeTable(t *testing.T) {
	var b strings.Builder
	WriteDecodeHeader(&b)
	DecodeBench{Parallel: 8, BackendTokens: 1000, BackendTime: 2 * time.Second, RawTokens: 1000, RawTime: time.Second, BackendDecodeShare: 0.9}.WriteRow(&b)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines:\n%s", len(lines), b.String())
	}
	if row := strings.Fields(lines[1]); len(row) != 7 || row[0] != "8" || row[3] != "0.500" || row[6] != "0.900" {
		t.Errorf("row %q, want parallel 8, ratio 0.500 in the fourth column, decode share 0.900", lines[1])
	}
}
