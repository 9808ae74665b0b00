package llamacpp

import (
	"errors"
	"sync"
)

// ggml's automatic differentiation writes both gradients of
// c = mul_mat(a, b) as outer products: da = out_prod(b, dc) and
// db = out_prod(a, transpose(dc)). On the CPU that kernel runs two to
// three times slower than the forward mul_mat kernels on the same numbers
// (for attention heads of 16–64 values, more), and in a LoRA trainer it is
// most of the backward pass. Every out_prod(x, y) is also
// mul_mat(xᵀ, yᵀ) when contiguous copies of xᵀ and yᵀ exist: a transposed
// copy of a frozen matrix made once, a transposed activation the forward
// pass makes, or a gradient that the graph already holds in the other
// layout (the transpose of a transpose view, a reshape that ggml's
// backward made contiguous).

// opIDs are the enum ggml_op values of the loaded library, read from the
// nodes ggml itself makes (the enum's numbering moves between versions).
var opIDs struct {
	once                                                          sync.Once
	mulMat, outProd, transpose, permute, cont, reshape, add, none int32
	err                                                           error
}

func loadOpIDs() error {
	opIDs.once.Do(func() {
		c, err := NewContext(16, 0, 0, false)
		if err != nil {
			opIDs.err = err
			return
		}
		defer c.Free()
		a, b := c.NewTensor(TypeF32, 4, 4), c.NewTensor(TypeF32, 4, 4)
		opIDs.mulMat = c.MulMat(a, b).Op
		opIDs.outProd = c.OutProd(a, b).Op
		opIDs.transpose = c.Transpose(a).Op
		opIDs.permute = c.Permute(a, 1, 0, 2, 3).Op
		opIDs.cont = c.Cont(a).Op
		opIDs.reshape = c.Reshape(a, 2, 8).Op
		opIDs.add = c.Add(a, b).Op
		opIDs.none = a.Op
		seen := map[int32]bool{}
		for _, op := range []int32{opIDs.mulMat, opIDs.outProd, opIDs.transpose, opIDs.permute, opIDs.cont, opIDs.reshape, opIDs.add} {
			if seen[op] {
				opIDs.err = errors.New("llamacpp: cannot tell ggml's mul_mat, out_prod, transpose, permute, cont, reshape and add ops apart")
			}
			seen[op] = true
		}
	})
	return opIDs.err
}

// UseTransposedBackward rewrites, in a graph built with BuildBackward and
// not yet allocated, every F32 node out_prod(x, y) for which contiguous
// F32 tensors holding xᵀ and yᵀ can be found into mul_mat(xᵀ, yᵀ): the
// same sums on the forward kernels. A known transpose of x may also be a
// 2-D matrix of a quantized type (quantizedRows): the product then
// quantizes y as the forward pass quantizes activations. known maps tensors to contiguous
// transposed copies of themselves (frozen matrices, activations the
// forward pass transposed); other transposes are found by following
// transpose, permute(1, 0, 2, 3), cont and same-shape reshape nodes. It
// returns the number of nodes rewritten.
func (g Graph) UseTransposedBackward(known map[Tensor]Tensor) (int, error) {
	if err := loadOpIDs(); err != nil {
		return 0, err
	}
	n := 0
	for i := range g.NNodes() {
		node := g.Node(i)
		if node.Op != opIDs.outProd || node.Type != TypeF32 {
			continue
		}
		a, b := mk(node.Src[0]), mk(node.Src[1])
		aT, bT := transposed(known, a, 0), transposed(known, b, 0)
		if aT == nil || bT == nil || !mulMatFits(aT, bT, node) {
			continue
		}
		node.Op = opIDs.mulMat
		node.Src[0], node.Src[1] = tp(aT), tp(bT)
		n++
	}
	return n, nil
}

// maxChain bounds the view chains followed (they are a few nodes long).
const maxChain = 8

// transposed returns a contiguous F32 tensor holding xᵀ (x with ne[0] and
// ne[1] swapped), or nil.
func transposed(known map[Tensor]Tensor, x Tensor, depth int) Tensor {
	if x == nil || depth > maxChain {
		return nil
	}
	if t := known[x]; t != nil {
		return t
	}
	src := mk(x.Src[0])
	switch {
	case isTranspose(x):
		return contiguous(known, src, depth+1)
	case (x.Op == opIDs.cont || x.Op == opIDs.reshape) && src != nil && x.Ne == src.Ne:
		return transposed(known, src, depth+1)
	}
	return nil
}

// contiguous returns a contiguous F32 tensor holding x with x's shape, or
// nil.
func contiguous(known map[Tensor]Tensor, x Tensor, depth int) Tensor {
	if x == nil || depth > maxChain {
		return nil
	}
	if contiguousF32(x) {
		return x
	}
	if isTranspose(x) {
		return transposed(known, mk(x.Src[0]), depth+1)
	}
	return nil
}

// isTranspose reports whether x is a view of its source with ne[0] and
// ne[1] swapped.
func isTranspose(x Tensor) bool {
	switch x.Op {
	case opIDs.transpose:
		return true
	case opIDs.permute:
		p := x.OpParams
		return p[0] == 1 && p[1] == 0 && p[2] == 2 && p[3] == 3
	}
	return false
}

// mulMatFits checks that mul_mat(aT, bT) has out's shape and that ggml's
// broadcasting of aT over bT's outer dimensions applies.
func mulMatFits(aT, bT, out Tensor) bool {
	if !(rowsF32(aT) || quantizedRows(aT)) || !contiguousF32(bT) || aT.Ne[0] != bT.Ne[0] {
		return false
	}
	if aT.Ne[1] != out.Ne[0] || bT.Ne[1] != out.Ne[1] || bT.Ne[2] != out.Ne[2] || bT.Ne[3] != out.Ne[3] {
		return false
	}
	return bT.Ne[2]%aT.Ne[2] == 0 && bT.Ne[3]%aT.Ne[3] == 0
}

// rowsF32 reports whether t is an F32 tensor of dense rows laid out in
// order without overlap, perhaps with gaps between them (the first rows
// of a larger tensor): what ggml's mul_mat accepts as its first operand.
func rowsF32(t Tensor) bool {
	if t.Type != TypeF32 || t.Nb[0] != 4 {
		return false
	}
	span := 4 * uintptr(t.Ne[0])
	for d := 1; d < maxDims; d++ {
		if t.Ne[d] != 1 && t.Nb[d] < span {
			return false
		}
		if t.Ne[d] != 1 {
			span = t.Nb[d] * uintptr(t.Ne[d])
		}
	}
	return true
}

// quantizedRows reports whether t is a contiguous 2-D tensor of a
// quantized type whose rows fill its blocks (a transposed copy of a frozen
// matrix made in Q8_0): mul_mat quantizes its other operand to the
// matching type and runs the forward pass's kernels.
func quantizedRows(t Tensor) bool {
	if t.Type == TypeF32 || t.Type == TypeF16 || t.Type == TypeBF16 || t.Ne[2] != 1 || t.Ne[3] != 1 {
		return false
	}
	rs, err := RowSize(t.Type, t.Ne[0])
	return err == nil && t.Nb[1] == uintptr(rs)
}

// contiguousF32 reports whether t is an F32 tensor stored densely in ggml's
// row-major order (ne[0] fastest).
func contiguousF32(t Tensor) bool {
	if t.Type != TypeF32 {
		return false
	}
	stride := uintptr(4)
	for d := range maxDims {
		if t.Ne[d] != 1 && t.Nb[d] != stride {
			return false
		}
		stride *= uintptr(t.Ne[d])
	}
	return true
}

// OuterProduct names a node Product = mul_mat(a, b) and contiguous F32
// nodes AT = aᵀ and BT = bᵀ, for UseOuterProducts.
type OuterProduct struct{ Product, AT, BT Tensor }

// UseOuterProducts rewrites each product of ps, a node of a graph that is
// not yet allocated, into out_prod(AT, BT): the same sums on another
// kernel. ggml's CPU mul_mat over a contraction shorter than one SIMD
// block — a LoRA rank of 8 — calls its dot product once per output value,
// about ten times slower than out_prod's vector updates along the output
// rows. Automatic differentiation needs the mul_mat, so a training graph
// is rewritten after BuildBackward. The copies must come before the
// product in g.
func (g Graph) UseOuterProducts(ps []OuterProduct) error {
	if err := loadOpIDs(); err != nil {
		return err
	}
	pos := make(map[Tensor]int, g.NNodes())
	for i := range g.NNodes() {
		pos[g.Node(i)] = i
	}
	for _, p := range ps {
		c, aT, bT := p.Product, p.AT, p.BT
		if c.Op != opIDs.mulMat || c.Type != TypeF32 {
			return errors.New("llamacpp: UseOuterProducts: not an F32 mul_mat node")
		}
		a, b := mk(c.Src[0]), mk(c.Src[1])
		for _, x := range []Tensor{a, b, c} {
			if x.Ne[2] != 1 || x.Ne[3] != 1 {
				return errors.New("llamacpp: UseOuterProducts: only 2-D products")
			}
		}
		if !contiguousF32(aT) || !contiguousF32(bT) ||
			aT.Ne != [maxDims]int64{a.Ne[1], a.Ne[0], 1, 1} || bT.Ne != [maxDims]int64{b.Ne[1], b.Ne[0], 1, 1} {
			return errors.New("llamacpp: UseOuterProducts: the copies are not contiguous F32 transposes of the operands")
		}
		ic, ok := pos[c]
		ia, okA := pos[aT]
		ib, okB := pos[bT]
		if !ok || !okA || !okB || ia > ic || ib > ic {
			return errors.New("llamacpp: UseOuterProducts: the product and the copies must be nodes of the graph, the copies first")
		}
		c.Op = opIDs.outProd
		c.Src[0], c.Src[1] = tp(aT), tp(bT)
	}
	return nil
}

// vecStep is the number of floats ggml's CPU vector loops take per
// iteration with AVX-512 (GGML_F32_STEP); out_prod runs rows shorter than
// that one scalar at a time.
const vecStep = 64

// UseWideOuterProducts rewrites, in a graph built with BuildBackward and
// not yet allocated, every F32 node p = out_prod(x, y) of 2-D shape
// [m, n], with rows shorter than ggml's vector step (m < 64 ≤ n), that is
// read only as the second operand of same-shape adds — a parameter's
// gradient accumulation. p becomes out_prod(y, x), the same sums laid out
// [n, m] in rows long enough for out_prod's vector kernel, and the adds
// read it through a transposed view (ggml's add reads a strided second
// operand). A LoRA B's gradient, whose rows are the rank, ran one scalar
// at a time. It returns the number of nodes rewritten.
func (g Graph) UseWideOuterProducts(ctx Context) (int, error) {
	if err := loadOpIDs(); err != nil {
		return 0, err
	}
	uses := g.uses()
	var cands []Tensor
	for i := range g.NNodes() {
		n := g.Node(i)
		if n.Op == opIDs.outProd && n.Type == TypeF32 && n.Flags&(TensorFlagInput|TensorFlagOutput|TensorFlagParam|TensorFlagLoss) == 0 && contiguousF32(n) &&
			n.Ne[0] < vecStep && n.Ne[1] >= vecStep && n.Ne[2] == 1 && n.Ne[3] == 1 {
			cands = append(cands, n)
		}
	}
	rewritten := 0
	for _, p := range cands {
		us := uses[p]
		ok := len(us) > 0
		for _, u := range us {
			ok = ok && u.node.Op == opIDs.add && u.src == 1 && mk(u.node.Src[0]).Ne == p.Ne
		}
		x, y := mk(p.Src[0]), mk(p.Src[1])
		if !ok || x.Ne[2] != 1 || x.Ne[3] != 1 || y.Ne[2] != 1 || y.Ne[3] != 1 {
			continue
		}
		m, n := p.Ne[0], p.Ne[1]
		p.Src[0], p.Src[1] = tp(y), tp(x)
		p.Ne = [maxDims]int64{n, m, 1, 1}
		p.Nb = [maxDims]uintptr{4, 4 * uintptr(n), 4 * uintptr(n*m), 4 * uintptr(n*m)}
		v := ctx.Transpose(p) // [m, n] over p's [n, m]
		for _, u := range us {
			u.node.Src[1] = tp(v)
		}
		// The view is a node, after its readers: the allocator then
		// keeps p (m·n values) until the end of the graph.
		g.BuildForward(v)
		rewritten++
	}
	return rewritten, nil
}

// UseDirectProducts rewrites, in a graph built with BuildBackward and not
// yet allocated, each node c = cont(transpose(reshape(p))) with p =
// mul_mat(a, b) — a product taken transposed so that ggml's backward hands
// its gradient over in the other layout — into mul_mat(b, a): the same
// values computed in place instead of copied. p is then left uncomputed
// (GGML_OP_NONE) when only that chain read it: the backward of a mul_mat
// reads its operands, not its value. It returns the number of copies
// rewritten.
func (g Graph) UseDirectProducts(copies []Tensor) (int, error) {
	if err := loadOpIDs(); err != nil {
		return 0, err
	}
	uses := g.uses()
	n := 0
	for _, c := range copies {
		t := mk(c.Src[0])
		if c.Op != opIDs.cont || t == nil || t.Op != opIDs.transpose {
			continue
		}
		r := mk(t.Src[0])
		if r == nil || r.Op != opIDs.reshape {
			continue
		}
		p := mk(r.Src[0])
		if p == nil || p.Op != opIDs.mulMat || p.Type != TypeF32 || c.Type != TypeF32 || r.Ne != p.Ne {
			continue
		}
		a, b := mk(p.Src[0]), mk(p.Src[1])
		if c.Ne != [maxDims]int64{b.Ne[1], a.Ne[1], p.Ne[2], p.Ne[3]} || !contiguousF32(c) {
			continue
		}
		c.Op = opIDs.mulMat
		c.Src[0], c.Src[1] = tp(b), tp(a)
		if len(uses[p]) == 1 && len(uses[r]) == 1 && len(uses[t]) == 1 && p.Flags&(TensorFlagOutput|TensorFlagLoss) == 0 {
			p.Op = opIDs.none
		}
		n++
	}
	return n, nil
}

// use is one read of a tensor: node's source src.
type use struct {
	node Tensor
	src  int
}

// uses maps every tensor the nodes of g read to its reads.
func (g Graph) uses() map[Tensor][]use {
	uses := map[Tensor][]use{}
	for i := range g.NNodes() {
		n := g.Node(i)
		for j, src := range n.Src {
			if src != 0 {
				uses[mk(src)] = append(uses[mk(src)], use{n, j})
			}
		}
	}
	return uses
}
