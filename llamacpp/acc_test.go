package llamacpp

import (
	"testing"
)

// TestViewAccGradient: the gradients of views (disjoint and overlapping)
// of one tensor, and of blocks assembled by Acc, add up.
func TestViewAccGradient(t *testing.T) {
	be, static := cpuStatic(t)
	w := SetName(static.NewTensor(TypeF32, 2, 4, 3, 2), "w")
	SetParam(w)
	gacc := static.NewTensor(TypeF32, 2, 4, 3, 2)
	lossGrad := static.NewTensor(TypeF32, 1)
	buf, err := be.AllocContextTensors(static)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	buf.Clear(0)
	SetF32(w, seq(48, 1))
	SetF32(lossGrad, []float32{1})

	ctx, err := NewContext(64, 2, 256, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Free()
	in := func(ne ...int64) Tensor { x := ctx.NewTensor(TypeF32, ne...); SetInput(x); return x }
	zero, y1, y2 := in(2, 4, 3, 2), in(2, 4, 3, 2), in(2, 4, 3, 2)
	u := ctx.Scale(w, 1)
	rows := func(from, to int64) Tensor {
		r := ctx.Cont(ctx.View4D(u, [4]int64{2, to - from, 3, 2}, [3]uintptr{u.Nb[1], u.Nb[2], u.Nb[3]}, uintptr(from)*u.Nb[1]))
		return ctx.Reshape(r, r.Ne[:]...)
	}
	a := ctx.Acc(zero, rows(0, 2), [3]uintptr{zero.Nb[1], zero.Nb[2], zero.Nb[3]}, 0)
	a = ctx.Acc(a, rows(2, 4), [3]uintptr{zero.Nb[1], zero.Nb[2], zero.Nb[3]}, 2*zero.Nb[1])
	loss := ctx.Add(ctx.Sum(ctx.Mul(a, y1)), ctx.Sum(ctx.Mul(rows(0, 4), y2)))
	SetLoss(loss)
	SetOutput(loss)
	g, sched := backwardGraph(t, be, ctx, loss, map[Tensor]Tensor{w: gacc, loss: lossGrad})
	defer sched.Free()
	ys1, ys2 := seq(48, 0.5), seq(48, 100)
	SetF32(zero, make([]float32, 48))
	SetF32(y1, ys1)
	SetF32(y2, ys2)
	if err := sched.Compute(g); err != nil {
		t.Fatal(err)
	}
	grad := make([]float32, 48)
	GetF32(gacc, grad)
	for i := range grad {
		if want := ys1[i] + ys2[i]; grad[i] != want {
			t.Errorf("grad[%d] = %g, want %g (all %v)", i, grad[i], want, grad)
		}
	}
}

func seq(n int, from float32) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = from + float32(i)
	}
	return s
}
