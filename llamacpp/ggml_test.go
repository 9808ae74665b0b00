package llamacpp

import (
	"math"
	"testing"
	"unsafe"
)

func TestGGMLLayout(t *testing.T) {
	want := readLayouts(t)
	var ts TensorStruct
	var ip initParams
	tests := []goLayout{
		{"ggml_tensor", unsafe.Sizeof(ts), map[string]uintptr{
			"buffer": unsafe.Offsetof(ts.Buffer), "ne": unsafe.Offsetof(ts.Ne), "nb": unsafe.Offsetof(ts.Nb),
			"op": unsafe.Offsetof(ts.Op), "op_params": unsafe.Offsetof(ts.OpParams), "flags": unsafe.Offsetof(ts.Flags),
			"src": unsafe.Offsetof(ts.Src), "view_src": unsafe.Offsetof(ts.ViewSrc), "view_offs": unsafe.Offsetof(ts.ViewOffs),
			"data": unsafe.Offsetof(ts.Data), "name": unsafe.Offsetof(ts.Name), "extra": unsafe.Offsetof(ts.Extra),
		}},
		{"ggml_init_params", unsafe.Sizeof(ip), map[string]uintptr{
			"mem_buffer": unsafe.Offsetof(ip.MemBuffer), "no_alloc": unsafe.Offsetof(ip.NoAlloc),
		}},
	}
	checkLayouts(t, want, tests)
}

// cpuStatic returns a CPU backend on one thread and a context for a few
// static tensors, both freed when the test ends.
func cpuStatic(t *testing.T) (Backend, Context) {
	t.Helper()
	testLib(t)
	be, err := NewBackend(DeviceCPU, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Free() })
	static, err := NewContext(8, 0, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { static.Free() })
	return be, static
}

// TestGGMLGradient builds loss = sum((w ⊙ x − y)²) on the CPU backend,
// differentiates it, checks the gradient 2(w⊙x−y)⊙x and then takes one AdamW
// step, whose first update is −lr·sign(grad) (bias-corrected moments).
func TestGGMLGradient(t *testing.T) {
	be, static := cpuStatic(t)
	w := SetName(static.NewTensor(TypeF32, 4), "w")
	SetParam(w)
	gacc := static.NewTensor(TypeF32, 4)
	m := static.NewTensor(TypeF32, 4)
	v := static.NewTensor(TypeF32, 4)
	lossGrad := static.NewTensor(TypeF32, 1)
	adam := static.NewTensor(TypeF32, 7)
	buf, err := be.AllocContextTensors(static)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	buf.Clear(0)
	SetF32(w, []float32{1, -2, 0.5, 3})
	SetF32(lossGrad, []float32{1})

	ctx, err := NewContext(64, 2, 256, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Free()
	x := ctx.NewTensor(TypeF32, 4)
	SetInput(x)
	y := ctx.NewTensor(TypeF32, 4)
	SetInput(y)
	loss := ctx.Sum(ctx.Sqr(ctx.Sub(ctx.Mul(w, x), y)))
	SetLoss(loss)
	SetOutput(loss)
	g, sched := backwardGraph(t, be, ctx, loss, map[Tensor]Tensor{w: gacc, loss: lossGrad})
	defer sched.Free()
	xs, ys := []float32{2, 1, -1, 0.5}, []float32{1, 1, 1, 1}
	SetF32(x, xs)
	SetF32(y, ys)
	if err := sched.Compute(g); err != nil {
		t.Fatal(err)
	}
	ws := []float32{1, -2, 0.5, 3}
	var wantLoss float64
	wantGrad := make([]float32, 4)
	for i := range ws {
		d := ws[i]*xs[i] - ys[i]
		wantLoss += float64(d * d)
		wantGrad[i] = 2 * d * xs[i]
	}
	got := make([]float32, 1)
	GetF32(loss, got)
	if math.Abs(float64(got[0])-wantLoss) > 1e-5 {
		t.Errorf("loss: got %g, want %g", got[0], wantLoss)
	}
	grad := make([]float32, 4)
	GetF32(gacc, grad)
	for i := range grad {
		if math.Abs(float64(grad[i]-wantGrad[i])) > 1e-5 {
			t.Errorf("grad[%d]: got %g, want %g", i, grad[i], wantGrad[i])
		}
	}

	// One AdamW step in its own graph.
	octx, err := NewContext(8, 1, 16, false)
	if err != nil {
		t.Fatal(err)
	}
	defer octx.Free()
	og := octx.NewGraph(16, false)
	og.BuildForward(octx.OptStepAdamW(w, gacc, m, v, adam))
	const lr = 0.1
	SetF32(adam, []float32{lr, 0.9, 0.999, 1e-8, 0, 1 / (1 - 0.9), 1 / (1 - 0.999)})
	if err := sched.Alloc(og); err != nil {
		t.Fatal(err)
	}
	if err := sched.Compute(og); err != nil {
		t.Fatal(err)
	}
	after := make([]float32, 4)
	GetF32(w, after)
	for i := range after {
		want := ws[i] - lr*float32(math.Copysign(1, float64(wantGrad[i])))
		if math.Abs(float64(after[i]-want)) > 1e-4 {
			t.Errorf("w[%d] after AdamW: got %g, want %g", i, after[i], want)
		}
	}
}

func TestDevices(t *testing.T) {
	testLib(t)
	devs, err := Devices()
	if err != nil {
		t.Fatal(err)
	}
	var cpu bool
	for _, d := range devs {
		cpu = cpu || d.Type == DeviceCPU
	}
	if !cpu {
		t.Errorf("got devices %+v, want a CPU device", devs)
	}
}

// backwardGraph builds and allocates the forward and backward graph of
// loss on be, accumulating the gradient of each tensor of accs (the
// parameters, and the loss with its seed gradient) into its accumulator.
func backwardGraph(t *testing.T, be Backend, ctx Context, loss Tensor, accs map[Tensor]Tensor) (Graph, Sched) {
	t.Helper()
	g := ctx.NewGraph(256, true)
	g.BuildForward(loss)
	nodeAccs := make([]Tensor, g.NNodes())
	for i := range nodeAccs {
		nodeAccs[i] = accs[g.Node(i)]
	}
	g.BuildBackward(ctx, nodeAccs)
	sched, err := NewSched([]Backend{be}, 256)
	if err != nil {
		t.Fatal(err)
	}
	if err := sched.Alloc(g); err != nil {
		sched.Free()
		t.Fatal(err)
	}
	return g, sched
}
