package model

import (
	"fmt"
	"math"
	"strings"

	"github.com/omar-selfplay/omar/gguf"
)

// LoRA is a low-rank adapter for a base model. For a base weight W that
// maps n_in to n_out (ggml shape [n_in, n_out]), the adapted layer computes
// W·x + Alpha/r · B·(A·x).
type LoRA struct {
	// Arch must equal the base model's general.architecture.
	Arch string
	// Alpha is the LoRA scaling numerator (adapter.lora.alpha); llama.cpp
	// scales by Alpha/r times the scale given when the adapter is set.
	Alpha float32
	// Tensors in file order.
	Tensors []LoRATensor
}

// LoRATensor is the A/B pair of one base weight.
type LoRATensor struct {
	// Base is the name of the adapted weight, e.g. "blk.0.attn_q.weight".
	Base string
	// In and Out are the base weight's n_in and n_out; Rank is r.
	In, Out, Rank int
	// A is r×In, row-major (r rows of In values): ggml shape [In, r],
	// written as "<Base>.lora_a".
	A []float32
	// B is Out×r, row-major (Out rows of r values): ggml shape [r, Out],
	// written as "<Base>.lora_b". Zero at the start of training.
	B []float32
}

// Validate checks names and shapes.
func (l LoRA) Validate() error {
	if l.Arch == "" {
		return fmt.Errorf("model: LoRA without architecture")
	}
	if l.Alpha <= 0 || math.IsNaN(float64(l.Alpha)) || math.IsInf(float64(l.Alpha), 0) {
		return fmt.Errorf("model: LoRA alpha %v must be positive", l.Alpha)
	}
	if len(l.Tensors) == 0 {
		return fmt.Errorf("model: LoRA without tensors")
	}
	seen := map[string]bool{}
	for _, t := range l.Tensors {
		switch {
		case !strings.HasSuffix(t.Base, ".weight"):
			return fmt.Errorf("model: LoRA base %q must name a weight (ending in .weight)", t.Base)
		case seen[t.Base]:
			return fmt.Errorf("model: LoRA base %q twice", t.Base)
		case t.In <= 0 || t.Out <= 0 || t.Rank <= 0:
			return fmt.Errorf("model: LoRA %q: sizes must be positive (in %d, out %d, rank %d)", t.Base, t.In, t.Out, t.Rank)
		case len(t.A) != t.Rank*t.In:
			return fmt.Errorf("model: LoRA %q: A has %d values, want rank×in = %d", t.Base, len(t.A), t.Rank*t.In)
		case len(t.B) != t.Out*t.Rank:
			return fmt.Errorf("model: LoRA %q: B has %d values, want out×rank = %d", t.Base, len(t.B), t.Out*t.Rank)
		}
		seen[t.Base] = true
	}
	return nil
}

// LoRAWriter returns the adapter as a GGUF writer (F32 tensors).
func (l LoRA) LoRAWriter() (*gguf.Writer, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	w := gguf.NewWriter()
	for _, kv := range []gguf.KV{
		{Key: "general.architecture", Value: l.Arch},
		{Key: "general.type", Value: "adapter"},
		{Key: "adapter.type", Value: "lora"},
		{Key: "adapter.lora.alpha", Value: l.Alpha},
	} {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			return nil, err
		}
	}
	for _, t := range l.Tensors {
		if err := w.AddTensor(t.Base+".lora_a", []uint64{uint64(t.In), uint64(t.Rank)}, gguf.F32, t.A); err != nil {
			return nil, err
		}
		if err := w.AddTensor(t.Base+".lora_b", []uint64{uint64(t.Rank), uint64(t.Out)}, gguf.F32, t.B); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// WriteLoRA writes the adapter to path in the layout llama.cpp's
// llama_adapter_lora_init loads.
func WriteLoRA(path string, l LoRA) error {
	w, err := l.LoRAWriter()
	if err != nil {
		return err
	}
	return w.WriteFile(path)
}

// ReadLoRA reads an adapter written by WriteLoRA (or any F32/F16 LoRA GGUF).
func ReadLoRA(path string) (LoRA, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return LoRA{}, err
	}
	defer f.Close()
	var l LoRA
	if typ, _ := f.String("general.type"); typ != "adapter" {
		return l, fmt.Errorf("model: %s: general.type is %q, want \"adapter\"", path, typ)
	}
	if typ, _ := f.String("adapter.type"); typ != "lora" {
		return l, fmt.Errorf("model: %s: adapter.type is %q, want \"lora\"", path, typ)
	}
	if l.Arch, err = f.String("general.architecture"); err != nil {
		return l, err
	}
	alpha, err := f.Float("adapter.lora.alpha")
	if err != nil {
		return l, err
	}
	l.Alpha = float32(alpha)
	for _, ti := range f.Tensors {
		base, ok := strings.CutSuffix(ti.Name, ".lora_a")
		if !ok {
			continue
		}
		bi, ok := f.Tensor(base + ".lora_b")
		if !ok || len(ti.Shape) != 2 || len(bi.Shape) != 2 || bi.Shape[0] != ti.Shape[1] {
			return l, fmt.Errorf("model: %s: LoRA pair for %q is missing or misshapen", path, base)
		}
		t := LoRATensor{Base: base, In: int(ti.Shape[0]), Rank: int(ti.Shape[1]), Out: int(bi.Shape[1])}
		if t.A, err = f.TensorFloat32(ti.Name); err != nil {
			return l, err
		}
		if t.B, err = f.TensorFloat32(bi.Name); err != nil {
			return l, err
		}
		l.Tensors = append(l.Tensors, t)
	}
	return l, l.Validate()
}
