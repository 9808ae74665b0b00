package gguf

import (
	"fmt"
	"math"
	"strings"
)

// LoRA adapter files: the layout llama.cpp's llama_adapter_lora_init loads.
// Metadata general.architecture (the base model's), general.type=adapter,
// optionally general.name, adapter.type=lora and adapter.lora.alpha; per
// adapted weight W the tensors "<W>.lora_a" [n_in, r] and "<W>.lora_b"
// [r, n_out]. llama.cpp adds scale·Alpha/r·B·(A·x) to W·x. Both the trainer's
// adapter export and the test-model helpers write through WriteLoRA, so
// there is one definition of the format.

// LoRA is a low-rank adapter for a base model. For a base weight W that
// maps n_in to n_out (ggml shape [n_in, n_out]), the adapted layer computes
// W·x + Alpha/r · B·(A·x).
type LoRA struct {
	// Arch must equal the base model's general.architecture.
	Arch string
	// Name is general.name; written only when not empty.
	Name string
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
		return fmt.Errorf("gguf: LoRA without architecture")
	}
	if l.Alpha <= 0 || math.IsNaN(float64(l.Alpha)) || math.IsInf(float64(l.Alpha), 0) {
		return fmt.Errorf("gguf: LoRA alpha %v must be positive", l.Alpha)
	}
	if len(l.Tensors) == 0 {
		return fmt.Errorf("gguf: LoRA without tensors")
	}
	seen := map[string]bool{}
	for _, t := range l.Tensors {
		switch {
		case !strings.HasSuffix(t.Base, ".weight"):
			return fmt.Errorf("gguf: LoRA base %q must name a weight (ending in .weight)", t.Base)
		case seen[t.Base]:
			return fmt.Errorf("gguf: LoRA base %q twice", t.Base)
		case t.In <= 0 || t.Out <= 0 || t.Rank <= 0:
			return fmt.Errorf("gguf: LoRA %q: sizes must be positive (in %d, out %d, rank %d)", t.Base, t.In, t.Out, t.Rank)
		case len(t.A) != t.Rank*t.In:
			return fmt.Errorf("gguf: LoRA %q: A has %d values, want rank×in = %d", t.Base, len(t.A), t.Rank*t.In)
		case len(t.B) != t.Out*t.Rank:
			return fmt.Errorf("gguf: LoRA %q: B has %d values, want out×rank = %d", t.Base, len(t.B), t.Out*t.Rank)
		}
		seen[t.Base] = true
	}
	return nil
}

// Writer returns the adapter as a GGUF writer (F32 tensors). The writer
// holds l's slices until it has written the file.
func (l LoRA) Writer() (*Writer, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	kvs := []KV{{Key: "general.architecture", Value: l.Arch}, {Key: "general.type", Value: "adapter"}}
	if l.Name != "" {
		kvs = append(kvs, KV{Key: "general.name", Value: l.Name})
	}
	kvs = append(kvs, KV{Key: "adapter.type", Value: "lora"}, KV{Key: "adapter.lora.alpha", Value: l.Alpha})
	w := NewWriter()
	for _, kv := range kvs {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			return nil, err
		}
	}
	for _, t := range l.Tensors {
		if err := w.AddTensor(t.Base+".lora_a", []uint64{uint64(t.In), uint64(t.Rank)}, F32, t.A); err != nil {
			return nil, err
		}
		if err := w.AddTensor(t.Base+".lora_b", []uint64{uint64(t.Rank), uint64(t.Out)}, F32, t.B); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// WriteLoRA writes the adapter to path atomically (see Writer.WriteFile).
// The same adapter always gives the same bytes.
func WriteLoRA(path string, l LoRA) error {
	w, err := l.Writer()
	if err != nil {
		return err
	}
	return w.WriteFile(path)
}

// ReadLoRA reads the LoRA adapter file at path (see File.LoRA).
func ReadLoRA(path string) (LoRA, error) {
	f, err := Open(path)
	if err != nil {
		return LoRA{}, err
	}
	defer f.Close()
	l, err := f.LoRA()
	if err != nil {
		return l, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

// LoRA decodes the file as a LoRA adapter (F32, F16 or BF16 matrices).
// Every tensor must be one half of a lora_a/lora_b pair with matching rank,
// so a file that llama.cpp would load only in part is refused.
func (f *File) LoRA() (LoRA, error) {
	var l LoRA
	var err error
	if typ, _ := f.String("general.type"); typ != "adapter" {
		return l, fmt.Errorf("gguf: general.type is %q, want \"adapter\"", typ)
	}
	if typ, _ := f.String("adapter.type"); typ != "lora" {
		return l, fmt.Errorf("gguf: adapter.type is %q, want \"lora\"", typ)
	}
	if l.Arch, err = f.String("general.architecture"); err != nil {
		return l, err
	}
	if f.Has("general.name") {
		if l.Name, err = f.String("general.name"); err != nil {
			return l, err
		}
	}
	alpha, err := f.Float("adapter.lora.alpha")
	if err != nil {
		return l, err
	}
	l.Alpha = float32(alpha)
	for _, ti := range f.Tensors {
		if base, ok := strings.CutSuffix(ti.Name, ".lora_b"); ok {
			if _, ok := f.Tensor(base + ".lora_a"); !ok {
				return l, fmt.Errorf("gguf: LoRA tensor %q has no lora_a", ti.Name)
			}
			continue // read with its lora_a
		}
		base, ok := strings.CutSuffix(ti.Name, ".lora_a")
		if !ok {
			return l, fmt.Errorf("gguf: tensor %q is neither a lora_a nor a lora_b", ti.Name)
		}
		bi, _ := f.Tensor(base + ".lora_b")
		if len(ti.Shape) != 2 || len(bi.Shape) != 2 || bi.Shape[0] != ti.Shape[1] {
			return l, fmt.Errorf("gguf: LoRA pair for %q is missing or misshapen (lora_a %v, lora_b %v; want [in r], [r out])", base, ti.Shape, bi.Shape)
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
