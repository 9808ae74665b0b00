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
	r := &allocReplay{inplace: inplaceOps(), ext: map[uintptr]bool{}, st: map[uintptr]*allocState{}}
	for _, x := range external {
		r.ext[uintptr(unsafe.Pointer(x))] = true
	}
	n := g.NNodes()
	nodes := make([]llamacpp.Tensor, n)
	for i := range n {
		nodes[i] = g.Node(i)
	}
	r.countReaders(nodes)
	// Inputs first: nothing may overwrite them before they are read.
	for _, x := range nodes {
		for _, src := range x.Src {
			if src != 0 && tensorAt(src).Flags&llamacpp.TensorFlagInput != 0 {
				r.alloc(src)
			}
		}
		if x.Flags&llamacpp.TensorFlagInput != 0 {
			r.alloc(uintptr(unsafe.Pointer(x)))
		}
	}
	for _, x := range nodes {
		for _, src := range x.Src {
			if src != 0 {
				r.alloc(src)
			}
		}
		r.place(x)
		r.release(x)
	}
	return r.peak
}

// allocReplay is graphBytes' replay of the allocator: each tensor's state
// by address, and the bytes live now and at most.
type allocReplay struct {
	inplace    map[int32]bool
	ext        map[uintptr]bool
	st         map[uintptr]*allocState
	live, peak int64
}

// allocState is ggml_gallocr's hash_node: how many nodes and views still
// read a tensor, and its memory.
type allocState struct {
	children, views int
	size            int64
	live            bool
}

func (r *allocReplay) get(p uintptr) *allocState {
	s := r.st[p]
	if s == nil {
		s = &allocState{}
		r.st[p] = s
	}
	return s
}

// countReaders counts each tensor's readers: the nodes taking it as a
// source and the views of it.
func (r *allocReplay) countReaders(nodes []llamacpp.Tensor) {
	for _, x := range nodes {
		if x.ViewSrc != 0 {
			r.get(x.ViewSrc).views++
		}
		for _, src := range x.Src {
			if src != 0 {
				r.get(src).children++
			}
		}
	}
}

// own says whether the allocator places x (no buffer of its own, not a view).
func (r *allocReplay) own(x llamacpp.Tensor) bool {
	return x.Buffer == 0 && x.Data == 0 && x.ViewSrc == 0 && !r.ext[uintptr(unsafe.Pointer(x))]
}

func (r *allocReplay) alloc(p uintptr) {
	x := tensorAt(p)
	s := r.get(p)
	if !r.own(x) || s.live || s.size > 0 {
		return
	}
	s.size = int64(llamacpp.Nbytes(x)+63) / 64 * 64
	s.live = true
	r.live += s.size
	r.peak = max(r.peak, r.live)
}

func (r *allocReplay) free(p uintptr) {
	x := tensorAt(p)
	s := r.get(p)
	if !s.live || x.Flags&llamacpp.TensorFlagOutput != 0 {
		return
	}
	s.live = false
	r.live -= s.size
}

// place gives node x memory, if the allocator places it: a parent's when
// x may run in place and nothing else reads that parent, else new.
func (r *allocReplay) place(x llamacpp.Tensor) {
	p := uintptr(unsafe.Pointer(x))
	if !r.own(x) || r.get(p).live || r.get(p).size != 0 {
		return
	}
	if r.inplace[x.Op] {
		for _, src := range x.Src {
			if src == 0 {
				continue
			}
			par := tensorAt(src)
			ps := r.get(src)
			if !r.own(par) || !ps.live || par.Flags&llamacpp.TensorFlagOutput != 0 || ps.children != 1 || ps.views != 0 || llamacpp.Nbytes(par) != llamacpp.Nbytes(x) {
				continue
			}
			// The node takes over the parent's memory.
			s := r.get(p)
			s.size, s.live = ps.size, true
			ps.live, ps.size = false, 0
			return
		}
	}
	r.alloc(p)
}

// release frees, once node x has run, each parent that x was the last
// reader of (for a view, the tensor it views, once its last view is done).
func (r *allocReplay) release(x llamacpp.Tensor) {
	for _, src := range x.Src {
		if src == 0 {
			continue
		}
		ps := r.get(src)
		ps.children--
		if ps.children != 0 || ps.views != 0 {
			continue
		}
		par := tensorAt(src)
		if par.ViewSrc != 0 {
			vs := r.get(par.ViewSrc)
			vs.views--
			if vs.views == 0 && vs.children == 0 {
				r.free(par.ViewSrc)
			}
			continue
		}
		r.free(src)
	}
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
