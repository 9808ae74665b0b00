package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// finiteFile writes a GGUF whose tensor "bad" has value v at element at.
func finiteFile(t testing.TB, typ TensorType, n int, at int, v float32) string {
	t.Helper()
	w := NewWriter()
	if err := w.Set("general.architecture", "llama"); err != nil {
		t.Fatal(err)
	}
	good := make([]float32, 64)
	if err := w.AddTensor("good", []uint64{64}, F32, good); err != nil {
		t.Fatal(err)
	}
	switch typ {
	case F32, F16:
		data := make([]float32, n)
		for i := range data {
			data[i] = float32(i%7) - 3
		}
		if at >= 0 {
			data[at] = v
		}
		if err := w.AddTensor("bad", []uint64{uint64(n)}, typ, data); err != nil {
			t.Fatal(err)
		}
	case Q8_0:
		// n/32 blocks of an f16 scale and 32 int8 quanta.
		data := make([]byte, n/32*34)
		for k := 0; k < n/32; k++ {
			binary.LittleEndian.PutUint16(data[k*34:], Float32ToFloat16(0.5))
		}
		if at >= 0 {
			binary.LittleEndian.PutUint16(data[at/32*34:], Float32ToFloat16(v))
		}
		if err := w.AddTensorBytes("bad", []uint64{uint64(n)}, Q8_0, data); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCheckFinite: a NaN or an infinity anywhere in a checked tensor is
// refused with the tensor's name and the element; finite files pass.
func TestCheckFinite(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, tc := range []struct {
		typ      TensorType
		n, at    int
		v        float32
		wantElem int // -1: no error
	}{
		{F32, 1000, -1, 0, -1},
		{F32, 1000, 0, nan, 0},
		{F32, 3 << 20, 3<<20 - 1, inf, 3<<20 - 1}, // past the first read chunk
		{F32, 1000, 500, float32(math.Inf(-1)), 500},
		{F32, 1000, 10, math.MaxFloat32, -1}, // large but finite
		{F16, 1000, 999, nan, 999},
		{F16, 1000, 3, 70000, 3}, // overflows f16 to +Inf
		{Q8_0, 1024, -1, 0, -1},
		{Q8_0, 1024, 100, nan, 96},
	} {
		t.Run(fmt.Sprintf("%v/%d/%v", tc.typ, tc.at, tc.v), func(t *testing.T) {
			err := CheckFinite(finiteFile(t, tc.typ, tc.n, tc.at, tc.v))
			var nf *NonFiniteError
			switch {
			case tc.wantElem < 0 && err != nil:
				t.Errorf("got %v, want no error", err)
			case tc.wantElem >= 0 && !errors.As(err, &nf):
				t.Errorf("got %v, want a NonFiniteError", err)
			case tc.wantElem >= 0 && (nf.Tensor != "bad" || nf.Element != uint64(tc.wantElem)):
				t.Errorf("got tensor %q element %d, want \"bad\" element %d", nf.Tensor, nf.Element, tc.wantElem)
			}
		})
	}
}

// BenchmarkCheckFinite scans a 256 MiB F32 model file (64 Mi weights),
// the cost a full check adds to opening a model of a few hundred MB;
// "read" is the baseline of reading the same file once.
func BenchmarkCheckFinite(b *testing.B) {
	const n = 64 << 20
	path := finiteFile(b, F32, n, -1, 0)
	b.Run("check", func(b *testing.B) {
		b.SetBytes(4 * n)
		for b.Loop() {
			if err := CheckFinite(path); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read", func(b *testing.B) {
		b.SetBytes(4 * n)
		for b.Loop() {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			_, err = io.Copy(io.Discard, f)
			f.Close()
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
