package gguf

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func sampleLoRA() LoRA {
	l := LoRA{Arch: "llama", Alpha: 16}
	for _, base := range []string{"blk.0.attn_q.weight", "blk.1.ffn_down.weight"} {
		in, out, r := 64, 64, 4
		if strings.Contains(base, "ffn_down") {
			in = 128
		}
		lt := LoRATensor{Base: base, In: in, Out: out, Rank: r, A: make([]float32, r*in), B: make([]float32, out*r)}
		for i := range lt.A {
			lt.A[i] = float32(i%7) * 0.01
		}
		for i := range lt.B {
			lt.B[i] = float32(i%5) * -0.02
		}
		l.Tensors = append(l.Tensors, lt)
	}
	return l
}

func TestLoRARoundTrip(t *testing.T) {
	for _, name := range []string{"", "omar-lora"} {
		t.Run("name="+name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "adapter.gguf")
			want := sampleLoRA()
			want.Name = name
			if err := WriteLoRA(path, want); err != nil {
				t.Fatal(err)
			}
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for key, v := range map[string]string{"general.type": "adapter", "adapter.type": "lora", "general.architecture": "llama"} {
				if got, _ := f.String(key); got != v {
					t.Errorf("%s: got %q, want %q", key, got, v)
				}
			}
			if got := f.Has("general.name"); got != (name != "") {
				t.Errorf("general.name present: got %v, want %v", got, name != "")
			}
			a, _ := f.Tensor("blk.1.ffn_down.weight.lora_a")
			b, _ := f.Tensor("blk.1.ffn_down.weight.lora_b")
			if !reflect.DeepEqual(a.Shape, []uint64{128, 4}) || !reflect.DeepEqual(b.Shape, []uint64{4, 64}) {
				t.Errorf("shapes: lora_a %v, lora_b %v; want [128 4], [4 64]", a.Shape, b.Shape)
			}
			got, err := ReadLoRA(path)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("ReadLoRA: got %+v, want %+v", got, want)
			}
		})
	}
}

// TestLoRABytes pins the file of a small adapter: the SHA-256 was recorded
// from model.WriteLoRA before the writer moved here, and adapters written
// for resume must stay bit-identical.
func TestLoRABytes(t *testing.T) {
	l := LoRA{Arch: "qwen2", Alpha: 3, Tensors: []LoRATensor{
		{Base: "blk.0.attn_q.weight", In: 3, Out: 2, Rank: 2, A: []float32{1, 2, 3, 4, 5, 6}, B: []float32{-1, 0.5, 0.25, 8}},
		{Base: "blk.1.ffn_up.weight", In: 2, Out: 1, Rank: 1, A: []float32{0.1, 0.2}, B: []float32{7}},
	}}
	w, err := l.Writer()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	if got, want := hex.EncodeToString(sum[:]), "227b20bbea6c5d5fd3b3f7b7b143a67a894b99f3d9a9e5b3f049632c0072c7a0"; got != want || buf.Len() != 548 {
		t.Errorf("adapter file: got %d bytes, sha256 %s; want 548 bytes, sha256 %s", buf.Len(), got, want)
	}
}

func TestLoRAValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(l *LoRA)
		want   string
	}{
		{"no arch", func(l *LoRA) { l.Arch = "" }, "architecture"},
		{"zero alpha", func(l *LoRA) { l.Alpha = 0 }, "alpha"},
		{"no tensors", func(l *LoRA) { l.Tensors = nil }, "without tensors"},
		{"bad base", func(l *LoRA) { l.Tensors[0].Base = "blk.0.attn_q" }, "ending in .weight"},
		{"duplicate", func(l *LoRA) { l.Tensors[1].Base = l.Tensors[0].Base }, "twice"},
		{"short A", func(l *LoRA) { l.Tensors[0].A = l.Tensors[0].A[1:] }, "A has"},
		{"short B", func(l *LoRA) { l.Tensors[0].B = l.Tensors[0].B[1:] }, "B has"},
		{"zero rank", func(l *LoRA) { l.Tensors[0].Rank = 0 }, "positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := sampleLoRA()
			tt.modify(&l)
			err := WriteLoRA(filepath.Join(t.TempDir(), "x.gguf"), l)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestReadLoRARejects: files that are not complete LoRA adapters are
// refused with an error naming the problem.
func TestReadLoRARejects(t *testing.T) {
	adapterMeta := func(w *Writer) {
		for _, kv := range []KV{{"general.architecture", "llama"}, {"general.type", "adapter"}, {"adapter.type", "lora"}, {"adapter.lora.alpha", float32(8)}} {
			if err := w.Set(kv.Key, kv.Value); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name  string
		build func(w *Writer) error
		want  string
	}{
		{"a model", func(w *Writer) error {
			w.Set("general.architecture", "llama")
			return w.AddTensor("token_embd.weight", []uint64{2, 3}, F32, make([]float32, 6))
		}, "general.type"},
		{"not lora", func(w *Writer) error {
			w.Set("general.type", "adapter")
			w.Set("adapter.type", "control_vector")
			return nil
		}, "adapter.type"},
		{"no alpha", func(w *Writer) error {
			w.Set("general.architecture", "llama")
			w.Set("general.type", "adapter")
			w.Set("adapter.type", "lora")
			return w.AddTensor("blk.0.attn_q.weight.lora_a", []uint64{2, 1}, F32, make([]float32, 2))
		}, "adapter.lora.alpha"},
		{"stray tensor", func(w *Writer) error {
			adapterMeta(w)
			return w.AddTensor("blk.0.attn_q.weight", []uint64{2, 2}, F32, make([]float32, 4))
		}, "neither"},
		{"lone lora_b", func(w *Writer) error {
			adapterMeta(w)
			return w.AddTensor("blk.0.attn_q.weight.lora_b", []uint64{1, 2}, F32, make([]float32, 2))
		}, "no lora_a"},
		{"lone lora_a", func(w *Writer) error {
			adapterMeta(w)
			return w.AddTensor("blk.0.attn_q.weight.lora_a", []uint64{2, 1}, F32, make([]float32, 2))
		}, "missing or misshapen"},
		{"rank mismatch", func(w *Writer) error {
			adapterMeta(w)
			if err := w.AddTensor("blk.0.attn_q.weight.lora_a", []uint64{2, 1}, F32, make([]float32, 2)); err != nil {
				return err
			}
			return w.AddTensor("blk.0.attn_q.weight.lora_b", []uint64{2, 2}, F32, make([]float32, 4))
		}, "missing or misshapen"},
		{"no tensors", func(w *Writer) error { adapterMeta(w); return nil }, "without tensors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := NewWriter()
			if err := tt.build(w); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "x.gguf")
			if err := w.WriteFile(path); err != nil {
				t.Fatal(err)
			}
			_, err := ReadLoRA(path)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("got %v, want an error naming %s and containing %q", err, path, tt.want)
			}
		})
	}
}

// TestReadLoRAF16 reads an adapter whose matrices are stored as F16, as
// converters of other tools write them.
func TestReadLoRAF16(t *testing.T) {
	w := NewWriter()
	for _, kv := range []KV{{"general.architecture", "qwen3"}, {"general.type", "adapter"}, {"adapter.type", "lora"}, {"adapter.lora.alpha", float64(4)}} {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.AddTensor("blk.0.ffn_up.weight.lora_a", []uint64{2, 1}, F16, []float32{0.5, -1.25}); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("blk.0.ffn_up.weight.lora_b", []uint64{1, 3}, F16, []float32{1, 2, 0.001}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "f16.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	got, err := ReadLoRA(path)
	if err != nil {
		t.Fatal(err)
	}
	want := LoRA{Arch: "qwen3", Alpha: 4, Tensors: []LoRATensor{{Base: "blk.0.ffn_up.weight", In: 2, Out: 3, Rank: 1,
		A: []float32{0.5, -1.25}, B: []float32{1, 2, Float16ToFloat32(Float32ToFloat16(0.001))}}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// FuzzLoRA: any bytes either fail to decode or decode to an adapter that
// writes and reads back unchanged.
func FuzzLoRA(f *testing.F) {
	w, err := sampleLoRA().Writer()
	if err != nil {
		f.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add(buf.Bytes()[:len(buf.Bytes())/2])
	f.Fuzz(func(t *testing.T, data []byte) {
		gf, err := Read(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		l, err := gf.LoRA()
		if err != nil {
			return
		}
		w, err := l.Writer()
		if err != nil {
			t.Fatalf("decoded adapter does not write: %v", err)
		}
		var out bytes.Buffer
		if _, err := w.WriteTo(&out); err != nil {
			t.Fatal(err)
		}
		gf2, err := Read(bytes.NewReader(out.Bytes()), int64(out.Len()))
		if err != nil {
			t.Fatalf("re-read: %v", err)
		}
		l2, err := gf2.LoRA()
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(l, l2) && !hasNaN(l) {
			t.Errorf("round trip changed the adapter:\ngot  %+v\nwant %+v", l2, l)
		}
	})
}

func hasNaN(l LoRA) bool {
	for _, t := range l.Tensors {
		for _, v := range append(append([]float32(nil), t.A...), t.B...) {
			if v != v {
				return true
			}
		}
	}
	return false
}
