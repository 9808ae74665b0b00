package train

import (
	"fmt"

	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/llamacpp"
)

// ModelFile is the trained model a full-parameter checkpoint holds beside
// trainer.ckpt (F32, for llama.cpp).
const ModelFile = "model.gguf"

// fullGroup is the AdamW group of a base weight in full mode: matrices and
// the embeddings (two dimensions) are decayed; norms and biases (vectors)
// are not, as is usual (GPT-2, LLaMA): decaying a norm's gain pulls it
// towards 0 instead of towards the identity, and biases do not scale
// capacity.
func fullGroup(x llamacpp.Tensor) int {
	if x.Ne[1] > 1 {
		return groupDecay
	}
	return groupNoDecay
}

// Full reports whether the trainer trains every weight (Options.Full).
func (t *Trainer) Full() bool { return t.opts.Full }

// SaveModel writes the current model as a GGUF file that llama.cpp loads:
// the input model's metadata (architecture, hyper-parameters, tokenizer,
// chat template) and its tensors, in the same order with the same names
// and shapes. Every weight the trainer holds is written from the trainer —
// in full mode the trained weights; with a LoRA adapter the base weights
// with the adapter merged in, W + (alpha/r)·B·A — matrices as typ (gguf.F32
// or gguf.F16), vectors (norms, biases) as F32, and general.file_type set
// to match. Tensors the trainer does not use are copied unchanged. The
// value head is not part of the model. The input model file must still
// exist; the output is written atomically, and the same state gives the
// same bytes.
func (t *Trainer) SaveModel(path string, typ gguf.TensorType) error {
	if typ != gguf.F32 && typ != gguf.F16 {
		return fmt.Errorf("train: save model: weight type %v (want F32 or F16)", typ)
	}
	src, err := gguf.Open(t.model)
	if err != nil {
		return fmt.Errorf("train: save model: %w", err)
	}
	defer src.Close()
	w := gguf.NewWriter()
	for _, kv := range src.Metadata {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			return fmt.Errorf("train: save model: %w", err)
		}
	}
	fileType := uint32(0) // LLAMA_FTYPE_ALL_F32
	if typ == gguf.F16 {
		fileType = 1 // LLAMA_FTYPE_MOSTLY_F16
	}
	if err := w.Set("general.file_type", fileType); err != nil {
		return fmt.Errorf("train: save model: %w", err)
	}
	held := map[string]llamacpp.Tensor{}
	for _, fl := range t.base {
		if fl.t != t.w.ropeFreqs { // never changes: copy its bytes
			held[fl.info.Name] = fl.t
		}
	}
	merged := t.mergedLoRA()
	for _, in := range src.Tensors {
		x, ok := held[in.Name]
		if !ok {
			raw, err := src.TensorBytes(in.Name)
			if err != nil {
				return fmt.Errorf("train: save model: %w", err)
			}
			if err := w.AddTensorBytes(in.Name, in.Shape, in.Type, raw); err != nil {
				return fmt.Errorf("train: save model: %w", err)
			}
			continue
		}
		var data []float32
		if x.Type == llamacpp.TypeF32 {
			data = make([]float32, llamacpp.Nelements(x))
			llamacpp.GetF32(x, data)
		} else if data, err = readF32(src, in, nil, t.backends[len(t.backends)-1]); err != nil {
			return err
		}
		if add := merged[in.Name]; add != nil {
			add(data)
		}
		tt := gguf.F32
		if len(in.Shape) > 1 && in.Shape[1] > 1 {
			tt = typ
		}
		if err := w.AddTensor(in.Name, in.Shape, tt, data); err != nil {
			return fmt.Errorf("train: save model: %w", err)
		}
	}
	if err := w.WriteFile(path); err != nil {
		return fmt.Errorf("train: save model: %w", err)
	}
	return nil
}

// mergedLoRA returns, per adapted base weight, a function that adds the
// adapter's (alpha/r)·B·A to the weight's data in place. In ggml's layout
// W [n_in, n_out] computes y[o] = Σ_i W[o·n_in + i]·x[i], A [n_in, r] and
// B [r, n_out] likewise, so W'[o·n_in + i] = W[…] + s·Σ_j B[o·r + j]·A[j·n_in + i].
func (t *Trainer) mergedLoRA() map[string]func([]float32) {
	out := map[string]func([]float32){}
	r := t.opts.LoRARank
	scale := float64(t.opts.LoRAAlpha) / float64(r)
	for _, l := range t.loras {
		_, _, a := t.paramData(l.pa)
		_, _, b := t.paramData(l.pb)
		nIn, nOut := l.nIn, l.nOut
		out[fmt.Sprintf("blk.%d.%s.weight", l.layer, l.module)] = func(w []float32) {
			for o := range nOut {
				bo := b[o*r : (o+1)*r]
				for i := range nIn {
					var d float64
					for j, bj := range bo {
						d += float64(bj) * float64(a[j*nIn+i])
					}
					w[o*nIn+i] += float32(scale * d)
				}
			}
		}
	}
	return out
}
