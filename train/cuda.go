package train

import (
	"fmt"
	"strings"

	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/internal/sysmem"
	"github.com/omar-selfplay/omar/llamacpp"
)

// What ggml's CUDA backend (llama.cpp v0.5.0) cannot run of the trainer's
// graph, checked before the weights are allocated, so that a setting the
// device cannot honour is a clear error naming the one that works rather
// than an abort inside a pass, a silent fallback of the backward's
// largest products to the CPU, or an out-of-memory failure after minutes
// of loading.
//
// The kernels that matter (ggml_backend_cuda_device_supports_op):
//   - out_prod, the input gradient of every frozen matrix (mul_mat's
//     backward), takes F32 operands only. The scheduler would hand a
//     quantized one to the CPU, copying the matrix to the host on every
//     pass; the CPU has no out_prod kernel for F16 or BF16 at all, so
//     such a pass aborts the process.
//   - get_rows, the embedding lookup, takes F32, F16, BF16 and the
//     Q4_0…Q8_0 block formats; other types fall back to the CPU for one
//     lookup per pass, which works and is left alone (as is every op
//     with a CPU fallback that is not the backward's bulk).
//
// Every other op the graph builds, and every backward op it derives, has
// a CUDA kernel for F32 (ARCHITECTURE.md). The trainer holds every tensor
// in F32 on CUDA today (see Trainer.init: types are kept only on the
// CPU), so the type rule guards any change to that; the memory rule
// applies to every CUDA trainer.

// cudaTensor is one base tensor as the trainer will hold it on the device.
type cudaTensor struct {
	name string
	typ  gguf.TensorType // gguf and ggml share enum ggml_type
	// outProd: the backward multiplies by it with out_prod (a layer's
	// matrix, the output layer, tied embeddings used as the output).
	outProd bool
}

// cudaPlan is what checkCUDA needs to know, all of it known before
// allocation.
type cudaPlan struct {
	tensors []cudaTensor
	full    bool
	need    memoryNeed
	// free and total device memory in bytes (0: unknown, not checked).
	free, total int64
	device      string // the backend's name, for the messages
}

// cudaRuns reports whether CUDA has a kernel for t's use in the graph,
// and if not, why, in words for an error message.
func cudaRuns(t cudaTensor) (ok bool, why string) {
	if t.outProd && t.typ != gguf.F32 {
		cpu := "the CPU fallback would copy it to the host for every pass"
		if t.typ == gguf.F16 || t.typ == gguf.BF16 {
			cpu = "the CPU has no out_prod kernel for it either, so the pass would abort"
		}
		return false, fmt.Sprintf("%s is %v, and CUDA's out_prod (the backward of every frozen matrix) multiplies F32 only: %s", t.name, t.typ, cpu)
	}
	return true, ""
}

// checkCUDA refuses a plan the device cannot run, naming the setting
// that works. The first type refusal is reported with the count of the
// others (a quantized model has hundreds of matrices of one type).
func checkCUDA(p cudaPlan) error {
	var first string
	n := 0
	for _, t := range p.tensors {
		if ok, why := cudaRuns(t); !ok {
			if n == 0 {
				first = why
			}
			n++
		}
	}
	if n > 0 {
		more := ""
		if n > 1 {
			more = fmt.Sprintf(" (and %d more tensors like it)", n-1)
		}
		return fmt.Errorf("train: device cuda: %s%s; hold the base weights in F32 on the device (dequantize_base: true in the train section) or train on the CPU (device: cpu)", first, more)
	}
	return checkDeviceMemory(p)
}

// checkDeviceMemory refuses a plan whose weights, full training's
// moments and gradients, and one pass's logits do not fit the device's
// free memory. Like checkMemory it leaves activations out, so a refusal
// is certain to be right.
func checkDeviceMemory(p cudaPlan) error {
	need := p.need.total()
	if p.free <= 0 || need <= p.free {
		return nil
	}
	parts := []string{fmt.Sprintf("the model's weights in F32 (%s)", sysmem.ByteSize(p.need.weights))}
	if p.need.optimizer > 0 {
		parts = append(parts, fmt.Sprintf("AdamW's moments and the gradients of full training (%s)", sysmem.ByteSize(p.need.optimizer)))
	}
	parts = append(parts, fmt.Sprintf("one pass's logits and their gradient (%s)", sysmem.ByteSize(p.need.logits)))
	var fix []string
	if p.full {
		fix = append(fix, "train a LoRA adapter instead of every weight (full: false)")
	}
	if p.need.logits > 0 && need-p.need.logits+p.need.logits/8 <= p.free {
		fix = append(fix, "lower batch_tokens in the train section")
	}
	fix = append(fix, "train on the CPU (device: cpu), which holds a quantized model in its own type", "use a smaller model")
	dev := p.device
	if dev == "" {
		dev = "the device"
	}
	return fmt.Errorf("train: device cuda: %s need about %s, more than the %s free on %s (of %s): %s",
		joinAnd(parts), sysmem.ByteSize(need), sysmem.ByteSize(p.free), dev, sysmem.ByteSize(p.total), strings.Join(fix, ", or "))
}

// checkCUDA checks a CUDA trainer's declared (not yet allocated) base
// weights against the device; on the CPU it does nothing.
func (t *Trainer) checkCUDA(fills []fill) error {
	if t.opts.Device != "cuda" {
		return nil
	}
	p := cudaPlan{full: t.opts.Full, need: t.memoryNeed(fills), device: t.backends[0].Name()}
	// The backward multiplies by every matrix with out_prod: frozen ones
	// for the input gradient, and in full mode the parameters as well.
	mats := map[llamacpp.Tensor]bool{t.w.output: true}
	for _, l := range t.w.layers {
		for _, m := range l.mat {
			mats[m] = true
		}
	}
	for _, fl := range fills {
		p.tensors = append(p.tensors, cudaTensor{name: fl.info.Name, typ: gguf.TensorType(fl.t.Type), outProd: mats[fl.t]})
	}
	// Unknown memory (an error) leaves the allocation to try.
	p.free, p.total, _ = t.backends[0].Memory()
	return checkCUDA(p)
}
