package gguf

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// sampleWriter builds a file with every metadata type and both tensor types.
func sampleWriter(t testing.TB) *Writer {
	t.Helper()
	w := NewWriter()
	kvs := []KV{
		{"general.architecture", "llama"},
		{"u8", uint8(200)}, {"i8", int8(-100)}, {"u16", uint16(60000)}, {"i16", int16(-30000)},
		{"u32", uint32(4000000000)}, {"i32", int32(-2000000000)}, {"f32", float32(1.5e-5)},
		{"bool", true}, {"u64", uint64(1) << 60}, {"i64", int64(-1) << 60}, {"f64", math.Pi},
		{"empty.string", ""},
		{"arr.strings", []string{"a", "Ġhello", "", "<|im_start|>"}},
		{"arr.i32", []int32{1, -2, 3}}, {"arr.u32", []uint32{7}}, {"arr.f32", []float32{0.5, -0.25}},
		{"arr.u8", []uint8{1, 2}}, {"arr.i8", []int8{-1}}, {"arr.u16", []uint16{9}}, {"arr.i16", []int16{-9}},
		{"arr.bool", []bool{true, false}}, {"arr.u64", []uint64{1 << 40}}, {"arr.i64", []int64{-5}},
		{"arr.f64", []float64{2.5}}, {"arr.empty", []int32{}},
	}
	for _, kv := range kvs {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	mat := make([]float32, 3*5)
	for i := range mat {
		mat[i] = float32(i)*0.25 - 1
	}
	if err := w.AddTensor("mat", []uint64{3, 5}, F32, mat); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("vec16", []uint64{7}, F16, []float32{0, 1, -2, 0.5, 65504, 1e-7, -0.333}); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("cube", []uint64{2, 2, 2}, F32, []float32{1, 2, 3, 4, 5, 6, 7, 8}); err != nil {
		t.Fatal(err)
	}
	return w
}

func encode(t testing.TB, w *Writer) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := w.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo returned %d, wrote %d", n, buf.Len())
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	w := sampleWriter(t)
	data := encode(t, w)
	f, err := Read(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != Version {
		t.Errorf("version: got %d, want %d", f.Version, Version)
	}
	if got, want := f.Metadata, w.Metadata(); !reflect.DeepEqual(got, want) {
		t.Errorf("metadata:\ngot  %#v\nwant %#v", got, want)
	}
	if got, want := f.Tensors, w.Tensors(); !reflect.DeepEqual(got, want) {
		t.Errorf("tensors: got %+v, want %+v", got, want)
	}
	if f.DataOffset%DefaultAlignment != 0 {
		t.Errorf("data offset %d not aligned", f.DataOffset)
	}
	for _, ti := range f.Tensors {
		if ti.Offset%DefaultAlignment != 0 {
			t.Errorf("tensor %s offset %d not aligned", ti.Name, ti.Offset)
		}
	}
	tests := []struct {
		name string
		want []float32
	}{
		{"mat", w.tensors[0].data},
		{"vec16", []float32{0, 1, -2, 0.5, 65504, Float16ToFloat32(Float32ToFloat16(1e-7)), Float16ToFloat32(Float32ToFloat16(-0.333))}},
		{"cube", []float32{1, 2, 3, 4, 5, 6, 7, 8}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := f.TensorFloat32(tt.name)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	// Re-encoding what was read gives the same bytes.
	w2 := NewWriter()
	for _, kv := range f.Metadata {
		if err := w2.Set(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	for _, ti := range f.Tensors {
		v, _ := f.TensorFloat32(ti.Name)
		if err := w2.AddTensor(ti.Name, ti.Shape, ti.Type, v); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(encode(t, w2), data) {
		t.Error("re-encoded file differs from the original")
	}
}

func TestGetters(t *testing.T) {
	data := encode(t, sampleWriter(t))
	f, err := Read(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if s, err := f.String("general.architecture"); err != nil || s != "llama" {
		t.Errorf("String: got %q, %v, want llama", s, err)
	}
	if n, err := f.Uint("u32"); err != nil || n != 4000000000 {
		t.Errorf("Uint(u32): got %d, %v", n, err)
	}
	if _, err := f.Uint("i32"); err == nil {
		t.Error("Uint of a negative value: got nil error")
	}
	if x, err := f.Float("f32"); err != nil || float32(x) != 1.5e-5 {
		t.Errorf("Float: got %v, %v", x, err)
	}
	if ss, err := f.Strings("arr.strings"); err != nil || len(ss) != 4 {
		t.Errorf("Strings: got %v, %v", ss, err)
	}
	for _, key := range []string{"missing", "u8"} {
		if _, err := f.String(key); err == nil {
			t.Errorf("String(%q): got nil error", key)
		}
	}
	if _, err := f.TensorFloat32("nope"); err == nil {
		t.Error("TensorFloat32 of a missing tensor: got nil error")
	}
	for key, want := range map[string]bool{"u8": true, "empty.string": true, "missing": false, "mat": false} {
		if got := f.Has(key); got != want {
			t.Errorf("Has(%q): got %v, want %v", key, got, want)
		}
	}
}

func TestWriteFileAndOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := sampleWriter(t).WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := len(f.Tensors); got != 3 {
		t.Errorf("tensors: got %d, want 3", got)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "absent.gguf")); err == nil {
		t.Error("Open of a missing file: got nil error")
	}
}

func TestAlignment(t *testing.T) {
	w := NewWriter()
	if err := w.Set(KeyAlignment, uint32(64)); err != nil {
		t.Fatal(err)
	}
	w.AddTensor("a", []uint64{3}, F32, []float32{1, 2, 3})
	w.AddTensor("b", []uint64{1}, F16, []float32{4})
	data := encode(t, w)
	f, err := Read(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if f.Alignment != 64 || f.DataOffset%64 != 0 || f.Tensors[1].Offset != 64 {
		t.Errorf("got alignment %d, data offset %d, b at %d; want 64, multiple of 64, 64", f.Alignment, f.DataOffset, f.Tensors[1].Offset)
	}
	for _, bad := range []any{uint32(3), uint32(0), int32(32)} {
		if err := NewWriter().Set(KeyAlignment, bad); err == nil {
			t.Errorf("Set(alignment, %v): got nil error", bad)
		}
	}
}

func TestWriterErrors(t *testing.T) {
	tests := []struct {
		name string
		do   func(w *Writer) error
	}{
		{"unsupported value", func(w *Writer) error { return w.Set("k", 3) }},
		{"map value", func(w *Writer) error { return w.Set("k", map[string]int{}) }},
		{"empty key", func(w *Writer) error { return w.Set("", "x") }},
		{"shape mismatch", func(w *Writer) error { return w.AddTensor("t", []uint64{2, 2}, F32, []float32{1}) }},
		{"quantized", func(w *Writer) error { return w.AddTensor("t", []uint64{32}, Q8_0, make([]float32, 32)) }},
		{"five dims", func(w *Writer) error { return w.AddTensor("t", []uint64{1, 1, 1, 1, 1}, F32, []float32{1}) }},
		{"duplicate", func(w *Writer) error {
			w.AddTensor("t", []uint64{1}, F32, []float32{1})
			return w.AddTensor("t", []uint64{1}, F32, []float32{1})
		}},
		{"bytes: wrong length", func(w *Writer) error { return w.AddTensorBytes("t", []uint64{32, 2}, Q8_0, make([]byte, 34)) }},
		{"bytes: partial block", func(w *Writer) error { return w.AddTensorBytes("t", []uint64{16}, Q8_0, make([]byte, 17)) }},
		{"bytes: unknown type", func(w *Writer) error { return w.AddTensorBytes("t", []uint64{1}, TensorType(99), make([]byte, 4)) }},
		{"bytes: no name", func(w *Writer) error { return w.AddTensorBytes("", []uint64{1}, F32, make([]byte, 4)) }},
		{"bytes: no dims", func(w *Writer) error { return w.AddTensorBytes("t", nil, F32, make([]byte, 4)) }},
		{"bytes: duplicate", func(w *Writer) error {
			w.AddTensor("t", []uint64{1}, F32, []float32{1})
			return w.AddTensorBytes("t", []uint64{1}, F32, make([]byte, 4))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.do(NewWriter()); err == nil {
				t.Error("got nil error, want one")
			}
		})
	}
}

func TestCorrupt(t *testing.T) {
	good := encode(t, sampleWriter(t))
	patch := func(off int, b ...byte) []byte {
		c := bytes.Clone(good)
		copy(c[off:], b)
		return c
	}
	tests := []struct {
		name    string
		data    []byte
		wantMsg string
		notGGUF bool
	}{
		{"empty", nil, "truncated", false},
		{"bad magic", patch(0, 'G', 'G', 'M', 'L'), "", true},
		{"version 1", patch(4, 1), "unsupported GGUF version 1", false},
		{"huge tensor count", patch(8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0), "tensor count", false},
		{"huge kv count", patch(16, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0), "metadata count", false},
		{"huge key length", patch(24, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0), "string length", false},
		{"truncated header", good[:100], "truncated", false},
		{"truncated data", good[:len(good)-4], "truncated", false},
		{"unknown value type", patch(24+8+len("general.architecture"), 99), "unknown metadata value type 99", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(tt.data), int64(len(tt.data)))
			if err == nil {
				t.Fatal("got nil error, want one")
			}
			if tt.notGGUF {
				if !errors.Is(err, ErrNotGGUF) {
					t.Errorf("got %v, want ErrNotGGUF", err)
				}
				return
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("got %T %v, want *FormatError", err, err)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) || !strings.Contains(err.Error(), "offset") {
				t.Errorf("got %q, want it to mention %q and an offset", err, tt.wantMsg)
			}
		})
	}
}

func TestCorruptFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.gguf")
	os.WriteFile(path, []byte("GGUF\x03\x00\x00\x00garbage"), 0o644)
	_, err := Open(path)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("got %v, want an error naming %s", err, path)
	}
}

func TestFloat16(t *testing.T) {
	tests := []struct {
		in   float32
		want uint16
	}{
		{0, 0x0000}, {float32(math.Copysign(0, -1)), 0x8000}, {1, 0x3c00}, {-2, 0xc000},
		{65504, 0x7bff}, {65520, 0x7c00}, {1e9, 0x7c00}, {float32(math.Inf(-1)), 0xfc00},
		{6.103515625e-05, 0x0400},       // smallest normal
		{5.960464477539063e-08, 0x0001}, // smallest subnormal
		{2.98e-08, 0x0000},              // rounds to zero (below half of smallest subnormal)
		{1.0009765625, 0x3c01},          // 1 + 2^-10
		{1.00048828125, 0x3c00},         // exactly halfway, rounds to even
		{1.00146484375, 0x3c02},         // halfway between 0x3c01 and 0x3c02, rounds to even
		{0.333251953125, 0x3555},
	}
	for _, tt := range tests {
		if got := Float32ToFloat16(tt.in); got != tt.want {
			t.Errorf("Float32ToFloat16(%g): got %#04x, want %#04x", tt.in, got, tt.want)
		}
	}
	if h := Float32ToFloat16(float32(math.NaN())); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("NaN: got %#04x", h)
	}
	// Every finite half converts to float32 and back unchanged.
	for h := 0; h < 1<<16; h++ {
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			continue // NaN payloads are not preserved
		}
		f := Float16ToFloat32(uint16(h))
		if got := Float32ToFloat16(f); got != uint16(h) {
			t.Fatalf("half %#04x -> %g -> %#04x", h, f, got)
		}
	}
}

func FuzzRead(f *testing.F) {
	good := encode(f, sampleWriter(f))
	f.Add(good)
	f.Add(good[:64])
	f.Add([]byte("GGUF"))
	f.Add([]byte{})
	w := NewWriter()
	w.Set("general.architecture", "llama")
	w.AddTensor("t", []uint64{4}, F16, []float32{1, 2, 3, 4})
	f.Add(encode(f, w))
	f.Fuzz(func(t *testing.T, data []byte) {
		gf, err := Read(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		for _, ti := range gf.Tensors {
			if ti.Type == F32 || ti.Type == F16 || ti.Type == BF16 {
				if _, err := gf.TensorFloat32(ti.Name); err != nil {
					t.Errorf("tensor %q accepted by Read but unreadable: %v", ti.Name, err)
				}
			}
		}
	})
}

func BenchmarkWriteF16(b *testing.B) {
	w := NewWriter()
	w.AddTensor("t", []uint64{1024, 1024}, F16, make([]float32, 1024*1024))
	b.SetBytes(2 << 20)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := w.WriteTo(discard{}); err != nil {
			b.Fatal(err)
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func TestRowBytes(t *testing.T) {
	tests := []struct {
		typ  TensorType
		n    uint64
		want uint64
	}{
		{F32, 3, 12}, {F16, 3, 6}, {BF16, 4, 8}, {Q8_0, 64, 68}, {Q4_K, 512, 288}, {Q6_K, 256, 210},
		{IQ4_NL, 32, 18}, {MXFP4, 32, 17}, {NVFP4, 64, 36}, {Q1_0, 128, 18}, {TQ1_0, 256, 54},
	}
	for _, tt := range tests {
		if got, err := tt.typ.RowBytes(tt.n); err != nil || got != tt.want {
			t.Errorf("%v.RowBytes(%d): got %d, %v; want %d", tt.typ, tt.n, got, err, tt.want)
		}
	}
	if _, err := Q8_0.RowBytes(33); err == nil {
		t.Error("partial block: got nil error")
	}
	if _, err := TensorType(4).RowBytes(1); err == nil {
		t.Error("removed type 4: got nil error")
	}
}

// TestAddTensorBytes stores tensors from their encoded bytes (a quantized
// block and an F32 vector) beside an ordinary one; the bytes come back as
// they went in, aligned, and F32 bytes decode to the same floats.
func TestAddTensorBytes(t *testing.T) {
	w := NewWriter()
	q := make([]byte, 2*34) // two Q8_0 blocks: one row of 64
	for i := range q {
		q[i] = byte(i * 7)
	}
	f32 := []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0} // 1, -2
	if err := w.AddTensor("first", []uint64{3}, F16, []float32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensorBytes("q", []uint64{64, 1}, Q8_0, q); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensorBytes("v", []uint64{2}, F32, f32); err != nil {
		t.Fatal(err)
	}
	data := encode(t, w)
	f, err := Read(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		want []byte
	}{{"q", q}, {"v", f32}} {
		got, err := f.TensorBytes(tt.name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, tt.want) {
			t.Errorf("%s: got bytes %x, want %x", tt.name, got, tt.want)
		}
		if ti, _ := f.Tensor(tt.name); ti.Offset%DefaultAlignment != 0 {
			t.Errorf("%s: offset %d not aligned", tt.name, ti.Offset)
		}
	}
	if got, err := f.TensorFloat32("v"); err != nil || !reflect.DeepEqual(got, []float32{1, -2}) {
		t.Errorf("TensorFloat32(v): got %v, %v, want [1 -2]", got, err)
	}
	if _, err := f.TensorFloat32("q"); err == nil {
		t.Error("TensorFloat32 of a Q8_0 tensor: got nil error, want one")
	}
}

func TestBFloat16(t *testing.T) {
	tests := []struct {
		in   float32
		want uint16
	}{
		{0, 0x0000}, {float32(math.Copysign(0, -1)), 0x8000}, {1, 0x3f80}, {-2, 0xc000},
		{float32(math.Inf(1)), 0x7f80}, {float32(math.Inf(-1)), 0xff80},
		{math.Float32frombits(0x3f808000), 0x3f80}, // halfway, even stays
		{math.Float32frombits(0x3f818000), 0x3f82}, // halfway, odd rounds up
		{math.Float32frombits(0x3f808001), 0x3f81}, // above halfway
		{math.Float32frombits(0x7f7fffff), 0x7f80}, // max float32 rounds to Inf
		{math.Float32frombits(0x00010000), 0x0001}, // subnormal kept
	}
	for _, tt := range tests {
		if got := Float32ToBFloat16(tt.in); got != tt.want {
			t.Errorf("Float32ToBFloat16(%g): got %#04x, want %#04x", tt.in, got, tt.want)
		}
	}
	for _, nan := range []uint32{0x7fc00000, 0x7f800001, 0xffffffff} {
		h := Float32ToBFloat16(math.Float32frombits(nan))
		if got := BFloat16ToFloat32(h); got == got {
			t.Errorf("NaN %#08x: got %#04x (%g), want a NaN", nan, h, got)
		}
	}
	// Every bfloat16 that is not NaN converts to float32 and back exactly.
	for h := range uint32(1 << 16) {
		f := BFloat16ToFloat32(uint16(h))
		if f != f {
			continue
		}
		if got := Float32ToBFloat16(f); got != uint16(h) {
			t.Fatalf("%#04x → %g → %#04x", h, f, got)
		}
	}
}
