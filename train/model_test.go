package train

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/llamacpp"
	"github.com/omar-selfplay/omar/model"
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

// TestF16Model loads the same generated model stored with F16 matrices: the
// trainer converts them to F32, so its logprobs stay within F16 rounding of
// the F32 model's.
func TestF16Model(t *testing.T) {
	p32 := tinyModel(t, "qwen2")
	p16 := filepath.Join(t.TempDir(), "qwen2-f16.gguf")
	if err := model.WriteFile(p16, model.Options{Arch: "qwen2", Preset: "tiny", Seed: 7, Type: gguf.F16}); err != nil {
		t.Fatal(err)
	}
	seqs := randomSeqs(61, 2, 20, 40, 512)
	var lps [2][][]float32
	for i, p := range []string{p32, p16} {
		tr, err := New(p, testOptions())
		if err != nil {
			t.Fatal(err)
		}
		_, lps[i], _, err = tr.Evaluate(t.Context(), seqs)
		tr.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range seqs {
		d := maskedDiff(t, lps[1][i], lps[0][i], seqs[i].Mask)
		if d > 0.05 || d == 0 {
			t.Errorf("seq %d: F16 model's logprobs differ from F32 by %g, want in (0, 0.05]", i, d)
		}
	}
}
