package model

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/gguf"
)

func openGGUF(t testing.TB, path string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

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
	path := filepath.Join(t.TempDir(), "adapter.gguf")
	want := sampleLoRA()
	if err := WriteLoRA(path, want); err != nil {
		t.Fatal(err)
	}
	f := openGGUF(t, path)
	for key, v := range map[string]string{"general.type": "adapter", "adapter.type": "lora", "general.architecture": "llama"} {
		if got, _ := f.String(key); got != v {
			t.Errorf("%s: got %q, want %q", key, got, v)
		}
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
}

func TestLoRAValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(l *LoRA)
	}{
		{"no arch", func(l *LoRA) { l.Arch = "" }},
		{"zero alpha", func(l *LoRA) { l.Alpha = 0 }},
		{"no tensors", func(l *LoRA) { l.Tensors = nil }},
		{"bad base", func(l *LoRA) { l.Tensors[0].Base = "blk.0.attn_q" }},
		{"duplicate", func(l *LoRA) { l.Tensors[1].Base = l.Tensors[0].Base }},
		{"short A", func(l *LoRA) { l.Tensors[0].A = l.Tensors[0].A[1:] }},
		{"short B", func(l *LoRA) { l.Tensors[0].B = l.Tensors[0].B[1:] }},
		{"zero rank", func(l *LoRA) { l.Tensors[0].Rank = 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := sampleLoRA()
			tt.modify(&l)
			if err := WriteLoRA(filepath.Join(t.TempDir(), "x.gguf"), l); err == nil {
				t.Error("got nil error, want one")
			}
		})
	}
}

func TestReadLoRARejectsModel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := WriteFile(path, Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLoRA(path); err == nil || !strings.Contains(err.Error(), "adapter") {
		t.Errorf("got %v, want an error about general.type", err)
	}
}
