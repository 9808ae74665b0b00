package train

import (
	"sync"
	"unsafe"

	"github.com/omar-selfplay/omar/llamacpp"
)

// graphBytes predicts the compute memory ggml's graph allocator takes for
// graph g before it is allocated, by replaying the allocator's walk
// (ggml-alloc.c, ggml_gallocr_alloc_graph_impl): tensors without memory of
// their own are allocated in node order, a view takes none, an operation
// that may run in place takes over a parent that nothing else reads, and a
// tensor is freed once every node reading it (directly or through a view)
// has run, unless it is an output. It returns the most bytes live at once;
// the allocator's best-fit buffer also holds the gaps between them, which
// the calibration in docs/results/2026-12-07-training-memory.md measures.
//
// external are tensors that will have memory of their own by the time the
// graph runs (a segmented pass's attnState): not the allocator's.
func graphBytes(g llamacpp.Graph, external ...llamacpp.Tensor) int64 {
	inplace := inplaceOps()
	ext := map[uintptr]bool{}
	for _, x := range external {
		ext[uintptr(unsafe.Pointer(x))] = true
	}
	type state struct {
		children, views int
		size            int64
		live            bool
	}
	st := map[uintptr]*state{}
	get := func(p uintptr) *state {
		s := st[p]
		if s == nil {
			s = &state{}
			st[p] = s
		}
		return s
	}
	n := g.NNodes()
	nodes := make([]llamacpp.Tensor, n)
	for i := range n {
		x := g.Node(i)
		nodes[i] = x
		if x.ViewSrc != 0 {
			get(x.ViewSrc).views++
		}
		for _, src := range x.Src {
			if src != 0 {
				get(src).children++
			}
		}
	}
	var live, peak int64
	// own: the allocator places it (no buffer of its own, not a view).
	own := func(x llamacpp.Tensor) bool {
		return x.Buffer == 0 && x.Data == 0 && x.ViewSrc == 0 && !ext[uintptr(unsafe.Pointer(x))]
	}
	alloc := func(p uintptr) {
		x := tensorAt(p)
		s := get(p)
		if !own(x) || s.live || s.size > 0 {
			return
		}
		s.size = int64(llamacpp.Nbytes(x)+63) / 64 * 64
		s.live = true
		live += s.size
		peak = max(peak, live)
	}
	free := func(p uintptr) {
		x := tensorAt(p)
		s := get(p)
		if !s.live || x.Flags&llamacpp.TensorFlagOutput != 0 {
			return
		}
		s.live = false
		live -= s.size
	}
	// Inputs first: nothing may overwrite them before they are read.
	for _, x := range nodes {
		for _, src := range x.Src {
			if src != 0 && tensorAt(src).Flags&llamacpp.TensorFlagInput != 0 {
				alloc(src)
			}
		}
		if x.Flags&llamacpp.TensorFlagInput != 0 {
			alloc(uintptr(unsafe.Pointer(x)))
		}
	}
	for _, x := range nodes {
		p := uintptr(unsafe.Pointer(x))
		for _, src := range x.Src {
			if src != 0 {
				alloc(src)
			}
		}
		if own(x) && !get(p).live && get(p).size == 0 {
			reused := false
			if inplace[x.Op] {
				for _, src := range x.Src {
					if src == 0 {
						continue
					}
					par := tensorAt(src)
					ps := get(src)
					if !own(par) || !ps.live || par.Flags&llamacpp.TensorFlagOutput != 0 || ps.children != 1 || ps.views != 0 || llamacpp.Nbytes(par) != llamacpp.Nbytes(x) {
						continue
					}
					// The node takes over the parent's memory.
					s := get(p)
					s.size, s.live = ps.size, true
					ps.live, ps.size = false, 0
					reused = true
					break
				}
			}
			if !reused {
				alloc(p)
			}
		}
		for _, src := range x.Src {
			if src == 0 {
				continue
			}
			ps := get(src)
			ps.children--
			if ps.children != 0 || ps.views != 0 {
				continue
			}
			par := tensorAt(src)
			if par.ViewSrc != 0 {
				vs := get(par.ViewSrc)
				vs.views--
				if vs.views == 0 && vs.children == 0 {
					free(par.ViewSrc)
				}
				continue
			}
			free(src)
		}
	}
	return peak
}

// tensorAt is the tensor at a source pointer of a node (memory of a ggml
// context, never Go memory).
func tensorAt(p uintptr) llamacpp.Tensor {
	return *(*llamacpp.Tensor)(unsafe.Pointer(&p))
}

var inplaceOnce struct {
	sync.Once
	ops map[int32]bool
}

// inplaceOps are the operations ggml's allocator lets run in the memory of
// a parent (ggml_op_can_inplace) that the trainer's graphs use.
func inplaceOps() map[int32]bool {
	inplaceOnce.Do(func() {
		inplaceOnce.ops = map[int32]bool{}
		c, err := llamacpp.NewContext(64, 0, 0, false)
		if err != nil {
			return
		}
		defer c.Free()
		a, b := c.NewTensor(llamacpp.TypeF32, 4, 4), c.NewTensor(llamacpp.TypeF32, 4, 4)
		pos := c.NewTensor(llamacpp.TypeI32, 4)
		r := c.Reshape(a, 4, 1, 4)
		for _, x := range []llamacpp.Tensor{
			c.Scale(a, 2), c.Add(a, b), c.Sub(a, b), c.Mul(a, b), c.Div(a, b),
			c.Sqr(a), c.Sqrt(a), c.Log(a), c.Silu(a), c.SoftMaxExt(a, nil, 1, 0),
			c.RopeExt(r, pos, nil, 4, 0, 16, 10000, 1),
		} {
			inplaceOnce.ops[x.Op] = true
		}
	})
	return inplaceOnce.ops
}
