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
// the logits of one pass with their gradient (BatchTokens × vocabulary,
// at most the activation budget).
// Activations and the LoRA parameters are left out, so the sum errs on
// the low side: a refusal is certain to be right.
//
// transposesQ8 is what the copies would take as Q8_0 blocks (the copies
// Q8_0 can hold: rows a multiple of 32), for a refusal to name
// backward_type: q8_0 where F32 copies are what does not fit.
type memoryNeed struct {
	weights, transposes, optimizer, logits int64
	transposesQ8                           int64
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
		n := int64(llamacpp.Nbytes(wT))
		m.transposes += n
		if wT.Type == llamacpp.TypeF32 && wT.Ne[0]%32 == 0 {
			n = n / 4 / 32 * 34 // Q8_0: 32 values in 34 bytes
		}
		m.transposesQ8 += n
	}
	if t.opts.Full {
		m.optimizer = 3 * m.weights // F32 in full mode
	}
	// A pass over more rows than the activation budget holds runs its
	// output layer in chunks (segment.go).
	m.logits = min(2*4*int64(t.opts.BatchTokens)*int64(t.hp.nVocab), t.activationBudget())
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
	case need.transposesQ8 < need.transposes && need.total()-need.transposes+need.transposesQ8 <= avail:
		fix = fmt.Sprintf("set backward_type: q8_0 in the train section (Q8_0 copies, %s; gradients within a few percent of the F32 copies'), or out_prod_backward: true to train without the copies (a slower backward on the CPU), or free memory",
			sysmem.ByteSize(need.transposesQ8))
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

// processOverhead is the memory of the process beyond the trainer's
// buffers and a pass's tensors: the Go runtime, the llama.cpp libraries,
// graph metadata and the allocator's slack. Measured on the qwen3-0.6b
// stand-in (docs/results/2026-12-07-training-memory.md).
const processOverhead = 300 << 20

// MemoryPlan is a prediction of the memory a pass over sequences takes, made
// from the graphs it will run before any of their memory is allocated.
type MemoryPlan struct {
	// Static is what the trainer holds throughout: the base weights,
	// their transposed copies, the adapter (or trained weights), the
	// gradients and AdamW's moments.
	Static int64
	// Compute is the largest compute buffer of the pass's graphs (see
	// graphBytes): the activations a graph keeps for its backward, the
	// vocabulary-sized tensors of the output layer.
	Compute int64
	// Host is the pass's Go memory: the layers' inputs a segmented
	// training pass keeps, the gradient at a layer boundary, the masks.
	Host int64
	// Overhead is the process's fixed share (processOverhead).
	Overhead int64
	// Tokens is the longest padded sequence of the pass; Segmented tells
	// whether it runs one layer per graph (segment.go).
	Tokens    int
	Segmented bool
}

// Total is the predicted peak resident memory of the process.
func (m MemoryPlan) Total() int64 { return m.Static + m.Compute + m.Host + m.Overhead }

// staticBytes is the trainer's allocated buffers.
func (t *Trainer) staticBytes() int64 {
	return int64(t.wbuf.Size() + t.pbuf.Size() + t.gbuf.Size())
}

// PlanPasses predicts the memory of the passes a training step (train) or
// a scoring pass (Evaluate) would run over seqs: the largest of them. It
// builds the graphs (metadata only) and allocates none of their memory.
func (t *Trainer) PlanPasses(seqs []Sequence, train bool) (MemoryPlan, error) {
	if err := t.validate(seqs); err != nil {
		return MemoryPlan{}, err
	}
	idx := make([]int, len(seqs))
	for i := range idx {
		idx[i] = i
	}
	var worst MemoryPlan
	for _, p := range t.plan(seqs, idx) {
		m, err := t.planPass(p, train, t.ppo)
		if err != nil {
			return MemoryPlan{}, err
		}
		if m.Total() > worst.Total() {
			worst = m
		}
	}
	return worst, nil
}

// planPass predicts the memory of one pass (a training pass of obj when
// train, else a scoring pass).
func (t *Trainer) planPass(p pass, train bool, obj *Objective) (MemoryPlan, error) {
	m := MemoryPlan{Static: t.staticBytes(), Overhead: processOverhead, Tokens: p.t, Segmented: t.segmented(p, train)}
	B, T, E := len(p.seqs), p.t, int64(t.hp.nEmbd)
	N := int64(B * T)
	blocks := t.attnBlocks(T)
	// The masks seqDataOf makes: the T×T one, or the blocks' rows of it.
	var masks int64
	if len(blocks) == 0 {
		masks = int64(T) * int64(T) * 4
	}
	from := 0
	for _, to := range blocks {
		masks += int64(to) * int64(to-from) * 4
		from = to
	}
	m.Host = 8*N + masks
	if !m.Segmented {
		kind := kindPolicy
		if train {
			kind = kindTrain
		}
		var o *Objective
		if train {
			o = obj
		}
		b, err := t.graph(p.key(kind, o))
		if err != nil {
			return MemoryPlan{}, err
		}
		m.Compute = graphBytes(b.g)
		if b.lastSelected {
			m.Host += int64(b.nRows) * int64(b.nSel) * 4
		}
		return m, nil
	}
	k := min(p.k, t.segmentRows())
	L := t.hp.nLayer
	keys := []segKey{
		{kind: segHead, head: kindPolicy, b: B, t: T, k: max(bucket(k), 32)},
		{kind: segForward, layer: L - 1, adapterOn: true, b: B, t: T},
	}
	states := int64(2)
	if train {
		keys[0].head, keys[0].obj = kindTrain, obj
		keys = append(keys, segKey{kind: segQKV, layer: L - 1}, segKey{kind: segQKVGrad, layer: L - 1},
			segKey{kind: segAttn}, segKey{kind: segOut, layer: L - 1})
		for i := range t.attnGroups(B, T) {
			keys = append(keys, segKey{kind: segAttnGrad, layer: i})
		}
		states = int64(L) + 1 // the layers' inputs and the boundary gradient
		m.Host += t.attnStateBytes(B, T)
	}
	for _, key := range keys {
		key.b, key.t = B, T
		if key.kind != segHead {
			key.adapterOn = true
		}
		b, err := t.segGraph(key)
		if err != nil {
			return MemoryPlan{}, err
		}
		var ext []llamacpp.Tensor
		if t.attn != nil {
			ext = t.attn.tensors()
		}
		m.Compute = max(m.Compute, graphBytes(b.g, ext...))
	}
	m.Host += states*E*N*4 + 2*E*int64(k)*4
	return m, nil
}

// checkPass refuses a pass whose predicted memory is more than the host can
// still give this process, before its graphs are allocated, naming the
// longest sequence that fits and the settings that lower the need.
func (t *Trainer) checkPass(p pass, train bool, obj *Objective) error {
	if t.opts.Device == "cuda" {
		return nil
	}
	avail, source, err := availableMemory()
	if err != nil || avail <= 0 {
		return nil // unknown: let the allocation try
	}
	m, err := t.planPass(p, train, obj)
	if err != nil {
		return err
	}
	// The scheduler's buffer is already held (and counted in the host's
	// available memory): only growth beyond it is new.
	held := int64(t.sched.BufferSize(t.backends[len(t.backends)-1]))
	need := max(m.Compute-held, 0) + m.Host
	if need <= avail {
		return nil
	}
	what := "a scoring pass"
	if train {
		what = "a training pass"
	}
	fix := "free memory"
	frac := float64(p.k) / float64(p.t)
	if fit := t.longestFitting(train, obj, frac, avail, held, false); fit > 0 {
		fix = fmt.Sprintf("the longest sequence that fits is about %d tokens: shorten the episodes, or free memory", fit)
	}
	if train && !m.Segmented && !t.opts.Full && t.segmentMode == 0 {
		if fit := t.longestFitting(train, obj, frac, avail, held, true); fit > 0 {
			fix += fmt.Sprintf("; or lower activation_mb (now %d) below this pass's %d MiB of activations, so that it runs one layer at a time: then sequences of about %d tokens fit",
				t.activationBudget()>>20, int64(t.hp.nLayer)*t.layerActivations(len(p.seqs), p.t)>>20, fit)
		}
	}
	return fmt.Errorf("train: %s over %d sequence(s) of %d tokens needs about %s more (activations %s, layer inputs and masks %s), more than the %s available (%s): %s",
		what, len(p.seqs), p.t, sysmem.ByteSize(need), sysmem.ByteSize(m.Compute), sysmem.ByteSize(m.Host), sysmem.ByteSize(avail), source, fix)
}

// longestFitting is the longest single sequence (a multiple of 32 tokens,
// the share frac of them trained) whose pass needs at most avail bytes beyond the
// scheduler's held buffer, or 0 when none does; segmented plans every pass
// one layer at a time. It plans on graphs built for the purpose and freed,
// leaving the cache of the pass that failed alone.
func (t *Trainer) longestFitting(train bool, obj *Objective, frac float64, avail, held int64, segmented bool) int {
	fits := func(T int) bool {
		p := pass{seqs: []int{0}, t: T, k: max(bucket(int(frac*float64(T))), 32)}
		saved, attn, mode := t.segCache, t.attn, t.segmentMode
		t.segCache, t.attn = nil, nil
		if segmented {
			t.segmentMode = 1
		}
		defer func() {
			for _, b := range t.segCache {
				b.free()
			}
			if t.attn != nil {
				t.attn.free()
			}
			t.segCache, t.attn, t.segmentMode = saved, attn, mode
		}()
		m, err := t.planPass(p, train, obj)
		return err == nil && max(m.Compute-held, 0)+m.Host <= avail
	}
	// Gallop up from one block, then bisect: the probes stay near the
	// answer, and a one-graph pass's graphs grow with the square of T.
	lo, hi := 0, 1
	for hi <= t.hp.nCtx/32 && fits(hi*32) {
		lo, hi = hi, 2*hi
	}
	hi = min(hi-1, t.hp.nCtx/32)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if fits(mid * 32) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo * 32
}

// CheckSequence refuses, before anything of a pass is allocated, a
// sequence of n tokens, every one trained, that a training step could not
// run in the memory the host can still give: the check a caller runs once
// on its longest sequence before it starts (a scoring pass needs less).
// The error names the longest length that fits.
func (t *Trainer) CheckSequence(n int) error {
	if n < 2 {
		return nil
	}
	T := bucket(n)
	p := pass{seqs: []int{0}, t: T, k: T}
	if err := t.checkPass(p, true, t.ppo); err != nil {
		return err
	}
	return nil
}
