package train

import (
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/gguf"
)

// TestCheckCUDA: the refusals of what CUDA cannot run, each naming the
// setting that works, and the plans it runs, without a GPU (the rules
// are pure).
func TestCheckCUDA(t *testing.T) {
	const gib = int64(1) << 30
	f32 := []cudaTensor{
		{name: "token_embd.weight", typ: gguf.F32}, // untied: looked up only
		{name: "output.weight", typ: gguf.F32, outProd: true},
		{name: "blk.0.attn_q.weight", typ: gguf.F32, outProd: true},
		{name: "blk.0.attn_norm.weight", typ: gguf.F32},
	}
	with := func(ts ...cudaTensor) []cudaTensor { return append(append([]cudaTensor{}, f32...), ts...) }
	lora := memoryNeed{weights: 2 * gib, logits: gib / 2}
	for _, tc := range []struct {
		name string
		plan cudaPlan
		want []string // substrings of the error; nil: no error
	}{
		{"F32 LoRA fits", cudaPlan{tensors: f32, need: lora, free: 70 * gib, total: 80 * gib}, nil},
		{"memory unknown", cudaPlan{tensors: f32, need: lora}, nil},
		{"norms of any type are no out_prod operand", cudaPlan{tensors: with(cudaTensor{name: "blk.0.ffn_norm.weight", typ: gguf.F16})}, nil},
		{"embedding lookup only (untied), quantized", cudaPlan{tensors: []cudaTensor{{name: "token_embd.weight", typ: gguf.Q4_K}, f32[1], f32[2]}}, nil},
		{"F16 matrix", cudaPlan{tensors: with(cudaTensor{name: "blk.1.ffn_up.weight", typ: gguf.F16, outProd: true})},
			[]string{"blk.1.ffn_up.weight is F16", "F32 only", "would abort", "dequantize_base: true", "device: cpu"}},
		{"BF16 matrix", cudaPlan{tensors: with(cudaTensor{name: "output.weight", typ: gguf.BF16, outProd: true})},
			[]string{"output.weight is BF16", "would abort"}},
		{"quantized matrices, counted", cudaPlan{tensors: with(
			cudaTensor{name: "blk.0.attn_k.weight", typ: gguf.Q8_0, outProd: true},
			cudaTensor{name: "blk.0.attn_v.weight", typ: gguf.Q8_0, outProd: true},
			cudaTensor{name: "blk.0.attn_output.weight", typ: gguf.Q4_K, outProd: true})},
			[]string{"blk.0.attn_k.weight is Q8_0", "copy it to the host for every pass", "and 2 more tensors", "dequantize_base: true"}},
		{"types are refused before memory", cudaPlan{tensors: with(cudaTensor{name: "blk.0.ffn_down.weight", typ: gguf.Q8_0, outProd: true}), need: lora, free: gib},
			[]string{"blk.0.ffn_down.weight is Q8_0"}},
		{"LoRA too large", cudaPlan{tensors: f32, need: lora, free: gib, total: 16 * gib, device: "CUDA0"},
			[]string{"the model's weights in F32 (2.0 GiB)", "more than the 1.0 GiB free on CUDA0 (of 16.0 GiB)", "device: cpu", "smaller model"}},
		{"logits are what does not fit", cudaPlan{tensors: f32, need: memoryNeed{weights: gib, logits: 4 * gib}, free: 2 * gib},
			[]string{"one pass's logits", "lower batch_tokens"}},
		{"full training too large", cudaPlan{tensors: f32, full: true, need: memoryNeed{weights: 20 * gib, optimizer: 60 * gib, logits: gib}, free: 70 * gib},
			[]string{"AdamW's moments", "full: false", "device: cpu"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkCUDA(tc.plan)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got no error, want one containing %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %q, want it to contain %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "train: device cuda: ") {
				t.Errorf("got %q, want it to start with the setting it refuses", err)
			}
		})
	}
}

// TestCheckCUDAOnCPU: a CPU trainer is not checked against CUDA's rules
// (it holds quantized matrices in their type, which the CPU's out_prod
// or the transposed copies handle).
func TestCheckCUDAOnCPU(t *testing.T) {
	tr := &Trainer{opts: Options{}.Defaults()}
	if err := tr.checkCUDA(nil); err != nil {
		t.Errorf("got %v, want nil on the CPU", err)
	}
}
