package train

import (
	"fmt"
	"strings"

	"github.com/omar-selfplay/omar/internal/sysmem"
	"github.com/omar-selfplay/omar/llamacpp"
)

// availableMemory is what the host can still give this process; tests
// replace it.
var availableMemory = sysmem.Available

// memoryNeed is what a trainer allocates on the CPU that grows with the
// model: the base weights as it holds them (F32 or the file's type), the
// transposed copies of the frozen matrices (see declareTransposes), in
// full mode AdamW's two moments and the gradient of every weight, and
// the logits of one pass with their gradient (BatchTokens × vocabulary).
// Activations and the LoRA parameters are left out, so the sum errs on
// the low side: a refusal is certain to be right.
type memoryNeed struct {
	weights, transposes, optimizer, logits int64
}

func (m memoryNeed) total() int64 { return m.weights + m.transposes + m.optimizer + m.logits }

// memoryNeed adds up the trainer's allocations once the weights (and
// their transposes) are declared.
func (t *Trainer) memoryNeed(fills []fill) memoryNeed {
	var m memoryNeed
	for _, fl := range fills {
		m.weights += int64(llamacpp.Nbytes(fl.t))
	}
	for _, wT := range t.wT {
		m.transposes += int64(llamacpp.Nbytes(wT))
	}
	if t.opts.Full {
		m.optimizer = 3 * m.weights // F32 in full mode
	}
	m.logits = 2 * 4 * int64(t.opts.BatchTokens) * int64(t.hp.nVocab)
	return m
}

// checkMemory refuses a trainer whose weights would not fit the memory
// available, before anything is allocated: the kernel would otherwise
// kill the process partway through loading, or swap it to a crawl. The
// refusal names what would make it fit. On CUDA the weights live in the
// device's memory, which is not checked here.
func checkMemory(need memoryNeed, available func() (int64, string, error)) error {
	avail, source, err := available()
	if err != nil || avail <= 0 {
		return nil // unknown: let the allocation try
	}
	if need.total() <= avail {
		return nil
	}
	parts := []string{fmt.Sprintf("the model's weights (%s)", sysmem.ByteSize(need.weights))}
	if need.transposes > 0 {
		parts = append(parts, fmt.Sprintf("their transposed copies for the backward pass (%s)", sysmem.ByteSize(need.transposes)))
	}
	if need.optimizer > 0 {
		parts = append(parts, fmt.Sprintf("AdamW's moments and the gradients of full training (%s)", sysmem.ByteSize(need.optimizer)))
	}
	parts = append(parts, fmt.Sprintf("one pass's logits and their gradient (%s)", sysmem.ByteSize(need.logits)))
	var fix string
	switch {
	case need.transposes > 0 && need.total()-need.transposes <= avail:
		fix = "set out_prod_backward: true in the train section to train without the copies (a slower backward on the CPU), or free memory"
	case need.total()-need.logits+need.logits/8 <= avail:
		fix = "lower batch_tokens in the train section, or free memory"
	case need.optimizer > 0: // full training
		fix = "train a LoRA adapter instead of every weight (full: false), use a smaller model, or free memory"
	default:
		fix = "use a smaller model or free memory"
	}
	return fmt.Errorf("train: %s need about %s, more than the %s available (%s): %s",
		joinAnd(parts), sysmem.ByteSize(need.total()), sysmem.ByteSize(avail), source, fix)
}

// joinAnd joins phrases as a sentence lists them: "a, b and c".
func joinAnd(parts []string) string {
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}
