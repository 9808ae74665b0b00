package train

import (
	"fmt"
	"strings"

	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/llamacpp"
)

// SaveAdapter writes the LoRA adapter as a GGUF that llama.cpp's
// llama_adapter_lora_init loads, through the one LoRA writer
// (gguf.WriteLoRA): general.name "omar-lora", adapter.lora.alpha, and per
// adapted matrix blk.N.<module>.weight.lora_a [n_in, r] and .lora_b
// [r, n_out]. llama.cpp scales B·A·x by alpha/r, as the training graph does,
// so the adapted logits match. The file is written atomically, and the same
// trainer state always gives the same bytes (resume relies on it).
func (t *Trainer) SaveAdapter(path string) error {
	if t.opts.Full {
		return fmt.Errorf("train: save adapter %s: a full-parameter trainer has no adapter (SaveModel writes the model)", path)
	}
	l := gguf.LoRA{Arch: t.hp.arch, Name: "omar-lora", Alpha: t.opts.LoRAAlpha}
	for _, lr := range t.loras {
		name, _, a := t.paramData(lr.pa)
		_, _, b := t.paramData(lr.pb)
		base, _ := strings.CutSuffix(name, ".lora_a")
		l.Tensors = append(l.Tensors, gguf.LoRATensor{Base: base, In: lr.nIn, Out: lr.nOut, Rank: t.opts.LoRARank, A: a, B: b})
	}
	if err := gguf.WriteLoRA(path, l); err != nil {
		return fmt.Errorf("train: save adapter: %w", err)
	}
	return nil
}

// paramData copies parameter p out of the backend with its ggml shape.
func (t *Trainer) paramData(p int) (string, []uint64, []float32) {
	pr := t.params[p]
	data := make([]float32, pr.n)
	llamacpp.GetF32(pr.t, data)
	shape := []uint64{uint64(pr.t.Ne[0]), uint64(pr.t.Ne[1])}
	return pr.name, shape, data
}

// LoadAdapter initialises the adapter from a LoRA GGUF written by
// SaveAdapter (or another llama.cpp LoRA of the same model), e.g. to start
// PPO from an `omar sft` warm-up. The file is read by gguf.ReadLoRA. Its
// matrices must have this trainer's rank and shapes and adapt only modules
// this trainer adapts (modules it lacks keep their fresh initialisation,
// which leaves them inactive); a different alpha is absorbed by rescaling B.
// The value head and the optimizer state are not touched. Nothing changes
// when the file does not fit.
func (t *Trainer) LoadAdapter(path string) error {
	if t.opts.Full {
		return fmt.Errorf("train: load adapter %s: a full-parameter trainer has no adapter", path)
	}
	l, err := gguf.ReadLoRA(path)
	if err != nil {
		return fmt.Errorf("train: load adapter: %w", err)
	}
	if l.Arch != t.hp.arch {
		return fmt.Errorf("train: load adapter %s: general.architecture is %q, want %q", path, l.Arch, t.hp.arch)
	}
	byBase := map[string]*lora{}
	for _, lr := range t.loras {
		name, _, _ := t.paramData(lr.pa)
		base, _ := strings.CutSuffix(name, ".lora_a")
		byBase[base] = lr
	}
	// The adapter adds (alpha/r)·B·A·x: keep the product when alphas differ.
	scale := l.Alpha / t.opts.LoRAAlpha
	type update struct {
		lr   *lora
		a, b []float32
	}
	var updates []update
	for _, lt := range l.Tensors {
		lr, ok := byBase[lt.Base]
		if !ok {
			return fmt.Errorf("train: load adapter %s: tensor %s.lora_a is not adapted by this trainer (modules %v, rank %d)", path, lt.Base, t.moduleList(), t.opts.LoRARank)
		}
		if lt.In != lr.nIn || lt.Out != lr.nOut || lt.Rank != t.opts.LoRARank {
			return fmt.Errorf("train: load adapter %s: %s has in %d, out %d, rank %d; want %d, %d, rank %d",
				path, lt.Base, lt.In, lt.Out, lt.Rank, lr.nIn, lr.nOut, t.opts.LoRARank)
		}
		if scale != 1 {
			for i := range lt.B {
				lt.B[i] *= scale
			}
		}
		updates = append(updates, update{lr, lt.A, lt.B})
	}
	for _, u := range updates {
		llamacpp.SetF32(t.params[u.lr.pa].t, u.a)
		llamacpp.SetF32(t.params[u.lr.pb].t, u.b)
	}
	return nil
}
