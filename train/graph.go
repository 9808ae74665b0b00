package train

import (
	"fmt"
	"maps"

	"github.com/omar-selfplay/omar/llamacpp"
)

// graphKind selects what a cached graph computes.
type graphKind int

const (
	kindPolicy graphKind = iota // no-grad: logprobs and values with the adapter on
	kindBase                    // no-grad: logprobs with the adapter off (reference model)
	kindTrain                   // forward + backward of an Objective
)

func (k graphKind) grads() bool { return k == kindTrain }

// graphKey identifies a graph: what it computes (kind, and for kindTrain the
// objective) and its shape, b sequences padded to t tokens, of which k rows
// (the rows whose next token is trained, padded to a multiple of 32) go
// through the output layer.
type graphKey struct {
	kind    graphKind
	obj     *Objective
	b, t, k int
}

// built is one constructed graph with its input and output tensors. Graphs
// are cached per graphKey (kind, batch, length bucket, output-row bucket):
// building costs a little Go and C time per node, and shapes repeat.
type built struct {
	ctx llamacpp.Context
	g   llamacpp.Graph
	// size is the graph's node capacity (graphSize).
	size  int
	b, t  int
	nRows int // N = b·t
	nSel  int // K
	// Inputs of every graph: tokens, positions [N], the causal mask [T, T],
	// the selected rows and their target indices [K].
	tokens, pos, kqMask, sel, tgt llamacpp.Tensor
	// allow [V, K] is 1 on the tokens each selected row may predict and
	// 0 elsewhere (Options.LogprobsOver "grammar"); nil otherwise.
	allow llamacpp.Tensor
	// blocks are the query-row boundaries of the causal attention blocks
	// (attnBlocks; nil: one T×T product), blockMask their masks and
	// kqvZero the zeros their outputs are added into.
	blocks    []int
	blockMask []llamacpp.Tensor
	kqvZero   llamacpp.Tensor
	// lastSelected: the graph reads the final hidden state only at the
	// selected rows (logprobs, values at generated tokens, a training
	// objective), so the last layer runs its queries, attention output
	// and feed-forward on those rows alone; its keys and values still
	// cover every row. The same numbers to float rounding; a quarter
	// less time for a 4-layer model with 5% of the rows trained
	// (BenchmarkSelfplayUpdate). selPos are the selected rows' positions
	// [K], selMask their attention mask over all rows [N, K] (each row
	// sees its own sequence up to itself).
	lastSelected    bool
	selPos, selMask llamacpp.Tensor
	// Outputs of the scoring graphs: logprob [1, K], value (policy) [1, K]
	// when lastSelected, else [1, N].
	logprob, value llamacpp.Tensor
	// A training graph: the forward quantities (and shared inputs) its
	// losses use, their terms and the total loss.
	fwd   *Forward
	terms []builtTerm
	loss  llamacpp.Tensor
	// known maps the frozen matrices and the activations of a training
	// graph to their transposed copies (nil when ggml's out_prod backward
	// is kept, see transposeForBackward); transposed counts the backward
	// nodes rewritten from out_prod to mul_mat.
	known      map[llamacpp.Tensor]llamacpp.Tensor
	order      []llamacpp.Tensor // known's copies in creation order
	transposed int
	// widened counts the gradient outer products rewritten to long rows
	// (llamacpp.Graph.UseWideOuterProducts).
	widened int
	// direct are the attention scores' forward copies (scoresForBackward),
	// directed how many of them UseDirectProducts computed in place.
	direct   []llamacpp.Tensor
	directed int
	// grads: a training graph, differentiated by ggml.
	grads bool
	// A segment graph's boundary (segment.go): its input xIn, the
	// accumulator dx of the loss's gradient there, the gradient gOut
	// arriving at its output, and out, a forward layer's output.
	xIn, dx, gOut, out llamacpp.Tensor
	// blockFirst is the index of a segment graph's first block mask in
	// the pass's (a group of attention blocks).
	blockFirst int
	// outer lists the adapters' rank-r products to run as out_prod once
	// the backward pass is built (loraProduct).
	outer []llamacpp.OuterProduct
}

func (b *built) free() { b.ctx.Free() }

// graphSize bounds the nodes of one graph over sequences padded to T: a PPO
// graph with LoRA on every matrix has about 220 nodes per layer, forward and
// backward together, and each causal attention block (attnBlocks) adds about
// 30 more per layer (measured on the built-in model: 1,342 nodes at 2 blocks,
// 6,724 at 48). A Werewolf transcript of 3,968 tokens is 62 blocks.
func (t *Trainer) graphSize(T int) int {
	return 4096 + t.hp.nLayer*(1024+64*len(t.attnBlocks(T)))
}

// mm applies a base matrix and, when on, its LoRA adapter:
// W·x + (alpha/r)·B·(A·x), the same form llama.cpp's build_lora_mm uses.
func (t *Trainer) mm(ctx llamacpp.Context, b *built, layer int, module string, x llamacpp.Tensor, adapterOn bool) llamacpp.Tensor {
	y := ctx.MulMat(t.w.layers[layer].mat[module], x)
	if !adapterOn {
		return y
	}
	if l := t.loraAt(layer, module); l != nil {
		y = ctx.Add(y, ctx.Scale(t.loraProduct(ctx, b, l, x), t.opts.LoRAAlpha/float32(t.opts.LoRARank)))
	}
	return y
}

// loraProduct is B·(A·x). On the CPU the rank-r product B·h runs as
// out_prod(Bᵀ, hᵀ), contracting the r values by vector updates along the
// output rows: ggml's mul_mat over r = 8 calls a dot product per output
// value, ten times slower (UseOuterProducts). A training graph builds the
// mul_mat, which automatic differentiation needs, and is rewritten after
// its backward; there the copies of hᵀ and Bᵀ also turn dh = out_prod(B,
// dyᵀ) into mul_mat(Bᵀ, dy) (transposeForBackward), and dB =
// out_prod(h, dy), whose rows are the rank, is laid out in rows of the
// output width (UseWideOuterProducts): its mul_mat form would need a copy
// of dyᵀ, as dear as the outer product itself.
func (t *Trainer) loraProduct(ctx llamacpp.Context, b *built, l *lora, x llamacpp.Tensor) llamacpp.Tensor {
	h := ctx.MulMat(l.a, x) // [r, N]
	switch {
	case b.known != nil:
		ab := ctx.MulMat(l.b, h)
		hT, bT := b.transposeForBackward(ctx, h), b.transposeForBackward(ctx, l.b)
		// The copies are nodes before the product they will feed.
		b.g.BuildForward(hT)
		b.g.BuildForward(bT)
		b.outer = append(b.outer, llamacpp.OuterProduct{Product: ab, AT: bT, BT: hT})
		return ab
	case b.grads || t.opts.Device == "cuda":
		return ctx.MulMat(l.b, h)
	default:
		return ctx.OutProd(ctx.Cont(ctx.Transpose(l.b)), ctx.Cont(ctx.Transpose(h)))
	}
}

// expandKV repeats each of the nHeadKV heads of x [D, T, Hkv, B] for the
// nHead/nHeadKV query heads that share it, giving [D, T, H, B] with query
// head h reading kv head h / (H/Hkv) as in llama.cpp. ggml's mul_mat can
// broadcast instead — graphs without a backward pass do — but its
// backward only supports that without a batch dimension.
func (t *Trainer) expandKV(ctx llamacpp.Context, x llamacpp.Tensor, T, B int) llamacpp.Tensor {
	h := t.hp
	if h.nHead == h.nHeadKV {
		return x
	}
	r := h.nHead / h.nHeadKV
	D, Hkv := int64(h.headDim), int64(h.nHeadKV)
	x4 := ctx.Reshape(x, D*int64(T), 1, Hkv, int64(B))
	rep := ctx.Repeat4D(x4, D*int64(T), int64(r), Hkv, int64(B))
	return ctx.Reshape(rep, D, int64(T), int64(h.nHead), int64(B))
}

// forward builds the model on B sequences padded to T tokens (row b*T+p is
// position p of sequence b) and returns the final normalised hidden state
// [E, N], or [E, K] of the selected rows when b.lastSelected (the output
// layer is applied by tokenLogprob to selected rows).
func (t *Trainer) forward(ctx llamacpp.Context, b *built, B, T int, adapterOn bool) llamacpp.Tensor {
	x := ctx.GetRows(t.w.tokEmbd, t.seqInputs(ctx, b, B, T)) // [E, N]
	for l := range t.hp.nLayer {
		x = t.layer(ctx, b, l, x, B, T, adapterOn)
	}
	return ctx.Mul(ctx.RMSNorm(x, t.hp.eps), t.w.outNorm)
}

// seqInputs declares the inputs every layer reads — tokens and positions
// [N], the causal mask [T, T] — and returns the tokens.
func (t *Trainer) seqInputs(ctx llamacpp.Context, b *built, B, T int) llamacpp.Tensor {
	N := int64(B * T)
	tokens := ctx.NewTensor(llamacpp.TypeI32, N)
	llamacpp.SetInput(llamacpp.SetName(tokens, "tokens"))
	pos := ctx.NewTensor(llamacpp.TypeI32, N)
	llamacpp.SetInput(llamacpp.SetName(pos, "pos"))
	kqMask := ctx.NewTensor(llamacpp.TypeF32, int64(T), int64(T))
	llamacpp.SetInput(llamacpp.SetName(kqMask, "kq_mask"))
	b.tokens, b.pos, b.kqMask = tokens, pos, kqMask
	return tokens
}

// layer builds block l of the model on the hidden state x [E, N] of B
// sequences padded to T tokens and returns the block's output: [E, N], or
// [E, K] of the selected rows in a last layer when b.lastSelected.
func (t *Trainer) layer(ctx llamacpp.Context, b *built, l int, x llamacpp.Tensor, B, T int, adapterOn bool) llamacpp.Tensor {
	h := t.hp
	N := int64(B * T)
	cur := ctx.Mul(ctx.RMSNorm(x, h.eps), t.w.layers[l].attnNorm)

	// Queries of qT rows in each of nb groups attend to the kT keys of
	// their group: the B sequences, or in a last layer on the selected
	// rows one group of K queries over all N rows.
	qIn, qPos, res, mask := cur, b.pos, x, b.kqMask
	qT, kT, nb := int64(T), int64(T), int64(B)
	selectedRows := l == h.nLayer-1 && b.lastSelected
	if selectedRows {
		qIn, qPos, res, mask = ctx.GetRows(cur, b.sel), b.selPos, ctx.GetRows(x, b.sel), b.selMask
		qT, kT, nb = int64(b.nSel), N, 1
	}
	q, k, v := t.qkv(ctx, b, l, qIn, cur, qPos, qT, kT, nb, adapterOn, b.grads)

	var kqv llamacpp.Tensor // [D, qT, H, nb]
	// The blocks split positions 0…T−1 of each sequence; the selected
	// rows' queries are other rows, masked by selMask.
	if b.blocks != nil && !selectedRows {
		kqv = t.blockedAttention(ctx, b, q, k, v)
	} else {
		kqv = b.attention(ctx, q, k, v, nil, nil, mask, h.kqScale)
	}
	return t.layerOut(ctx, b, l, kqv, res, qT*nb, adapterOn)
}

// qkv is the attention's input of layer l: the queries of the rows qIn
// (positions qPos) and the keys and values of the rows cur (positions
// b.pos), as [D, rows, heads, groups] for qT query and kT key rows in each
// of nb groups; expand repeats the keys and values of each KV head for
// the query heads that share it (expandKV).
func (t *Trainer) qkv(ctx llamacpp.Context, b *built, l int, qIn, cur, qPos llamacpp.Tensor, qT, kT, nb int64, adapterOn, expand bool) (q, k, v llamacpp.Tensor) {
	h := t.hp
	lw := t.w.layers[l]
	N := kT * nb
	D, H, Hkv := int64(h.headDim), int64(h.nHead), int64(h.nHeadKV)
	q = t.mm(ctx, b, l, "attn_q", qIn, adapterOn)
	k = t.mm(ctx, b, l, "attn_k", cur, adapterOn)
	v = t.mm(ctx, b, l, "attn_v", cur, adapterOn)
	if h.qkvBias {
		q, k, v = ctx.Add(q, lw.bq), ctx.Add(k, lw.bk), ctx.Add(v, lw.bv)
	}
	q = ctx.Reshape(q, D, H, qT*nb)
	k = ctx.Reshape(k, D, Hkv, N)
	v = ctx.Reshape(v, D, Hkv, N)
	if h.qkNorm {
		q = ctx.Mul(ctx.RMSNorm(q, h.eps), lw.qNorm)
		k = ctx.Mul(ctx.RMSNorm(k, h.eps), lw.kNorm)
	}
	q = ctx.RopeExt(q, qPos, t.w.ropeFreqs, h.nRot, h.ropeMode, h.nCtx, h.ropeBase, h.ropeFreqScale)
	k = ctx.RopeExt(k, b.pos, t.w.ropeFreqs, h.nRot, h.ropeMode, h.nCtx, h.ropeBase, h.ropeFreqScale)

	// [D, heads, rows, groups] → [D, rows, heads, groups]
	q = ctx.Cont(ctx.Permute(ctx.Reshape(q, D, H, qT, nb), 0, 2, 1, 3))
	k = ctx.Cont(ctx.Permute(ctx.Reshape(k, D, Hkv, kT, nb), 0, 2, 1, 3))
	v = ctx.Cont(ctx.Permute(ctx.Reshape(v, D, Hkv, kT, nb), 0, 2, 1, 3))
	if expand {
		k = t.expandKV(ctx, k, int(kT), int(nb))
		v = t.expandKV(ctx, v, int(kT), int(nb))
	}
	return q, k, v
}

// layerOut is the rest of layer l after the attention: its output
// projection of kqv [D, rows, H, groups] added to the residual res [E,
// rows], then the feed-forward block.
func (t *Trainer) layerOut(ctx llamacpp.Context, b *built, l int, kqv, res llamacpp.Tensor, rows int64, adapterOn bool) llamacpp.Tensor {
	h := t.hp
	lw := t.w.layers[l]
	att := ctx.Reshape(ctx.Cont(ctx.Permute(kqv, 0, 2, 1, 3)), int64(h.headDim*h.nHead), rows)
	att = t.mm(ctx, b, l, "attn_output", att, adapterOn)
	x := ctx.Add(att, res)

	cur := ctx.Mul(ctx.RMSNorm(x, h.eps), lw.ffnNorm)
	gate := ctx.Silu(t.mm(ctx, b, l, "ffn_gate", cur, adapterOn))
	up := t.mm(ctx, b, l, "ffn_up", cur, adapterOn)
	return ctx.Add(t.mm(ctx, b, l, "ffn_down", ctx.Mul(gate, up), adapterOn), x)
}

// attention is softmax(kᵀq·scale + mask) mixing v, for q [D, qT, H, nb],
// k and v [D, kT, H, nb] and mask [kT, qT]: [D, qT, H, nb]. vt and kt,
// when not nil, are vᵀ and kᵀ [kT, D, H, nb] taken as views of a whole
// sequence's (blockedAttention; v is then only needed by a training
// graph); otherwise vᵀ is copied here.
func (b *built) attention(ctx llamacpp.Context, q, k, v, vt, kt, mask llamacpp.Tensor, scale float32) llamacpp.Tensor {
	if b.known != nil && kt != nil {
		b.known[k] = kt
	}
	var kq llamacpp.Tensor // [kT, qT, H, nb]
	if b.known != nil {
		kq = b.scoresForBackward(ctx, q, k)
	} else {
		kq = ctx.MulMat(k, q)
	}
	kq = ctx.SoftMaxExt(kq, mask, scale, 0)
	if vt == nil {
		vt = ctx.Cont(ctx.Permute(v, 1, 0, 2, 3)) // [kT, D, H, nb]
	} else if b.known != nil {
		// ds = mul_mat(v, dkqv) reads the block's rows of v.
		b.known[vt] = v
		b.order = append(b.order, v)
	}
	kqv := ctx.MulMat(vt, kq) // [D, qT, H, nb]
	if b.known != nil {
		// A same-shape reshape: its backward makes the gradient
		// arriving through the permute (or the accumulation) after it
		// contiguous.
		kqv = ctx.Reshape(kqv, kqv.Ne[:]...)
	}
	return kqv
}

// defaultAttnBlock is the number of query rows per causal attention block:
// on the built-in model's self-play streams (BenchmarkSelfplayUpdate, 736
// rows) score + update took 19.0 s with one T×T product and 16.9, 15.7,
// 14.2, 14.1 and 15.4 s with blocks from 256, 128, 64, 48 and 32.
const defaultAttnBlock = 64

// attnBlocks splits T query rows into blocks of about attnBlock rows (a
// multiple of 32): the boundaries 0 < b1 < … < T, or nil when T is too
// short for two blocks. Causal attention computed per block against only
// the keys it can see (the first b_{j+1}) does (n+1)/2n of the work of
// the T×T products for n blocks — the masked half of the scores is never
// computed — in the forward and the backward pass alike.
func (t *Trainer) attnBlocks(T int) []int {
	size := t.attnBlock
	if size == 0 {
		size = defaultAttnBlock
	}
	if size < 0 || T < 2*size {
		return nil
	}
	n := T / size
	step := bucket((T + n - 1) / n)
	var out []int
	for e := step; e < T; e += step {
		out = append(out, e)
	}
	return append(out, T)
}

// blockedAttention is attention with causal query blocks (b.blocks): block
// j's queries [b_{j-1}, b_j) attend to keys [0, b_j) with their own mask,
// and its output is added into the zeros at its rows. The same sums as the
// T×T product over the keys each query can see; only the float rounding of
// the softmax and mixing sums may differ (shorter rows of zeros).
func (t *Trainer) blockedAttention(ctx llamacpp.Context, b *built, q, k, v llamacpp.Tensor) llamacpp.Tensor {
	rows := func(x llamacpp.Tensor, from, to int) llamacpp.Tensor {
		r := ctx.Cont(ctx.View4D(x, [4]int64{x.Ne[0], int64(to - from), x.Ne[2], x.Ne[3]}, [3]uintptr{x.Nb[1], x.Nb[2], x.Nb[3]}, uintptr(from)*x.Nb[1]))
		// A same-shape reshape: the backward of the cont needs its
		// gradient contiguous, and v's arrives through a permute.
		return ctx.Reshape(r, r.Ne[:]...)
	}
	// vᵀ (and, for the backward, kᵀ) of the whole sequences, once: each
	// block reads the first rows of them as a view instead of
	// transposing its own rows of v and k again, one value at a time.
	vtAll := ctx.Cont(ctx.Permute(v, 1, 0, 2, 3)) // [T, D, H, B]
	var ktAll llamacpp.Tensor
	if b.known != nil {
		ktAll = ctx.Cont(ctx.Permute(k, 1, 0, 2, 3))
		b.order = append(b.order, ktAll)
	}
	first := func(x llamacpp.Tensor, to int) llamacpp.Tensor {
		if x == nil {
			return nil
		}
		return ctx.View4D(x, [4]int64{int64(to), x.Ne[1], x.Ne[2], x.Ne[3]}, [3]uintptr{x.Nb[1], x.Nb[2], x.Nb[3]}, 0)
	}
	out := b.kqvZero
	from := 0
	for j, to := range b.blocks {
		// The block's rows of v only feed the backward's ds; without a
		// backward, kᵀq reads the first rows of k in place.
		var vRows llamacpp.Tensor
		if b.known != nil {
			vRows = rows(v, 0, to)
		}
		kRows := ctx.View4D(k, [4]int64{k.Ne[0], int64(to), k.Ne[2], k.Ne[3]}, [3]uintptr{k.Nb[1], k.Nb[2], k.Nb[3]}, 0)
		if b.grads {
			kRows = rows(k, 0, to)
		}
		kqv := b.attention(ctx, rows(q, from, to), kRows, vRows, first(vtAll, to), first(ktAll, to), b.blockMask[j], t.hp.kqScale)
		out = ctx.Acc(out, kqv, [3]uintptr{out.Nb[1], out.Nb[2], out.Nb[3]}, uintptr(from)*out.Nb[1])
		from = to
	}
	// The gradient arrives through a permute, and Acc's backward reads it
	// with contiguous strides: a same-shape reshape makes it contiguous.
	return ctx.Reshape(out, out.Ne[:]...)
}

// tokenLogprob selects K rows of the final hidden state (input b.sel;
// forward has done so when b.lastSelected), applies the output layer to
// them only — the vocabulary-sized tensors are the largest of the graph,
// and most rows of a trajectory are prompt — and returns per selected row log softmax(logits)[target] [1, K], the
// log-sum-exp [1, K], the logits [V, K] and the selected hidden states
// [E, K]. The target input b.tgt holds k·V + target for selected row k.
//
// The log-sum-exp is computed around M = the row mean of the logits,
// M + log Σ exp(x − M), which is exact for any M; the mean keeps exp in
// range (logit spreads above the mean stay far below 88) and has a
// well-defined backward, unlike a max. Its gradient contribution,
// (1 − Σ softmax)/V per logit, is zero up to rounding.
func (t *Trainer) tokenLogprob(ctx llamacpp.Context, b *built, hidden llamacpp.Tensor, K int) (lp, lse, logits, hsel llamacpp.Tensor) {
	V := int64(t.hp.nVocab)
	hsel = hidden
	if !b.lastSelected {
		hsel = ctx.GetRows(hidden, b.sel) // [E, K]
	}
	logits = ctx.MulMat(t.w.output, hsel)
	var m llamacpp.Tensor
	if t.opts.OverGrammar() {
		// Renormalised over each row's allowed set: the other logits are
		// pushed to −10³⁰, whose exponential (and softmax) is exactly 0
		// and whose product with a 0 probability is 0, not NaN; M is the
		// mean of the allowed logits, so exp stays in range.
		b.allow = ctx.NewTensor(llamacpp.TypeF32, V, int64(K))
		llamacpp.SetInput(llamacpp.SetName(b.allow, "allow"))
		m = ctx.Div(ctx.SumRows(ctx.Mul(logits, b.allow)), ctx.SumRows(b.allow))
		logits = ctx.Add(logits, ctx.ScaleBias(b.allow, 1e30, -1e30))
	} else {
		m = ctx.Scale(ctx.SumRows(logits), 1/float32(V)) // [1, K]
	}
	// ADD, not SUB: ggml's SUB backward does not reduce a broadcast operand.
	lse = ctx.Add(m, ctx.Log(ctx.SumRows(ctx.Exp(ctx.Add(logits, ctx.Scale(m, -1))))))
	xt := ctx.GetRows(ctx.Reshape(logits, 1, V*int64(K)), b.tgt) // [1, K]
	return ctx.Sub(xt, lse), lse, logits, hsel
}

// value is the value head on the final hidden state: w·h + b, one per row.
func (t *Trainer) value(ctx llamacpp.Context, hidden llamacpp.Tensor) llamacpp.Tensor {
	return ctx.Add(ctx.MulMat(t.vhW, hidden), t.vhB)
}

// selectedCheaper tells whether a last layer on the K selected rows costs
// less than on all N = b·t rows. It saves the queries, the attention
// output and the feed-forward of N − K rows, but its K queries each attend
// to all N rows instead of the t of their own sequence: worth it when few
// rows are trained (self-play streams: ~5%), not when most are.
func (t *Trainer) selectedCheaper(key graphKey) bool {
	h := t.hp
	E, qo := int64(h.nEmbd), int64(h.nHead*h.headDim)
	perRow := E*2*qo + 3*E*int64(h.nFF) // q, output, gate, up, down
	perPair := 2 * qo                   // scores and their mix
	N, K := int64(key.b*key.t), int64(key.k)
	return K*perRow+K*N*perPair < N*perRow+N*int64(key.t)*perPair
}

// outputs adds a graph's outputs on the output layer's hidden rows: the
// logprobs (kindBase), the logprobs and values (kindPolicy), or the
// objective's loss with the forward nodes its backward reads (kindTrain;
// the caller adds the backward). One graph and a segmented pass's head
// share it.
func (t *Trainer) outputs(ctx llamacpp.Context, g llamacpp.Graph, b *built, kind graphKind, obj *Objective, hidden llamacpp.Tensor, K int) error {
	lp, lse, logits, hsel := t.tokenLogprob(ctx, b, hidden, K)
	output := func(name string, x llamacpp.Tensor) llamacpp.Tensor {
		llamacpp.SetOutput(llamacpp.SetName(x, name))
		g.BuildForward(x)
		return x
	}
	switch kind {
	case kindBase:
		b.logprob = output("logprob", lp)
	case kindPolicy:
		b.logprob = output("logprob", lp)
		b.value = output("value", t.value(ctx, hidden)) // [1, K] when lastSelected, else [1, N]
	case kindTrain:
		b.fwd = &Forward{K: K, Logprob: lp, LogSumExp: lse, Logits: logits, Hidden: hsel, ctx: ctx, t: t}
		var err error
		if b.terms, b.loss, err = t.buildObjective(ctx, g, obj, b.fwd); err != nil {
			return err
		}
		llamacpp.SetLoss(b.loss)
		output("loss", b.loss)
		// The transposed activations are nodes of the forward pass,
		// computed before the backward nodes that will read them.
		for _, x := range b.order {
			g.BuildForward(x)
		}
	default:
		return fmt.Errorf("train: unknown graph kind %d", kind)
	}
	return nil
}

// build constructs the graph for key.
func (t *Trainer) build(key graphKey) (*built, error) {
	size := t.graphSize(key.t)
	ctx, err := llamacpp.NewContext(2*size, 1, size, key.kind.grads())
	if err != nil {
		return nil, err
	}
	b := &built{ctx: ctx, size: size, b: key.b, t: key.t, nRows: key.b * key.t, nSel: key.k, grads: key.kind.grads()}
	K := b.nSel
	g := ctx.NewGraph(size, key.kind.grads())
	b.g = g
	if key.kind == kindTrain && t.wT != nil {
		b.known = maps.Clone(t.wT)
	}
	input := func(name string, typ llamacpp.Type, ne ...int64) llamacpp.Tensor {
		x := ctx.NewTensor(typ, ne...)
		llamacpp.SetInput(llamacpp.SetName(x, name))
		return x
	}
	b.sel, b.tgt = input("sel", llamacpp.TypeI32, int64(K)), input("tgt", llamacpp.TypeI32, int64(K))
	// Every graph reads the final hidden state at the selected rows only
	// (the values too: the estimators read them at generated tokens). A
	// full-parameter trainer keeps its numerics: the built-in model is
	// rebuilt byte for byte from them.
	b.lastSelected = !t.opts.Full && !t.fullLastLayer && t.selectedCheaper(key)
	if b.lastSelected {
		b.selPos = input("sel_pos", llamacpp.TypeI32, int64(K))
		b.selMask = input("sel_mask", llamacpp.TypeF32, int64(b.nRows), int64(K))
	}
	if !t.opts.Full {
		// A full-parameter trainer keeps the one T×T product: the
		// built-in model is rebuilt byte for byte from its numerics.
		b.blocks = t.attnBlocks(key.t)
	}
	t.blockInputs(ctx, b)
	hidden := t.forward(ctx, b, key.b, key.t, key.kind != kindBase)
	if err := t.outputs(ctx, g, b, key.kind, key.obj, hidden, K); err != nil {
		ctx.Free()
		return nil, err
	}
	if key.kind == kindTrain {
		t.backward(ctx, g, b.loss, nil)
		if err := b.rewriteBackward(); err != nil {
			ctx.Free()
			return nil, err
		}
	}
	return b, nil
}

// blockInputs declares the inputs of causal attention blocks (b.blocks):
// each block's mask and the zeros their outputs are added into.
func (t *Trainer) blockInputs(ctx llamacpp.Context, b *built) {
	if b.blocks == nil {
		return
	}
	h := t.hp
	input := func(name string, ne ...int64) llamacpp.Tensor {
		x := ctx.NewTensor(llamacpp.TypeF32, ne...)
		llamacpp.SetInput(llamacpp.SetName(x, name))
		return x
	}
	b.kqvZero = input("kqv_zero", int64(h.headDim), int64(b.t), int64(h.nHead), int64(b.b))
	from := 0
	for j, to := range b.blocks {
		b.blockMask = append(b.blockMask, input(fmt.Sprintf("block_mask_%d", j), int64(to), int64(to-from)))
		from = to
	}
}

// rewriteBackward moves a training graph's backward onto the faster
// kernels (see transposeForBackward, loraProduct, scoresForBackward) once
// it is built; nothing to do when ggml's out_prod backward is kept.
func (b *built) rewriteBackward() error {
	if b.known == nil {
		return nil
	}
	var err error
	if b.transposed, err = b.g.UseTransposedBackward(b.known); err == nil {
		err = b.g.UseOuterProducts(b.outer)
	}
	if err == nil {
		b.widened, err = b.g.UseWideOuterProducts(b.ctx)
	}
	if err == nil {
		b.directed, err = b.g.UseDirectProducts(b.direct)
	}
	return err
}

// backward appends the gradient computation, accumulating every parameter's
// gradient into its persistent accumulator (so several passes of one
// minibatch add up) and seeding the loss gradient from t.lossGrad (= 1).
// extra gives further nodes their accumulators: the inputs of a segment
// (segment.go), whose gradients continue the backward pass elsewhere.
func (t *Trainer) backward(ctx llamacpp.Context, g llamacpp.Graph, loss llamacpp.Tensor, extra map[llamacpp.Tensor]llamacpp.Tensor) {
	accs := make([]llamacpp.Tensor, g.NNodes())
	for i := range accs {
		n := g.Node(i)
		if n == loss {
			accs[i] = t.lossGrad
			continue
		}
		if p, ok := t.paramIndex[n]; ok {
			accs[i] = t.params[p].grad
		}
		if a, ok := extra[n]; ok {
			accs[i] = a
		}
	}
	g.BuildBackward(ctx, accs)
}
