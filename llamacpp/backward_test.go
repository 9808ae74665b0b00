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
	be, static := cpuStatic(t)
	const k, m, n = 8, 70, 45
	a := static.NewTensor(TypeF32, k, m)
	b := static.NewTensor(TypeF32, k, n)
	buf, err := be.AllocContextTensors(static)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(buf.Free)
	r := rand.New(rand.NewPCG(1, 2))
	av, bv := make([]float32, k*m), make([]float32, k*n)
	for i := range av {
		av[i] = float32(r.NormFloat64())
	}
	for i := range bv {
		bv[i] = float32(r.NormFloat64())
	}
	SetF32(a, av)
	SetF32(b, bv)

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
	got := make([]float32, m*n)
	GetF32(p.Product, got)
	for j := range n {
		for i := range m {
			var want float64
			for l := range k {
				want += float64(av[i*k+l]) * float64(bv[j*k+l])
			}
			if d := math.Abs(float64(got[j*m+i]) - want); d > 1e-5*(1+math.Abs(want)) {
				t.Fatalf("c[%d, %d] = %g, want %g", i, j, got[j*m+i], want)
			}
		}
	}
}
