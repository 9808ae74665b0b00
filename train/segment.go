package train

import (
	"context"
	"fmt"
	"maps"

	"github.com/omar-selfplay/omar/llamacpp"
)

// A segmented pass runs the model one layer per graph, so that its memory
// grows linearly with the sequence instead of holding every layer's
// activations (and their T×T attention scores) for one backward pass:
//
//   - forward: layer l's graph maps its input x_l [E, N] (layer 0: the
//     tokens) to x_{l+1}; a training pass keeps the inputs in Go memory.
//   - output layer: the final norm, logits, logprobs, values and the
//     objective run over chunks of the selected rows (segmentRows), so the
//     vocabulary-sized tensors are bounded whatever the sequence.
//   - backward: from the last layer down, layer l is recomputed from x_l
//     and differentiated against g_{l+1} = ∂loss/∂x_{l+1} by differentiating
//     sum(x_{l+1} ⊙ g_{l+1}), whose backward is the chain rule at the
//     boundary: it adds the layer's parameter gradients to the accumulators
//     and yields g_l in the accumulator of its input. A layer takes three
//     such graphs (layerBackward): the rest of the layer after its
//     attention, the attention one group of query blocks at a time
//     (attnGroups; by its closed form, attnGrad, not by ggml's automatic
//     differentiation), and the queries, keys and values, with the tensors
//     between them in attnState; so no graph holds more than one group's
//     attention scores, and a pass's memory grows linearly with the sequence
//     (but for the T²/2 block masks, small below 16k tokens).
//
// The same sums as the one-graph pass, in another order: the results agree
// to float rounding (segment_test.go). The last layer runs on every row (the
// one-graph pass may run it on the selected rows alone, see
// built.lastSelected). Full-parameter training, whose embeddings and output
// layer are trained, keeps the one-graph pass. Measurements:
// docs/results/2026-12-07-training-memory.md.

// defaultActivationMB is Options.ActivationMB's default.
const defaultActivationMB = 1024

// activationBudget is Options.ActivationMB in bytes.
func (t *Trainer) activationBudget() int64 {
	mb := t.opts.ActivationMB
	if mb == 0 {
		mb = defaultActivationMB
	}
	return int64(mb) << 20
}

// segKind is what a segment graph computes.
type segKind int

const (
	segForward  segKind = iota // layer, no gradient
	segGrad                    // layer, forward and backward (one graph: sizes the one-graph pass)
	segHead                    // final norm and output layer: scoring or an objective
	segQKV                     // a layer's queries, keys and values, into attnState
	segQKVGrad                 // the same, differentiated against attnState's dq, dk, dv
	segAttn                    // attention of every query block, into attnState.kqv
	segAttnGrad                // attention of one group of query blocks, differentiated
	segOut                     // a layer after its attention, differentiated
)

// segKey identifies a segment graph: for a layer, its index and whether
// the adapter is on; for the output layer, what it computes (head, obj) on
// k rows; and the pass's shape, b sequences padded to t.
type segKey struct {
	kind      segKind
	layer     int
	adapterOn bool
	head      graphKind
	obj       *Objective
	b, t, k   int
}

// segGraph returns the cached segment graph for key, building it on first
// use. The cache holds the graphs of one pass shape: a layer graph per
// layer and kind, and the output layer's.
func (t *Trainer) segGraph(key segKey) (*built, error) {
	if b, ok := t.segCache[key]; ok {
		return b, nil
	}
	for k, b := range t.segCache {
		if k.b != key.b || k.t != key.t {
			b.free()
			delete(t.segCache, k)
		}
	}
	if t.attn != nil && (t.attn.b != key.b || t.attn.t != key.t) {
		t.attn.free()
		t.attn = nil
	}
	var b *built
	var err error
	switch key.kind {
	case segHead:
		b, err = t.buildHead(key)
	case segForward, segGrad:
		b, err = t.buildLayer(key)
	default:
		b, err = t.buildAttnPart(key)
	}
	if err != nil {
		return nil, err
	}
	if t.segCache == nil {
		t.segCache = map[segKey]*built{}
	}
	t.segCache[key] = b
	return b, nil
}

// layerGraphSize bounds the nodes of one layer's graph, forward and
// backward (see graphSize).
func (t *Trainer) layerGraphSize(T int) int {
	return 2048 + 1024 + 64*len(t.attnBlocks(T))
}

// buildLayer builds layer key.layer on key.b sequences padded to key.t:
// from the tokens (layer 0) or the input "x" [E, N] to the output. A
// segGrad graph also takes "g_out" [E, N], the loss's gradient at the
// output, and accumulates the gradient at its input into "dx".
func (t *Trainer) buildLayer(key segKey) (*built, error) {
	grads := key.kind == segGrad
	size := t.layerGraphSize(key.t)
	ctx, err := llamacpp.NewContext(2*size, 1, size, grads)
	if err != nil {
		return nil, err
	}
	b := &built{ctx: ctx, size: size, b: key.b, t: key.t, nRows: key.b * key.t, grads: grads}
	g := ctx.NewGraph(size, grads)
	b.g = g
	if grads && t.wT != nil {
		b.known = maps.Clone(t.wT)
	}
	E, N := int64(t.hp.nEmbd), int64(b.nRows)
	input := func(name string) llamacpp.Tensor {
		x := ctx.NewTensor(llamacpp.TypeF32, E, N)
		llamacpp.SetInput(llamacpp.SetName(x, name))
		return x
	}
	b.blocks = t.attnBlocks(key.t)
	t.blockInputs(ctx, b)
	tokens := t.seqInputs(ctx, b, key.b, key.t)
	var x llamacpp.Tensor
	if key.layer == 0 {
		x = ctx.GetRows(t.w.tokEmbd, tokens)
	} else {
		x = input("x")
		if grads {
			llamacpp.SetParam(x)
		}
		b.xIn = x
	}
	out := t.layer(ctx, b, key.layer, x, key.b, key.t, key.adapterOn)
	if !grads {
		b.out = out
		llamacpp.SetOutput(llamacpp.SetName(out, "out"))
		g.BuildForward(out)
		return b, nil
	}
	b.gOut = input("g_out")
	b.loss = ctx.Sum(ctx.Mul(out, b.gOut))
	llamacpp.SetLoss(b.loss)
	llamacpp.SetOutput(llamacpp.SetName(b.loss, "loss"))
	g.BuildForward(b.loss)
	for _, x := range b.order {
		g.BuildForward(x)
	}
	var extra map[llamacpp.Tensor]llamacpp.Tensor
	if b.xIn != nil {
		b.dx = input("dx")
		llamacpp.SetOutput(b.dx)
		extra = map[llamacpp.Tensor]llamacpp.Tensor{b.xIn: b.dx}
	}
	t.backward(ctx, g, b.loss, extra)
	if err := b.rewriteBackward(); err != nil {
		ctx.Free()
		return nil, err
	}
	return b, nil
}

// buildHead builds the final norm and the output layer on key.k rows of
// the last layer's output, input "x" [E, K]: a scoring graph's logprobs
// (and values), or an objective with its backward, which accumulates the
// gradient at the input into "dx".
func (t *Trainer) buildHead(key segKey) (*built, error) {
	grads := key.head == kindTrain
	size := 4096
	ctx, err := llamacpp.NewContext(2*size, 1, size, grads)
	if err != nil {
		return nil, err
	}
	K := key.k
	b := &built{ctx: ctx, size: size, b: key.b, t: key.t, nRows: key.b * key.t, nSel: K, grads: grads, lastSelected: true}
	g := ctx.NewGraph(size, grads)
	b.g = g
	if grads && t.wT != nil {
		b.known = maps.Clone(t.wT)
	}
	b.tgt = ctx.NewTensor(llamacpp.TypeI32, int64(K))
	llamacpp.SetInput(llamacpp.SetName(b.tgt, "tgt"))
	x := ctx.NewTensor(llamacpp.TypeF32, int64(t.hp.nEmbd), int64(K))
	llamacpp.SetInput(llamacpp.SetName(x, "x"))
	if grads {
		llamacpp.SetParam(x)
	}
	b.xIn = x
	hidden := ctx.Mul(ctx.RMSNorm(x, t.hp.eps), t.w.outNorm)
	if err := t.outputs(ctx, g, b, key.head, key.obj, hidden, K); err != nil {
		ctx.Free()
		return nil, err
	}
	if key.head == kindTrain {
		b.dx = ctx.NewTensor(llamacpp.TypeF32, int64(t.hp.nEmbd), int64(K))
		llamacpp.SetInput(llamacpp.SetName(b.dx, "dx"))
		llamacpp.SetOutput(b.dx)
		t.backward(ctx, g, b.loss, map[llamacpp.Tensor]llamacpp.Tensor{x: b.dx})
		if err := b.rewriteBackward(); err != nil {
			ctx.Free()
			return nil, err
		}
	}
	return b, nil
}

// segmentRows is the most selected rows of one output-layer graph of a
// segmented pass: about eight [V, rows] tensors of F32 (logits, their
// exponentials, gradients) within the activation budget.
func (t *Trainer) segmentRows() int {
	if t.segRows > 0 {
		return t.segRows
	}
	rows := t.activationBudget() / (int64(t.hp.nVocab) * 4 * 8)
	return int(max(rows/32*32, 32))
}

// segmented tells whether pass p runs layer by layer: always or never when
// a test says so (segmentMode), never in full-parameter training or on
// CUDA, and otherwise when the one-graph pass would keep more than the
// activation budget: a training pass's saved activations of every layer,
// or the output layer's logits of any pass.
func (t *Trainer) segmented(p pass, train bool) bool {
	switch {
	case t.segmentMode > 0:
		return true
	case t.segmentMode < 0 || t.opts.Full || t.opts.Device == "cuda":
		return false
	}
	if p.k > t.segmentRows() {
		return true
	}
	if !train {
		return false
	}
	return int64(t.hp.nLayer)*t.layerActivations(len(p.seqs), p.t) > t.activationBudget()
}

// layerActivations is the memory a layer's training graph holds at its
// peak for b sequences padded to T (graphBytes of the layer's graph).
func (t *Trainer) layerActivations(B, T int) int64 {
	lg, err := t.segGraph(segKey{kind: segGrad, layer: t.hp.nLayer - 1, adapterOn: true, b: B, t: T})
	if err != nil {
		return 0 // the pass will report the error when it builds its graph
	}
	return graphBytes(lg.g)
}

// segForwardPass runs the layers of pass p one graph at a time and returns
// the layers' inputs x_1 … x_L and the last layer's output x_{L+1}, each
// [E, N] (index l holds x_l; index 0, the embeddings, is nil). Without
// keep only the last output is returned (at index L). The states share one
// allocation (two without keep), so that the pass leaves no garbage for
// Go's collector to let the heap grow by.
func (t *Trainer) segForwardPass(ctx context.Context, d *seqData, B, T int, adapterOn, keep bool) ([][]float32, error) {
	L, n := t.hp.nLayer, B*T*t.hp.nEmbd
	xs := make([][]float32, L+1)
	slots := 2
	if keep {
		slots = L
	}
	all := make([]float32, slots*n)
	var x []float32
	for l := range L {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b, err := t.segGraph(segKey{kind: segForward, layer: l, adapterOn: adapterOn, b: B, t: T})
		if err != nil {
			return nil, err
		}
		if err := t.run(b, func() {
			t.setSeq(b, d)
			if b.xIn != nil {
				llamacpp.SetF32(b.xIn, x)
			}
		}); err != nil {
			return nil, err
		}
		slot := l % 2
		if keep {
			slot = l
		}
		out := all[slot*n : (slot+1)*n]
		llamacpp.GetF32(b.out, out)
		if keep && l > 0 {
			xs[l] = x
		}
		x = out
	}
	xs[L] = x
	return xs, nil
}

// chunks splits pass p's selected rows into passes of at most segmentRows
// rows each (its sequences and length), for the output-layer graphs.
func (t *Trainer) chunks(p pass) []pass {
	n := t.segmentRows()
	var out []pass
	for from := 0; from < len(p.sel); from += n {
		sub := p
		sub.sel = p.sel[from:min(from+n, len(p.sel))]
		sub.k = max(bucket(len(sub.sel)), 32)
		out = append(out, sub)
	}
	return out
}

// gatherRows copies the selected rows of x [E, N] into [E, k] (padding rows
// stay zero).
func gatherRows(x []float32, sel []int32, E, k int) []float32 {
	out := make([]float32, E*k)
	for i, r := range sel {
		copy(out[i*E:(i+1)*E], x[int(r)*E:(int(r)+1)*E])
	}
	return out
}

// scoreSegmented is score's pass p run layer by layer, writing into lps
// (and vals) like score.
func (t *Trainer) scoreSegmented(ctx context.Context, seqs []Sequence, p pass, kind graphKind, lps, vals [][]float32) error {
	B := len(p.seqs)
	d := t.seqDataOf(seqs, p, t.attnBlocks(p.t), len(t.attnBlocks(p.t)) == 0)
	xs, err := t.segForwardPass(ctx, d, B, p.t, kind != kindBase, false)
	if err != nil {
		return err
	}
	xL := xs[t.hp.nLayer]
	for _, si := range p.seqs {
		lps[si] = make([]float32, len(seqs[si].Tokens))
		if kind == kindPolicy {
			vals[si] = make([]float32, len(seqs[si].Tokens))
		}
	}
	E := t.hp.nEmbd
	for _, c := range t.chunks(p) {
		b, err := t.segGraph(segKey{kind: segHead, head: kind, b: B, t: p.t, k: c.k})
		if err != nil {
			return err
		}
		if err := t.run(b, func() {
			llamacpp.SetF32(b.xIn, gatherRows(xL, c.sel, E, c.k))
			t.setTargets(b, seqs, c)
		}); err != nil {
			return err
		}
		lp := make([]float32, b.nSel)
		llamacpp.GetF32(b.logprob, lp)
		var v []float32
		if kind == kindPolicy {
			v = make([]float32, b.nSel)
			llamacpp.GetF32(b.value, v)
		}
		for k := range c.sel {
			si, q := c.rowOf(k)
			lps[si][q+1] = lp[k]
			if v != nil {
				vals[si][q+1] = v[k]
			}
		}
	}
	return nil
}

// accumulateSegmented is accumulate's pass p run layer by layer: the
// forward keeping each layer's input, the objective over chunks of the
// selected rows, then every layer's backward from the last down.
func (t *Trainer) accumulateSegmented(ctx context.Context, obj *Objective, seqs []Sequence, p pass, wt map[int]float32, acc *accumulated) error {
	B, L, E := len(p.seqs), t.hp.nLayer, t.hp.nEmbd
	d := t.seqDataOf(seqs, p, t.attnBlocks(p.t), len(t.attnBlocks(p.t)) == 0)
	xs, err := t.segForwardPass(ctx, d, B, p.t, true, true)
	if err != nil {
		return err
	}
	// g is ∂loss/∂x at the current boundary, from the output layer down.
	g := make([]float32, len(xs[L]))
	for _, c := range t.chunks(p) {
		b, err := t.segGraph(segKey{kind: segHead, head: kindTrain, obj: obj, b: B, t: p.t, k: c.k})
		if err != nil {
			return err
		}
		if err := t.run(b, func() {
			llamacpp.SetF32(b.xIn, gatherRows(xs[L], c.sel, E, c.k))
			llamacpp.Zero(b.dx)
			t.setTargets(b, seqs, c)
			t.setTrain(b, seqs, c, wt)
		}); err != nil {
			return err
		}
		acc.add(b)
		dx := make([]float32, E*c.k)
		llamacpp.GetF32(b.dx, dx)
		for i, r := range c.sel {
			row := g[int(r)*E : (int(r)+1)*E]
			for j := range row {
				row[j] += dx[i*E+j]
			}
		}
	}
	xs[L] = nil
	groups := t.attnGroups(B, p.t)
	for l := L - 1; l >= 0; l-- {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := t.layerBackward(d, B, p.t, l, xs[l], g, groups); err != nil {
			return err
		}
		xs[l] = nil
	}
	return nil
}

// attnState holds the attention's tensors of a segmented training pass's
// current layer in a buffer of its own, [D, T, H, B] each (keys and values
// repeated for the query heads that share them): the graphs of the layer's
// backward read and accumulate into them in place, so that the attention
// can be differentiated one group of query blocks at a time without
// copying the whole layer's tensors in and out of every group's graph.
type attnState struct {
	ctx                            llamacpp.Context
	buf                            llamacpp.Buffer
	b, t                           int
	q, k, v, kqv, dq, dk, dv, dkqv llamacpp.Tensor
}

func (a *attnState) free() {
	if a.buf != 0 {
		a.buf.Free()
	}
	a.ctx.Free()
}

// tensors lists the state's tensors.
func (a *attnState) tensors() []llamacpp.Tensor {
	return []llamacpp.Tensor{a.q, a.k, a.v, a.kqv, a.dq, a.dk, a.dv, a.dkqv}
}

// alloc gives the tensors their memory, on the first pass that runs
// (graphs are built, and planned, before).
func (a *attnState) alloc(backend llamacpp.Backend) error {
	if a.buf != 0 {
		return nil
	}
	buf, err := backend.AllocContextTensors(a.ctx)
	if err != nil {
		return fmt.Errorf("train: attention tensors: %w", err)
	}
	a.buf = buf
	return nil
}

// attnStateBytes is the memory of an attnState for b sequences padded to T.
func (t *Trainer) attnStateBytes(B, T int) int64 {
	return 8 * int64(t.hp.headDim*t.hp.nHead) * int64(B*T) * 4
}

// attnStateFor returns the attention tensors for the shape (B, T),
// declaring them on first use (segGraph frees them with the graphs of
// another shape; layerBackward allocates them).
func (t *Trainer) attnStateFor(B, T int) (*attnState, error) {
	if t.attn != nil && t.attn.b == B && t.attn.t == T {
		return t.attn, nil
	}
	if t.attn != nil {
		t.attn.free()
		t.attn = nil
	}
	ctx, err := llamacpp.NewContext(16, 0, 0, false)
	if err != nil {
		return nil, err
	}
	a := &attnState{ctx: ctx, b: B, t: T}
	D, H := int64(t.hp.headDim), int64(t.hp.nHead)
	for i, p := range []*llamacpp.Tensor{&a.q, &a.k, &a.v, &a.kqv, &a.dq, &a.dk, &a.dv, &a.dkqv} {
		*p = llamacpp.SetName(ctx.NewTensor(llamacpp.TypeF32, D, int64(T), H, int64(B)), fmt.Sprintf("attn_state_%d", i))
	}
	t.attn = a
	return a, nil
}

// attnGroups splits the query blocks of a sequence padded to T into groups
// whose attention, differentiated, fits the activation budget: about three
// F32 scores per (head, query row, key) of the group. Each group is
// [from, to) in rows with its blocks' indices [first, last).
type attnGroup struct{ from, to, first, last int }

func (t *Trainer) attnGroups(B, T int) []attnGroup {
	blocks := t.attnBlocks(T)
	if blocks == nil {
		return []attnGroup{{0, T, 0, 0}}
	}
	rows := t.activationBudget() / (12 * int64(t.hp.nHead) * int64(T) * int64(B))
	if t.groupRows > 0 {
		rows = int64(t.groupRows)
	}
	var out []attnGroup
	cur := attnGroup{}
	from := 0
	for j, to := range blocks {
		if cur.last > cur.first && int64(to-cur.from) > rows {
			out = append(out, cur)
			cur = attnGroup{from: from, first: j}
		}
		cur.to, cur.last = to, j+1
		from = to
	}
	return append(out, cur)
}

// buildAttnPart builds the graphs of a layer's segmented backward: the
// queries, keys and values (segQKV, segQKVGrad), the attention
// (segAttn; segAttnGrad for the group key.layer), the rest of the layer
// (segOut). They read and write the shape's attnState.
func (t *Trainer) buildAttnPart(key segKey) (*built, error) {
	a, err := t.attnStateFor(key.b, key.t)
	if err != nil {
		return nil, err
	}
	grads := key.kind == segQKVGrad || key.kind == segOut
	size := t.layerGraphSize(key.t)
	ctx, err := llamacpp.NewContext(2*size, 1, size, grads)
	if err != nil {
		return nil, err
	}
	B, T := key.b, key.t
	b := &built{ctx: ctx, size: size, b: B, t: T, nRows: B * T, grads: grads}
	b.g = ctx.NewGraph(size, grads)
	if grads && t.wT != nil {
		b.known = maps.Clone(t.wT)
	}
	p := &attnPart{t: t, key: key, a: a, ctx: ctx, b: b, extra: map[llamacpp.Tensor]llamacpp.Tensor{}}
	p.tokens = t.seqInputs(ctx, b, B, T)
	switch key.kind {
	case segQKV:
		p.qkvForward()
		return b, nil
	case segQKVGrad:
		p.qkvLoss()
	case segAttn:
		p.attnForward()
		return b, nil
	case segAttnGrad:
		p.attnGrad()
		return b, nil
	case segOut:
		p.outLoss()
	}
	return p.differentiate()
}

// attnPart is one graph of a layer's segmented backward being built. A
// training graph's loss is the sum of its outputs times their given
// gradients (from attnState or the input "g_out"), so that backward
// yields the gradients of its inputs.
type attnPart struct {
	t      *Trainer
	key    segKey
	a      *attnState
	ctx    llamacpp.Context
	b      *built
	tokens llamacpp.Tensor
	// extra gives the gradient tensor that backward writes for an input.
	extra map[llamacpp.Tensor]llamacpp.Tensor
	loss  llamacpp.Tensor
}

// input is a new [n_embd, B·T] input tensor named name.
func (p *attnPart) input(name string) llamacpp.Tensor {
	x := p.ctx.NewTensor(llamacpp.TypeF32, int64(p.t.hp.nEmbd), int64(p.b.nRows))
	llamacpp.SetInput(llamacpp.SetName(x, name))
	return x
}

// layerInput is x_l: the embeddings of the tokens for layer 0, else the
// input "x", differentiated into "dx" by a training graph.
func (p *attnPart) layerInput() llamacpp.Tensor {
	if p.key.layer == 0 {
		return p.ctx.GetRows(p.t.w.tokEmbd, p.tokens)
	}
	x := p.input("x")
	if p.b.grads {
		llamacpp.SetParam(x)
	}
	p.b.xIn = x
	return x
}

func (p *attnPart) addLoss(x llamacpp.Tensor) {
	if p.loss == nil {
		p.loss = x
	} else {
		p.loss = p.ctx.Add(p.loss, x)
	}
}

// qkv is the layer's queries, keys and values.
func (p *attnPart) qkv() (q, k, v llamacpp.Tensor) {
	t, ctx, b, key := p.t, p.ctx, p.b, p.key
	x := p.layerInput()
	cur := ctx.Mul(ctx.RMSNorm(x, t.hp.eps), t.w.layers[key.layer].attnNorm)
	T, B := int64(key.t), int64(key.b)
	return t.qkv(ctx, b, key.layer, cur, cur, b.pos, T, T, B, key.adapterOn, true)
}

// qkvForward (segQKV) copies the queries, keys and values into attnState.
func (p *attnPart) qkvForward() {
	q, k, v := p.qkv()
	for _, c := range [][2]llamacpp.Tensor{{q, p.a.q}, {k, p.a.k}, {v, p.a.v}} {
		out := p.ctx.Cpy(c[0], c[1])
		llamacpp.SetOutput(out)
		p.b.g.BuildForward(out)
	}
}

// qkvLoss (segQKVGrad) takes the queries', keys' and values' gradients
// from attnState.
func (p *attnPart) qkvLoss() {
	ctx, a := p.ctx, p.a
	q, k, v := p.qkv()
	p.addLoss(ctx.Sum(ctx.Mul(q, a.dq)))
	p.addLoss(ctx.Sum(ctx.Mul(k, a.dk)))
	p.addLoss(ctx.Sum(ctx.Mul(v, a.dv)))
}

// attnForward (segAttn) computes the whole attention into attnState.
func (p *attnPart) attnForward() {
	t, ctx, b, a := p.t, p.ctx, p.b, p.a
	b.blocks = t.attnBlocks(p.key.t)
	t.blockInputs(ctx, b)
	var kqv llamacpp.Tensor
	if b.blocks != nil {
		kqv = t.blockedAttention(ctx, b, a.q, a.k, a.v)
	} else {
		kqv = b.attention(ctx, a.q, a.k, a.v, nil, nil, b.kqMask, t.hp.kqScale)
	}
	out := ctx.Cpy(kqv, a.kqv)
	llamacpp.SetOutput(out)
	b.g.BuildForward(out)
}

// attnGrad (segAttnGrad) differentiates the attention of one group of
// query blocks (the group key.layer), block by block, by its closed form
// rather than ggml's automatic differentiation: for block j's queries q
// [D, n] against keys k and values v [D, to] with the output's gradient g
// [D, n] (attnState.dkqv),
//
//	s  = softmax(scale·kᵀq + mask)             [to, n]
//	ds = soft_max_back(vᵀg, s)                 [to, n]
//	dq = k·ds,  dk = q·dsᵀ,  dv = g·sᵀ
//
// each a mul_mat on contiguous operands: five products a block, where the
// differentiated graph took six (the output, unused, and dv as an
// out_prod over the block's 64 query rows: 11% of a 1,024-token step's
// CPU time on two cores; docs/results/2026-12-07-backward-speed.md).
// dq is copied into its rows of attnState.dq (each query row belongs to one
// block); dk and dv are added into the first to rows of attnState.dk and
// .dv in place, each addition reading the previous one's result so that
// they run in order.
func (p *attnPart) attnGrad() {
	t, ctx, b, a := p.t, p.ctx, p.b, p.a
	B, T := p.key.b, p.key.t
	blocks := t.attnBlocks(T)
	gr := attnGroup{0, T, 0, 1}
	if blocks != nil {
		gr = t.attnGroups(B, T)[p.key.layer]
	}
	b.blockFirst = gr.first
	// Views of attnState where mul_mat reads its first operand (rows may
	// have gaps between them); contiguous copies where it reads its
	// second (tinyBLAS runs only on a contiguous one). kᵀ is copied once
	// for the group and each block reads its first keys.
	view := func(x llamacpp.Tensor, ne0, from, to int) llamacpp.Tensor {
		return ctx.View4D(x, [4]int64{int64(ne0), int64(to - from), x.Ne[2], x.Ne[3]}, [3]uintptr{x.Nb[1], x.Nb[2], x.Nb[3]}, uintptr(from)*x.Nb[1])
	}
	tr := func(x llamacpp.Tensor) llamacpp.Tensor { return ctx.Cont(ctx.Transpose(x)) }
	D := int(a.k.Ne[0])
	kT := ctx.Cont(ctx.Permute(a.k, 1, 0, 2, 3)) // [T, D, H, B]
	dk, dv := a.dk, a.dv
	var outs []llamacpp.Tensor
	from := gr.from
	for j := gr.first; j < gr.last; j++ {
		to, mask := T, b.kqMask
		if blocks != nil {
			to = blocks[j]
			mask = p.ctx.NewTensor(llamacpp.TypeF32, int64(to), int64(to-from))
			llamacpp.SetInput(llamacpp.SetName(mask, fmt.Sprintf("block_mask_%d", j)))
			b.blockMask = append(b.blockMask, mask)
		}
		q, g := p.rows(a.q, from, to), p.rows(a.dkqv, from, to) // [D, n, H, B]
		k, v := view(a.k, D, 0, to), view(a.v, D, 0, to)        // [D, to, H, B]
		s := ctx.SoftMaxExt(ctx.MulMat(k, q), mask, t.hp.kqScale, 0)
		ds := ctx.SoftMaxExtBack(ctx.MulMat(v, g), s, t.hp.kqScale)
		dq := ctx.MulMat(view(kT, to, 0, D), ds)
		outs = append(outs, ctx.Cpy(dq, view(a.dq, D, from, to)))
		dk = ctx.AccInplace(dk, ctx.MulMat(tr(q), tr(ds)), [3]uintptr{a.dk.Nb[1], a.dk.Nb[2], a.dk.Nb[3]}, 0)
		dv = ctx.AccInplace(dv, ctx.MulMat(tr(g), tr(s)), [3]uintptr{a.dv.Nb[1], a.dv.Nb[2], a.dv.Nb[3]}, 0)
		from = to
	}
	for _, x := range append(outs, dk, dv) {
		llamacpp.SetOutput(x)
		b.g.BuildForward(x)
	}
}

// rows is a contiguous copy of x's rows [from, to).
func (p *attnPart) rows(x llamacpp.Tensor, from, to int) llamacpp.Tensor {
	v := p.ctx.View4D(x, [4]int64{x.Ne[0], int64(to - from), x.Ne[2], x.Ne[3]}, [3]uintptr{x.Nb[1], x.Nb[2], x.Nb[3]}, uintptr(from)*x.Nb[1])
	return p.ctx.Reshape(p.ctx.Cont(v), v.Ne[:]...)
}

// outLoss (segOut) differentiates the rest of the layer, from the
// attention's output in attnState to the layer's output, whose gradient
// is the input "g_out".
func (p *attnPart) outLoss() {
	ctx, b, a := p.ctx, p.b, p.a
	x := p.layerInput()
	llamacpp.SetParam(a.kqv)
	p.extra[a.kqv] = a.dkqv
	out := p.t.layerOut(ctx, b, p.key.layer, a.kqv, x, int64(b.nRows), p.key.adapterOn)
	b.gOut = p.input("g_out")
	p.addLoss(ctx.Sum(ctx.Mul(out, b.gOut)))
}

// differentiate finishes a training graph: the loss, its backward, and
// "dx" for the gradient of the layer's input when it is an input.
func (p *attnPart) differentiate() (*built, error) {
	ctx, b, g := p.ctx, p.b, p.b.g
	b.loss = p.loss
	llamacpp.SetLoss(p.loss)
	llamacpp.SetOutput(llamacpp.SetName(p.loss, "loss"))
	g.BuildForward(p.loss)
	for _, x := range b.order {
		g.BuildForward(x)
	}
	if b.xIn != nil {
		b.dx = p.input("dx")
		llamacpp.SetOutput(b.dx)
		p.extra[b.xIn] = b.dx
	}
	p.t.backward(ctx, g, p.loss, p.extra)
	if err := b.rewriteBackward(); err != nil {
		ctx.Free()
		return nil, err
	}
	return b, nil
}

// layerBackward differentiates layer l of a segmented training pass: given
// its input x (nil for layer 0) and g = ∂loss/∂x_{l+1}, it adds the
// layer's parameter gradients to the accumulators and leaves ∂loss/∂x_l in
// g. It recomputes the queries, keys and values and the attention's output
// into attnState, differentiates the rest of the layer (∂/∂kqv, and the
// residual's share of ∂/∂x), then the attention one group of query blocks
// at a time (∂/∂q, k, v), then the queries, keys and values (the rest of
// ∂/∂x): no graph holds more than one group's attention scores.
func (t *Trainer) layerBackward(d *seqData, B, T, l int, x, g []float32, groups []attnGroup) error {
	a, err := t.attnStateFor(B, T)
	if err != nil {
		return err
	}
	if err := a.alloc(t.backends[0]); err != nil {
		return err
	}
	step := func(kind segKind, layer int, set func(b *built)) error {
		b, err := t.segGraph(segKey{kind: kind, layer: layer, adapterOn: true, b: B, t: T})
		if err != nil {
			return err
		}
		return t.run(b, func() {
			t.setSeqPart(b, d)
			if b.xIn != nil {
				llamacpp.SetF32(b.xIn, x)
			}
			if set != nil {
				set(b)
			}
		})
	}
	if err := step(segQKV, l, nil); err != nil {
		return err
	}
	if err := step(segAttn, 0, nil); err != nil {
		return err
	}
	llamacpp.Zero(a.dkqv)
	if err := step(segOut, l, func(b *built) {
		llamacpp.SetF32(b.gOut, g)
		if b.dx != nil {
			llamacpp.Zero(b.dx)
		}
	}); err != nil {
		return err
	}
	if l > 0 {
		b, _ := t.segGraph(segKey{kind: segOut, layer: l, adapterOn: true, b: B, t: T})
		llamacpp.GetF32(b.dx, g)
	}
	llamacpp.Zero(a.dq)
	llamacpp.Zero(a.dk)
	llamacpp.Zero(a.dv)
	for i := range groups {
		if err := step(segAttnGrad, i, nil); err != nil {
			return err
		}
	}
	var dx llamacpp.Tensor
	if err := step(segQKVGrad, l, func(b *built) {
		if dx = b.dx; dx != nil {
			llamacpp.SetF32(dx, g) // the residual's share, from segOut
		}
	}); err != nil {
		return err
	}
	if dx != nil {
		llamacpp.GetF32(dx, g)
	}
	return nil
}

// setSeqPart writes the inputs a graph of a layer's segmented backward
// reads: setSeq's, with a group's block masks from its first block on.
func (t *Trainer) setSeqPart(b *built, d *seqData) {
	if b.tokens != nil && b.tokens.Buffer != 0 {
		llamacpp.SetI32(b.tokens, d.tokens)
	}
	if b.pos != nil && b.pos.Buffer != 0 {
		llamacpp.SetI32(b.pos, d.pos)
	}
	if b.kqMask != nil && b.kqMask.Buffer != 0 {
		llamacpp.SetF32(b.kqMask, d.mask)
	}
	if b.kqvZero != nil && b.kqvZero.Buffer != 0 {
		llamacpp.Zero(b.kqvZero)
	}
	for j, m := range b.blockMask {
		llamacpp.SetF32(m, d.blockMask[b.blockFirst+j])
	}
}
