package llamacpp

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestUseOuterProducts rewrites c = mul_mat(a, b) over a contraction of 8
// into out_prod(aᵀ, bᵀ): the result must be the product, and a rewrite
// whose copies come after the product, or are not the operands'
// transposes, must be refused.
func TestUseOuterProducts(t *testing.T) {
	const k, m, n = 8, 70, 45
	be, a, b, av, bv := operands(t, 1, k, m, n)

	build := func(copiesFirst bool) (Context, Graph, OuterProduct) {
		ctx, err := NewContext(16, 1, 16, false)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ctx.Free)
		g := ctx.NewGraph(16, false)
		aT, bT := ctx.Cont(ctx.Transpose(a)), ctx.Cont(ctx.Transpose(b))
		c := ctx.MulMat(a, b)
		if copiesFirst {
			g.BuildForward(aT)
			g.BuildForward(bT)
		}
		g.BuildForward(c)
		g.BuildForward(aT)
		g.BuildForward(bT)
		return ctx, g, OuterProduct{Product: c, AT: aT, BT: bT}
	}

	_, g, p := build(false)
	if err := g.UseOuterProducts([]OuterProduct{p}); err == nil {
		t.Error("copies after the product: rewritten")
	}
	_, g, p = build(true)
	if err := g.UseOuterProducts([]OuterProduct{{Product: p.Product, AT: p.BT, BT: p.AT}}); err == nil {
		t.Error("copies swapped: rewritten")
	}
	if err := g.UseOuterProducts([]OuterProduct{p}); err != nil {
		t.Fatal(err)
	}
	if p.Product.Op == opIDs.mulMat {
		t.Fatal("the product is still a mul_mat")
	}
	compute(t, be, g)
	got := make([]float32, m*n)
	GetF32(p.Product, got)
	checkProduct(t, got, av, bv, k, m, n, false)
}

// TestUseWideOuterProducts: the gradient of a [8, 96] parameter, an outer
// product with rows of 8, is rewritten to rows of 96 and still accumulates
// the right sums into the parameter's gradient accumulator.
func TestUseWideOuterProducts(t *testing.T) {
	be, static := cpuStatic(t)
	const r, out, n = 8, 96, 40
	w := SetName(static.NewTensor(TypeF32, r, out), "w")
	SetParam(w)
	gacc := static.NewTensor(TypeF32, r, out)
	lossGrad := static.NewTensor(TypeF32, 1)
	buf, err := be.AllocContextTensors(static)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(buf.Free)
	rng := rand.New(rand.NewPCG(3, 4))
	normal := func(k int) []float32 {
		v := make([]float32, k)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	ws, xs, prior := normal(r*out), normal(r*n), normal(r*out)
	SetF32(w, ws)
	SetF32(lossGrad, []float32{1})

	ctx, err := NewContext(64, 2, 256, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctx.Free)
	x := ctx.NewTensor(TypeF32, r, n)
	SetInput(x)
	loss := ctx.Sum(ctx.Sqr(ctx.MulMat(w, x)))
	SetLoss(loss)
	SetOutput(loss)
	g, sched := backwardGraph(t, be, ctx, loss, map[Tensor]Tensor{w: gacc, loss: lossGrad})
	t.Cleanup(sched.Free)
	n0 := g.NNodes()
	widened, err := g.UseWideOuterProducts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if widened != 1 || g.NNodes() != n0+1 {
		t.Fatalf("%d outer products widened, %d nodes added; want 1 and 1", widened, g.NNodes()-n0)
	}
	if err := sched.Alloc(g); err != nil {
		t.Fatal(err)
	}
	SetF32(x, xs)
	SetF32(gacc, prior)
	if err := sched.Compute(g); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, r*out)
	GetF32(gacc, got)
	for o := range out {
		y := make([]float64, n)
		for j := range n {
			for k := range r {
				y[j] += float64(ws[o*r+k]) * float64(xs[j*r+k])
			}
		}
		for k := range r {
			want := float64(prior[o*r+k])
			for j := range n {
				want += 2 * y[j] * float64(xs[j*r+k])
			}
			if d := math.Abs(float64(got[o*r+k]) - want); d > 1e-4*(1+math.Abs(want)) {
				t.Fatalf("grad[%d, %d] = %g, want %g", k, o, got[o*r+k], want)
			}
		}
	}
}

// TestUseDirectProducts: a product taken transposed and copied back,
// c = cont(transpose(reshape(mul_mat(a, b)))), becomes mul_mat(b, a) with
// the same values, and the transposed product is no longer computed.
func TestUseDirectProducts(t *testing.T) {
	const k, m, n = 32, 24, 40
	be, a, b, av, bv := operands(t, 5, k, m, n)
	ctx, err := NewContext(16, 1, 16, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctx.Free)
	g := ctx.NewGraph(16, false)
	p := ctx.MulMat(a, b) // [m, n]
	c := ctx.Cont(ctx.Transpose(ctx.Reshape(p, p.Ne[:]...)))
	g.BuildForward(c)
	if got, err := g.UseDirectProducts([]Tensor{c}); err != nil || got != 1 {
		t.Fatalf("rewrote %d copies, %v; want 1", got, err)
	}
	if c.Op != opIDs.mulMat || p.Op != opIDs.none {
		t.Fatalf("ops: copy %d, product %d; want mul_mat (%d) and none (%d)", c.Op, p.Op, opIDs.mulMat, opIDs.none)
	}
	compute(t, be, g)
	got := make([]float32, n*m)
	GetF32(c, got)
	checkProduct(t, got, av, bv, k, m, n, true)
}

// operands returns a CPU backend and two random F32 matrices a [k, m] and
// b [k, n] on it, with their values.
func operands(t *testing.T, seed uint64, k, m, n int64) (be Backend, a, b Tensor, av, bv []float32) {
	t.Helper()
	be, static := cpuStatic(t)
	a, b = static.NewTensor(TypeF32, k, m), static.NewTensor(TypeF32, k, n)
	buf, err := be.AllocContextTensors(static)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(buf.Free)
	r := rand.New(rand.NewPCG(seed, 2))
	av, bv = make([]float32, k*m), make([]float32, k*n)
	for _, v := range [][]float32{av, bv} {
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
	}
	SetF32(a, av)
	SetF32(b, bv)
	return be, a, b, av, bv
}

// compute allocates g on be and runs it.
func compute(t *testing.T, be Backend, g Graph) {
	t.Helper()
	sched, err := NewSched([]Backend{be}, 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sched.Free)
	if err := sched.Alloc(g); err != nil {
		t.Fatal(err)
	}
	if err := sched.Compute(g); err != nil {
		t.Fatal(err)
	}
}

// checkProduct checks got against aᵀ·b of the k×m and k×n values av and
// bv, laid out [m, n] (ne0 = m) or, transposed, [n, m].
func checkProduct(t *testing.T, got, av, bv []float32, k, m, n int, transposed bool) {
	t.Helper()
	for i := range m {
		for j := range n {
			var want float64
			for l := range k {
				want += float64(av[i*k+l]) * float64(bv[j*k+l])
			}
			at := j*m + i
			if transposed {
				at = i*n + j
			}
			if d := math.Abs(float64(got[at]) - want); d > 1e-4*(1+math.Abs(want)) {
				t.Fatalf("product[%d, %d] = %g, want %g", i, j, got[at], want)
			}
		}
	}
}
