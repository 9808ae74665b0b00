package train

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/llamacpp"
	"github.com/omar-selfplay/omar/model"
)

// TestReadQuantizedWeights quantizes a random matrix with ggml, stores it in
// a GGUF file (gguf.Writer.AddTensorBytes) beside F16 and BF16 copies, and
// reads each back through readF32: quantized types are dequantized by ggml
// to within the format's error, F16/BF16 converted by package gguf.
func TestReadQuantizedWeights(t *testing.T) {
	testLib(t)
	cpu, err := llamacpp.NewBackend(llamacpp.DeviceCPU, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Free()
	const ne0, rows = 256, 4 // K-quants have 256-element blocks
	r := rand.New(rand.NewPCG(1, 1))
	src := make([]float32, ne0*rows)
	for i := range src {
		src[i] = float32(r.NormFloat64())
	}
	tests := []struct {
		typ gguf.TensorType
		tol float64
	}{
		{gguf.Q8_0, 0.03},
		{gguf.Q4_0, 0.35},
		{gguf.Q4_K, 0.35},
		{gguf.F16, 2e-3},
		{gguf.BF16, 2e-2},
	}
	w := gguf.NewWriter()
	for _, tt := range tests {
		var raw []byte
		switch tt.typ {
		case gguf.F16:
			for _, v := range src {
				raw = binary.LittleEndian.AppendUint16(raw, gguf.Float32ToFloat16(v))
			}
		case gguf.BF16:
			for _, v := range src {
				raw = binary.LittleEndian.AppendUint16(raw, gguf.Float32ToBFloat16(v))
			}
		default:
			if raw, err = llamacpp.Quantize(llamacpp.Type(tt.typ), src, ne0); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.AddTensorBytes("w."+tt.typ.String(), []uint64{ne0, rows}, tt.typ, raw); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "w.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, tt := range tests {
		t.Run(tt.typ.String(), func(t *testing.T) {
			info, ok := f.Tensor("w." + tt.typ.String())
			if !ok {
				t.Fatal("tensor missing from the file")
			}
			got, err := readF32(f, info, nil, cpu)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(src) {
				t.Fatalf("got %d values, want %d", len(got), len(src))
			}
			var worst float64
			for i := range src {
				worst = math.Max(worst, math.Abs(float64(got[i]-src[i])))
			}
			if worst > tt.tol || worst == 0 {
				t.Errorf("max |read − original| = %g, want in (0, %g]", worst, tt.tol)
			}
		})
	}
	t.Run("bytes disagree with ggml", func(t *testing.T) {
		info, _ := f.Tensor("w.Q8_0")
		raw, err := f.TensorBytes(info.Name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dequantize(cpu, info, raw[:len(raw)-34]); err == nil || !strings.Contains(err.Error(), "ggml rows") {
			t.Errorf("got %v, want an error about the row size", err)
		}
	})
}

// TestTypeTablesAgree: package gguf sizes tensors from its own table of
// ggml block formats; it must agree with ggml's for every type both know,
// or readF32 would hand ggml the wrong number of bytes.
func TestTypeTablesAgree(t *testing.T) {
	testLib(t)
	const n = 512 // a multiple of every block size (1, 32, 64, 128, 256)
	known := 0
	for typ := range gguf.TensorType(llamacpp.TypeCount) {
		if !typ.Known() {
			continue
		}
		known++
		want, err := llamacpp.RowSize(llamacpp.Type(typ), n)
		if err != nil {
			t.Errorf("%v: gguf knows it, ggml: %v", typ, err)
			continue
		}
		got, err := typ.RowBytes(n)
		if err != nil || got != uint64(want) {
			t.Errorf("%v: gguf row of %d is %d bytes (%v), ggml's is %d", typ, n, got, err, want)
		}
		if name := llamacpp.TypeName(llamacpp.Type(typ)); !strings.EqualFold(name, typ.String()) {
			t.Errorf("type %d: gguf calls it %s, ggml %s", uint32(typ), typ, name)
		}
	}
	if known < 30 {
		t.Errorf("checked %d types, want the ~35 gguf knows", known)
	}
}

// TestF16Model loads the same generated model stored with F16 matrices:
// the trainer's logprobs stay within F16 rounding of the F32 model's.
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
		_, lps[i], _, err = columns(tr.Evaluate(t.Context(), seqs))
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
