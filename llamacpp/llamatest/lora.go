package llamatest

import (
	"fmt"
	"math/rand/v2"

	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/model"
)

// RandomLoRA returns a LoRA adapter for a model of configuration c (see
// model.PresetConfig) whose A and B are both random, so that, unlike a
// freshly initialised adapter (B = 0), it changes the logits. Targets
// default to attn_q, attn_v and ffn_up of every block.
func RandomLoRA(c model.Config, rank int, alpha, scale float32, seed uint64, targets ...string) (gguf.LoRA, error) {
	if len(targets) == 0 {
		targets = []string{"attn_q", "attn_v", "ffn_up"}
	}
	q, kv := c.HeadCount*c.HeadDim, c.HeadCountKV*c.HeadDim
	dims := map[string][2]int{ // n_in, n_out
		"attn_q": {c.EmbeddingLength, q}, "attn_k": {c.EmbeddingLength, kv}, "attn_v": {c.EmbeddingLength, kv},
		"attn_output": {q, c.EmbeddingLength}, "ffn_gate": {c.EmbeddingLength, c.FeedForwardLength},
		"ffn_up": {c.EmbeddingLength, c.FeedForwardLength}, "ffn_down": {c.FeedForwardLength, c.EmbeddingLength},
	}
	r := rand.New(rand.NewPCG(seed, 0x6c6f7261))
	randn := func(n int) []float32 {
		d := make([]float32, n)
		for i := range d {
			d[i] = float32(r.NormFloat64()) * scale
		}
		return d
	}
	l := gguf.LoRA{Arch: c.Arch, Alpha: alpha}
	for b := range c.BlockCount {
		for _, t := range targets {
			d, ok := dims[t]
			if !ok {
				return l, fmt.Errorf("llamatest: unknown lora target %q", t)
			}
			l.Tensors = append(l.Tensors, gguf.LoRATensor{
				Base: fmt.Sprintf("blk.%d.%s.weight", b, t), In: d[0], Out: d[1], Rank: rank,
				A: randn(rank * d[0]), B: randn(d[1] * rank),
			})
		}
	}
	return l, l.Validate()
}
