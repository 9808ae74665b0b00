package train

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/omar-selfplay/omar/llamacpp"
)

// TestReadQuantizedWeights quantizes a random matrix with ggml, stores it in
// a file and reads it back through readF32, which must dequantize it to
// within the format's error.
func TestReadQuantizedWeights(t *testing.T) {
	testLib(t)
	cpu, err := llamacpp.NewBackend(llamacpp.DeviceCPU, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Free()
	const ne0, rows = 64, 12
	r := rand.New(rand.NewPCG(1, 1))
	src := make([]float32, ne0*rows)
	for i := range src {
		src[i] = float32(r.NormFloat64())
	}
	tests := []struct {
		typ llamacpp.Type
		tol float64
	}{
		{8, 0.03}, // Q8_0
		{2, 0.35}, // Q4_0
	}
	for _, tt := range tests {
		t.Run(llamacpp.TypeName(tt.typ), func(t *testing.T) {
			raw, err := llamacpp.Quantize(tt.typ, src, ne0)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "w.bin")
			if err := os.WriteFile(path, append([]byte("pad!"), raw...), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			info := llamacpp.GGUFTensorInfo{Name: "w", Type: tt.typ, Ne: [4]int64{ne0, rows, 1, 1}, Offset: 4, Size: int64(len(raw))}
			got, err := readF32(f, info, cpu)
			if err != nil {
				t.Fatal(err)
			}
			var worst float64
			for i := range src {
				worst = math.Max(worst, math.Abs(float64(got[i]-src[i])))
			}
			if worst > tt.tol || worst == 0 {
				t.Errorf("max |dequantized − original| = %g, want in (0, %g]", worst, tt.tol)
			}
		})
	}
	t.Run("bad size", func(t *testing.T) {
		f, _ := os.Open(os.DevNull)
		defer f.Close()
		info := llamacpp.GGUFTensorInfo{Name: "w", Type: 8, Ne: [4]int64{ne0, rows, 1, 1}, Size: 10}
		if _, err := readF32(f, info, cpu); err == nil {
			t.Error("got no error for a truncated tensor")
		}
	})
}
