package llamacpp

// ggml.h: contexts, tensors, operators, graphs and automatic differentiation.
//
// These bindings cover what the trainer needs to build a model graph from Go,
// differentiate it with ggml_build_backward_expand and step AdamW. Pointers to
// C objects are kept as typed uintptr-sized handles; the only struct read from
// Go is ggml_tensor, whose layout is pinned in layout_ggml_test.go.

import (
	"errors"
	"fmt"
	"syscall"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Type is enum ggml_type.
type Type int32

// The ggml types the trainer uses.
const (
	TypeF32  Type = 0
	TypeF16  Type = 1
	TypeBF16 Type = 30
	TypeQ8_0 Type = 8
	TypeI32  Type = 26
)

// Tensor flags (enum ggml_tensor_flag).
const (
	TensorFlagInput  = 1
	TensorFlagOutput = 2
	TensorFlagParam  = 4
	TensorFlagLoss   = 8
)

// RopeTypeNeox is GGML_ROPE_TYPE_NEOX (rotate the two halves of a head
// instead of adjacent pairs); 0 is the normal (llama) mode.
const RopeTypeNeox = 2

// maxDims is GGML_MAX_DIMS.
const maxDims = 4

// TensorStruct mirrors struct ggml_tensor of ggml 0.25.1 byte for byte
// (size 336, see /work/shared/design/llama-v0.5.0-layout.txt).
type TensorStruct struct {
	Type     Type
	_        [4]byte
	Buffer   uintptr
	Ne       [maxDims]int64
	Nb       [maxDims]uintptr
	Op       int32
	OpParams [16]int32
	Flags    int32
	Src      [10]uintptr
	ViewSrc  uintptr
	ViewOffs uintptr
	Data     uintptr
	Name     [64]byte
	Extra    uintptr
	Padding  [8]byte
}

// Tensor is a struct ggml_tensor * owned by a ggml context.
type Tensor = *TensorStruct

// Context is a struct ggml_context *.
type Context uintptr

// Graph is a struct ggml_cgraph *.
type Graph uintptr

// initParams mirrors struct ggml_init_params (size 24).
type initParams struct {
	MemSize   uintptr
	MemBuffer uintptr
	NoAlloc   bool
	_         [7]byte
}

// Raw symbols. Tensor arguments and results are uintptr so that purego never
// has to reason about Go pointers into C memory.
var (
	ggmlInit                func(p initParams) uintptr                   // struct ggml_context * ggml_init(struct ggml_init_params params)
	ggmlFree                func(ctx uintptr)                            // void ggml_free(struct ggml_context * ctx)
	ggmlTensorOverhead      func() uintptr                               // size_t ggml_tensor_overhead(void)
	ggmlGraphOverheadCustom func(size uintptr, grads bool) uintptr       // size_t ggml_graph_overhead_custom(size_t size, bool grads)
	ggmlNewTensor1D         func(ctx uintptr, t Type, ne0 int64) uintptr // ggml_new_tensor_1d
	ggmlNewTensor2D         func(ctx uintptr, t Type, ne0, ne1 int64) uintptr
	ggmlNewTensor3D         func(ctx uintptr, t Type, ne0, ne1, ne2 int64) uintptr
	ggmlNewTensor4D         func(ctx uintptr, t Type, ne0, ne1, ne2, ne3 int64) uintptr
	ggmlSetName             func(t uintptr, name string) uintptr // struct ggml_tensor * ggml_set_name(struct ggml_tensor * tensor, const char * name)
	ggmlSetInput            func(t uintptr)                      // void ggml_set_input(struct ggml_tensor * tensor)
	ggmlSetOutput           func(t uintptr)                      // void ggml_set_output(struct ggml_tensor * tensor)
	ggmlSetParam            func(t uintptr)                      // void ggml_set_param(struct ggml_tensor * tensor)
	ggmlSetLoss             func(t uintptr)                      // void ggml_set_loss(struct ggml_tensor * tensor)
	ggmlNbytes              func(t uintptr) uintptr              // size_t ggml_nbytes(const struct ggml_tensor * tensor)
	ggmlNelements           func(t uintptr) int64                // int64_t ggml_nelements(const struct ggml_tensor * tensor)
	ggmlGetRows             func(ctx, a, b uintptr) uintptr
	ggmlRMSNorm             func(ctx, a uintptr, eps float32) uintptr
	ggmlMul                 func(ctx, a, b uintptr) uintptr
	ggmlAdd                 func(ctx, a, b uintptr) uintptr
	ggmlSub                 func(ctx, a, b uintptr) uintptr
	ggmlDiv                 func(ctx, a, b uintptr) uintptr
	ggmlMulMat              func(ctx, a, b uintptr) uintptr
	ggmlOutProd             func(ctx, a, b uintptr) uintptr
	ggmlRopeExt             func(ctx, a, b, c uintptr, nDims, mode, nCtxOrig int32, freqBase, freqScale, extFactor, attnFactor, betaFast, betaSlow float32) uintptr
	ggmlSoftMax             func(ctx, a uintptr) uintptr
	ggmlSoftMaxExt          func(ctx, a, mask uintptr, scale, maxBias float32) uintptr
	ggmlSoftMaxExtBack      func(ctx, a, b uintptr, scale, maxBias float32) uintptr
	ggmlAccInplace          func(ctx, a, b uintptr, nb1, nb2, nb3, offset uintptr) uintptr
	ggmlScale               func(ctx, a uintptr, s float32) uintptr
	ggmlScaleBias           func(ctx, a uintptr, s, b float32) uintptr
	ggmlPermute             func(ctx, a uintptr, ax0, ax1, ax2, ax3 int32) uintptr
	ggmlTranspose           func(ctx, a uintptr) uintptr
	ggmlCont                func(ctx, a uintptr) uintptr
	ggmlReshape2D           func(ctx, a uintptr, ne0, ne1 int64) uintptr
	ggmlReshape3D           func(ctx, a uintptr, ne0, ne1, ne2 int64) uintptr
	ggmlReshape4D           func(ctx, a uintptr, ne0, ne1, ne2, ne3 int64) uintptr
	ggmlView1D              func(ctx, a uintptr, ne0 int64, offset uintptr) uintptr
	ggmlView2D              func(ctx, a uintptr, ne0, ne1 int64, nb1, offset uintptr) uintptr
	ggmlView4D              func(ctx, a uintptr, ne0, ne1, ne2, ne3 int64, nb1, nb2, nb3, offset uintptr) uintptr
	ggmlAcc                 func(ctx, a, b uintptr, nb1, nb2, nb3, offset uintptr) uintptr
	ggmlSilu                func(ctx, a uintptr) uintptr
	ggmlSumRows             func(ctx, a uintptr) uintptr
	ggmlSum                 func(ctx, a uintptr) uintptr
	ggmlMean                func(ctx, a uintptr) uintptr
	ggmlExp                 func(ctx, a uintptr) uintptr
	ggmlLog                 func(ctx, a uintptr) uintptr
	ggmlStep                func(ctx, a uintptr) uintptr
	ggmlSgn                 func(ctx, a uintptr) uintptr
	ggmlSqr                 func(ctx, a uintptr) uintptr
	ggmlSqrt                func(ctx, a uintptr) uintptr
	ggmlNeg                 func(ctx, a uintptr) uintptr
	ggmlAbs                 func(ctx, a uintptr) uintptr
	ggmlRepeat              func(ctx, a, b uintptr) uintptr
	ggmlRepeat4D            func(ctx, a uintptr, ne0, ne1, ne2, ne3 int64) uintptr
	ggmlCpy                 func(ctx, a, b uintptr) uintptr
	ggmlArgmax              func(ctx, a uintptr) uintptr
	ggmlOptStepAdamW        func(ctx, a, grad, m, v, params uintptr) uintptr
	ggmlNewGraphCustom      func(ctx uintptr, size uintptr, grads bool) uintptr
	ggmlBuildForwardExpand  func(g, t uintptr)
	ggmlBuildBackwardExpand func(ctx, g uintptr, gradAccs *uintptr)
	ggmlGraphReset          func(g uintptr)
	ggmlGraphNNodes         func(g uintptr) int32
	ggmlGraphNode           func(g uintptr, i int32) uintptr
	ggmlGraphGetGrad        func(g, t uintptr) uintptr
	ggmlGraphGetGradAcc     func(g, t uintptr) uintptr
	ggmlGetFirstTensor      func(ctx uintptr) uintptr
	ggmlGetNextTensor       func(ctx, t uintptr) uintptr
	ggmlVersion             func() string
	// size_t ggml_quantize_chunk(enum ggml_type type, const float * src, void * dst, int64_t start, int64_t nrows, int64_t n_per_row, const float * imatrix)
	ggmlQuantizeChunk func(t Type, src *float32, dst *byte, start, nrows, nPerRow int64, imatrix *float32) uintptr
	ggmlTypeName      func(t Type) string            // const char * ggml_type_name(enum ggml_type type)
	ggmlRowSize       func(t Type, ne int64) uintptr // size_t ggml_row_size(enum ggml_type type, int64_t ne)
	ggmlBlckSize      func(t Type) int64             // int64_t ggml_blck_size(enum ggml_type type)
)

// TypeCount is GGML_TYPE_COUNT of ggml 0.25.1: type ids at or above it are
// unknown to the library.
const TypeCount = 43

func init() {
	register(func(libs libraries) error {
		return bindAll(libs.ggmlBase, []binding{
			{&ggmlInit, "ggml_init"},
			{&ggmlFree, "ggml_free"},
			{&ggmlTensorOverhead, "ggml_tensor_overhead"},
			{&ggmlGraphOverheadCustom, "ggml_graph_overhead_custom"},
			{&ggmlNewTensor1D, "ggml_new_tensor_1d"},
			{&ggmlNewTensor2D, "ggml_new_tensor_2d"},
			{&ggmlNewTensor3D, "ggml_new_tensor_3d"},
			{&ggmlNewTensor4D, "ggml_new_tensor_4d"},
			{&ggmlSetName, "ggml_set_name"},
			{&ggmlSetInput, "ggml_set_input"},
			{&ggmlSetOutput, "ggml_set_output"},
			{&ggmlSetParam, "ggml_set_param"},
			{&ggmlSetLoss, "ggml_set_loss"},
			{&ggmlNbytes, "ggml_nbytes"},
			{&ggmlNelements, "ggml_nelements"},
			{&ggmlGetRows, "ggml_get_rows"},
			{&ggmlRMSNorm, "ggml_rms_norm"},
			{&ggmlMul, "ggml_mul"},
			{&ggmlAdd, "ggml_add"},
			{&ggmlSub, "ggml_sub"},
			{&ggmlDiv, "ggml_div"},
			{&ggmlMulMat, "ggml_mul_mat"},
			{&ggmlOutProd, "ggml_out_prod"},
			{&ggmlRopeExt, "ggml_rope_ext"},
			{&ggmlSoftMax, "ggml_soft_max"},
			{&ggmlSoftMaxExt, "ggml_soft_max_ext"},
			{&ggmlScale, "ggml_scale"},
			{&ggmlScaleBias, "ggml_scale_bias"},
			{&ggmlPermute, "ggml_permute"},
			{&ggmlTranspose, "ggml_transpose"},
			{&ggmlCont, "ggml_cont"},
			{&ggmlReshape2D, "ggml_reshape_2d"},
			{&ggmlReshape3D, "ggml_reshape_3d"},
			{&ggmlReshape4D, "ggml_reshape_4d"},
			{&ggmlView1D, "ggml_view_1d"},
			{&ggmlView2D, "ggml_view_2d"},
			{&ggmlView4D, "ggml_view_4d"},
			{&ggmlAcc, "ggml_acc"},
			{&ggmlAccInplace, "ggml_acc_inplace"},
			{&ggmlSoftMaxExtBack, "ggml_soft_max_ext_back"},
			{&ggmlSilu, "ggml_silu"},
			{&ggmlSumRows, "ggml_sum_rows"},
			{&ggmlSum, "ggml_sum"},
			{&ggmlMean, "ggml_mean"},
			{&ggmlExp, "ggml_exp"},
			{&ggmlLog, "ggml_log"},
			{&ggmlStep, "ggml_step"},
			{&ggmlSgn, "ggml_sgn"},
			{&ggmlSqr, "ggml_sqr"},
			{&ggmlSqrt, "ggml_sqrt"},
			{&ggmlNeg, "ggml_neg"},
			{&ggmlAbs, "ggml_abs"},
			{&ggmlRepeat, "ggml_repeat"},
			{&ggmlRepeat4D, "ggml_repeat_4d"},
			{&ggmlCpy, "ggml_cpy"},
			{&ggmlArgmax, "ggml_argmax"},
			{&ggmlOptStepAdamW, "ggml_opt_step_adamw"},
			{&ggmlNewGraphCustom, "ggml_new_graph_custom"},
			{&ggmlBuildForwardExpand, "ggml_build_forward_expand"},
			{&ggmlBuildBackwardExpand, "ggml_build_backward_expand"},
			{&ggmlGraphReset, "ggml_graph_reset"},
			{&ggmlGraphNNodes, "ggml_graph_n_nodes"},
			{&ggmlGraphNode, "ggml_graph_node"},
			{&ggmlGraphGetGrad, "ggml_graph_get_grad"},
			{&ggmlGraphGetGradAcc, "ggml_graph_get_grad_acc"},
			{&ggmlGetFirstTensor, "ggml_get_first_tensor"},
			{&ggmlGetNextTensor, "ggml_get_next_tensor"},
			{&ggmlVersion, "ggml_version"},
			{&ggmlQuantizeChunk, "ggml_quantize_chunk"},
			{&ggmlTypeName, "ggml_type_name"},
			{&ggmlRowSize, "ggml_row_size"},
			{&ggmlBlckSize, "ggml_blck_size"},
		})
	})
}

// binding names one C symbol and the Go function variable it fills.
type binding struct {
	fn   any
	name string
}

// bindAll resolves every symbol first, so that a library of the wrong version
// gives one clear error instead of a panic inside purego.
func bindAll(lib uintptr, bs []binding) error {
	for _, b := range bs {
		sym, err := purego.Dlsym(lib, b.name)
		if err != nil || sym == 0 {
			return fmt.Errorf("llamacpp: symbol %s not found: %v", b.name, err)
		}
		purego.RegisterFunc(b.fn, sym)
	}
	return nil
}

func tp(t Tensor) uintptr { return uintptr(unsafe.Pointer(t)) }

// mk converts a C tensor pointer returned by ggml into a Tensor. The pointer
// addresses memory owned by a ggml context, never Go memory.
func mk(p uintptr) Tensor {
	return *(*Tensor)(unsafe.Pointer(&p))
}

// GGMLVersion returns ggml_version(), e.g. "0.25.1".
func GGMLVersion() string {
	if ggmlVersion == nil {
		return ""
	}
	return ggmlVersion()
}

// TypeName is ggml_type_name ("q8_0", …), or "" for an unknown id.
func TypeName(t Type) string {
	if t < 0 || t >= TypeCount {
		return ""
	}
	return ggmlTypeName(t)
}

// RowSize is the number of bytes of a row of n elements of type t, or an
// error when n is not a multiple of the type's block size.
func RowSize(t Type, n int64) (int, error) {
	if t < 0 || t >= TypeCount || ggmlBlckSize(t) == 0 {
		return 0, fmt.Errorf("llamacpp: unknown ggml type %d", t)
	}
	if b := ggmlBlckSize(t); n%b != 0 {
		return 0, fmt.Errorf("llamacpp: row of %d elements is not a multiple of the %s block size %d", n, TypeName(t), b)
	}
	return int(ggmlRowSize(t, n)), nil
}

// Quantize converts rows of nPerRow floats to type t (ggml_quantize_chunk,
// no importance matrix) and returns the encoded bytes.
func Quantize(t Type, src []float32, nPerRow int) ([]byte, error) {
	if nPerRow <= 0 || len(src)%nPerRow != 0 {
		return nil, fmt.Errorf("llamacpp: quantize %d values in rows of %d", len(src), nPerRow)
	}
	rs, err := RowSize(t, int64(nPerRow))
	if err != nil {
		return nil, err
	}
	rows := len(src) / nPerRow
	dst := make([]byte, rs*rows)
	if rows > 0 {
		ggmlQuantizeChunk(t, &src[0], &dst[0], 0, int64(rows), int64(nPerRow), nil)
	}
	return dst, nil
}

// NewContext creates a ggml context with room for maxTensors tensor headers
// and graphs of graphSize nodes (with gradients when grads is set). The
// context never holds tensor data (no_alloc): data lives in backend buffers.
func NewContext(maxTensors, graphs, graphSize int, grads bool) (Context, error) {
	if ggmlInit == nil {
		return 0, ErrNotLoaded
	}
	if maxTensors < 0 || graphs < 0 || graphSize < 0 {
		return 0, fmt.Errorf("llamacpp: ggml context of %d tensors and %d graphs of %d nodes", maxTensors, graphs, graphSize)
	}
	tensors, graph := uint64(ggmlTensorOverhead()), uint64(ggmlGraphOverheadCustom(uintptr(graphSize), grads))
	if tensors != 0 && uint64(maxTensors) > maxContextBytes/tensors || graph != 0 && uint64(graphs) > maxContextBytes/graph ||
		uint64(maxTensors)*tensors+uint64(graphs)*graph > maxContextBytes {
		return 0, fmt.Errorf("llamacpp: a ggml context of %d tensors and %d graphs of %d nodes needs more than %d bytes of headers", maxTensors, graphs, graphSize, uint64(maxContextBytes))
	}
	size := uintptr(uint64(maxTensors)*tensors + uint64(graphs)*graph)
	// ggml_init aborts the process (GGML_ASSERT(ctx->mem_buffer != NULL))
	// when its malloc fails, as it does under an address-space limit
	// (ulimit -v): map the same size first and give an error instead.
	if err := canMap(size); err != nil {
		return 0, fmt.Errorf("llamacpp: a ggml context of %d tensors and %d graphs of %d nodes needs %d bytes, which the process cannot map now (an address-space or memory limit?): %w", maxTensors, graphs, graphSize, size, err)
	}
	c := ggmlInit(initParams{MemSize: size, NoAlloc: true})
	if c == 0 {
		return 0, errors.New("llamacpp: ggml_init failed")
	}
	return Context(c), nil
}

// maxContextBytes bounds a ggml context's header memory: far above any
// graph this project builds, and it keeps the size arithmetic exact.
const maxContextBytes = 1 << 40

// canMap reports whether size bytes can be mapped now, by mapping them
// (untouched pages cost nothing) and unmapping them again.
func canMap(size uintptr) error {
	if size == 0 {
		return nil
	}
	b, err := syscall.Mmap(-1, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return err
	}
	return syscall.Munmap(b)
}

// Free releases the context and every tensor header in it.
func (c Context) Free() {
	if c != 0 {
		ggmlFree(uintptr(c))
	}
}

// NewTensor creates a tensor of up to four dimensions (ne[0] varies fastest).
func (c Context) NewTensor(t Type, ne ...int64) Tensor {
	switch len(ne) {
	case 1:
		return mk(ggmlNewTensor1D(uintptr(c), t, ne[0]))
	case 2:
		return mk(ggmlNewTensor2D(uintptr(c), t, ne[0], ne[1]))
	case 3:
		return mk(ggmlNewTensor3D(uintptr(c), t, ne[0], ne[1], ne[2]))
	case 4:
		return mk(ggmlNewTensor4D(uintptr(c), t, ne[0], ne[1], ne[2], ne[3]))
	}
	panic(fmt.Sprintf("llamacpp: NewTensor with %d dimensions", len(ne)))
}

// Tensors lists the tensors of the context in creation order.
func (c Context) Tensors() []Tensor {
	var out []Tensor
	for p := ggmlGetFirstTensor(uintptr(c)); p != 0; p = ggmlGetNextTensor(uintptr(c), p) {
		out = append(out, mk(p))
	}
	return out
}

// ResetAllocation forgets the memory of every tensor in c (data and buffer
// set to NULL). ggml's graph allocator treats a tensor that has data as
// already allocated, so a graph that is allocated again after the
// scheduler's buffers were reused or grown for another graph would otherwise
// keep dangling pointers. Only call it on contexts that hold compute
// tensors, never on one whose tensors live in a buffer of their own.
func (c Context) ResetAllocation() {
	for p := ggmlGetFirstTensor(uintptr(c)); p != 0; p = ggmlGetNextTensor(uintptr(c), p) {
		t := mk(p)
		t.Data = 0
		t.Buffer = 0
	}
}

// SetName names the tensor (at most 63 bytes) and returns it.
func SetName(t Tensor, name string) Tensor { ggmlSetName(tp(t), name); return t }

// GetName returns the tensor's name.
func GetName(t Tensor) string {
	n := 0
	for n < len(t.Name) && t.Name[n] != 0 {
		n++
	}
	return string(t.Name[:n])
}

// SetInput marks t as a graph input (the allocator gives it its own memory).
func SetInput(t Tensor) { ggmlSetInput(tp(t)) }

// SetOutput marks t as a graph output (its memory is not reused).
func SetOutput(t Tensor) { ggmlSetOutput(tp(t)) }

// SetParam marks t as trainable.
func SetParam(t Tensor) { ggmlSetParam(tp(t)) }

// SetLoss marks t as a loss (a scalar whose gradient is seeded).
func SetLoss(t Tensor) { ggmlSetLoss(tp(t)) }

// Nbytes is ggml_nbytes.
func Nbytes(t Tensor) int { return int(ggmlNbytes(tp(t))) }

// Nelements is ggml_nelements.
func Nelements(t Tensor) int { return int(ggmlNelements(tp(t))) }

// Operators. Each returns a new tensor in ctx; see ggml.h for shapes.

func (c Context) GetRows(a, b Tensor) Tensor { return mk(ggmlGetRows(uintptr(c), tp(a), tp(b))) }
func (c Context) RMSNorm(a Tensor, eps float32) Tensor {
	return mk(ggmlRMSNorm(uintptr(c), tp(a), eps))
}
func (c Context) Mul(a, b Tensor) Tensor    { return mk(ggmlMul(uintptr(c), tp(a), tp(b))) }
func (c Context) Add(a, b Tensor) Tensor    { return mk(ggmlAdd(uintptr(c), tp(a), tp(b))) }
func (c Context) Sub(a, b Tensor) Tensor    { return mk(ggmlSub(uintptr(c), tp(a), tp(b))) }
func (c Context) Div(a, b Tensor) Tensor    { return mk(ggmlDiv(uintptr(c), tp(a), tp(b))) }
func (c Context) MulMat(a, b Tensor) Tensor { return mk(ggmlMulMat(uintptr(c), tp(a), tp(b))) }
func (c Context) OutProd(a, b Tensor) Tensor {
	return mk(ggmlOutProd(uintptr(c), tp(a), tp(b)))
}

// RopeExt is ggml_rope_ext without YaRN; freqFactors (nDims/2 divisors of
// the rotation frequencies, llama 3's rope_freqs) may be nil.
func (c Context) RopeExt(a, pos, freqFactors Tensor, nDims, mode, nCtxOrig int, freqBase, freqScale float32) Tensor {
	return mk(ggmlRopeExt(uintptr(c), tp(a), tp(pos), tp(freqFactors), int32(nDims), int32(mode), int32(nCtxOrig),
		freqBase, freqScale, 0, 1, 32, 1))
}
func (c Context) SoftMax(a Tensor) Tensor { return mk(ggmlSoftMax(uintptr(c), tp(a))) }

// SoftMaxExt is softmax(a*scale + mask) over rows; mask may be nil.
func (c Context) SoftMaxExt(a, mask Tensor, scale, maxBias float32) Tensor {
	return mk(ggmlSoftMaxExt(uintptr(c), tp(a), tp(mask), scale, maxBias))
}

// SoftMaxExtBack is the gradient of SoftMaxExt(x, mask, scale, 0) with
// respect to x, given dy, the gradient of its output y:
// scale·y⊙(dy − Σ y⊙dy) row by row (y and dy contiguous, of one shape).
func (c Context) SoftMaxExtBack(dy, y Tensor, scale float32) Tensor {
	return mk(ggmlSoftMaxExtBack(uintptr(c), tp(dy), tp(y), scale, 0))
}
func (c Context) Scale(a Tensor, s float32) Tensor { return mk(ggmlScale(uintptr(c), tp(a), s)) }

// ScaleBias is a*s + b.
func (c Context) ScaleBias(a Tensor, s, b float32) Tensor {
	return mk(ggmlScaleBias(uintptr(c), tp(a), s, b))
}
func (c Context) Permute(a Tensor, ax0, ax1, ax2, ax3 int) Tensor {
	return mk(ggmlPermute(uintptr(c), tp(a), int32(ax0), int32(ax1), int32(ax2), int32(ax3)))
}
func (c Context) Transpose(a Tensor) Tensor { return mk(ggmlTranspose(uintptr(c), tp(a))) }
func (c Context) Cont(a Tensor) Tensor      { return mk(ggmlCont(uintptr(c), tp(a))) }

// Reshape views a contiguous tensor with a new shape of 2 to 4 dimensions.
func (c Context) Reshape(a Tensor, ne ...int64) Tensor {
	switch len(ne) {
	case 2:
		return mk(ggmlReshape2D(uintptr(c), tp(a), ne[0], ne[1]))
	case 3:
		return mk(ggmlReshape3D(uintptr(c), tp(a), ne[0], ne[1], ne[2]))
	case 4:
		return mk(ggmlReshape4D(uintptr(c), tp(a), ne[0], ne[1], ne[2], ne[3]))
	}
	panic(fmt.Sprintf("llamacpp: Reshape to %d dimensions", len(ne)))
}
func (c Context) View1D(a Tensor, ne0 int64, offset uintptr) Tensor {
	return mk(ggmlView1D(uintptr(c), tp(a), ne0, offset))
}
func (c Context) View2D(a Tensor, ne0, ne1 int64, nb1, offset uintptr) Tensor {
	return mk(ggmlView2D(uintptr(c), tp(a), ne0, ne1, nb1, offset))
}

// View4D is a view of a with shape ne and byte strides nb (nb[0] is the
// element size), starting offset bytes into a.
func (c Context) View4D(a Tensor, ne [4]int64, nb [3]uintptr, offset uintptr) Tensor {
	return mk(ggmlView4D(uintptr(c), tp(a), ne[0], ne[1], ne[2], ne[3], nb[0], nb[1], nb[2], offset))
}

// Acc is a copy of a (contiguous F32) with b added into the view of it
// that has b's shape, strides nb and offset (bytes). Its backward hands a
// the whole gradient and b the view's, read with the strides nb: the
// gradient must arrive contiguous (after a permute, put a same-shape
// Reshape between the two).
func (c Context) Acc(a, b Tensor, nb [3]uintptr, offset uintptr) Tensor {
	return mk(ggmlAcc(uintptr(c), tp(a), tp(b), nb[0], nb[1], nb[2], offset))
}

// AccInplace adds b into the view of a at offset with a's strides nb,
// in a's memory, and returns a view of a: the node later nodes that read
// the sum must take, so that they run after the addition.
func (c Context) AccInplace(a, b Tensor, nb [3]uintptr, offset uintptr) Tensor {
	return mk(ggmlAccInplace(uintptr(c), tp(a), tp(b), nb[0], nb[1], nb[2], offset))
}

func (c Context) Silu(a Tensor) Tensor    { return mk(ggmlSilu(uintptr(c), tp(a))) }
func (c Context) SumRows(a Tensor) Tensor { return mk(ggmlSumRows(uintptr(c), tp(a))) }
func (c Context) Sum(a Tensor) Tensor     { return mk(ggmlSum(uintptr(c), tp(a))) }
func (c Context) Mean(a Tensor) Tensor    { return mk(ggmlMean(uintptr(c), tp(a))) }
func (c Context) Exp(a Tensor) Tensor     { return mk(ggmlExp(uintptr(c), tp(a))) }
func (c Context) Log(a Tensor) Tensor     { return mk(ggmlLog(uintptr(c), tp(a))) }

// Step is 1 where a > 0 and 0 elsewhere; its gradient is zero, which is what
// makes it usable as a mask for the clipped PPO objectives.
func (c Context) Step(a Tensor) Tensor { return mk(ggmlStep(uintptr(c), tp(a))) }

// Sgn is the sign of a; zero gradient.
func (c Context) Sgn(a Tensor) Tensor          { return mk(ggmlSgn(uintptr(c), tp(a))) }
func (c Context) Sqr(a Tensor) Tensor          { return mk(ggmlSqr(uintptr(c), tp(a))) }
func (c Context) Sqrt(a Tensor) Tensor         { return mk(ggmlSqrt(uintptr(c), tp(a))) }
func (c Context) Neg(a Tensor) Tensor          { return mk(ggmlNeg(uintptr(c), tp(a))) }
func (c Context) Abs(a Tensor) Tensor          { return mk(ggmlAbs(uintptr(c), tp(a))) }
func (c Context) Repeat(a, like Tensor) Tensor { return mk(ggmlRepeat(uintptr(c), tp(a), tp(like))) }

// Repeat4D tiles a to the shape ne0×ne1×ne2×ne3 (each a multiple of a's).
func (c Context) Repeat4D(a Tensor, ne0, ne1, ne2, ne3 int64) Tensor {
	return mk(ggmlRepeat4D(uintptr(c), tp(a), ne0, ne1, ne2, ne3))
}
func (c Context) Cpy(a, b Tensor) Tensor { return mk(ggmlCpy(uintptr(c), tp(a), tp(b))) }
func (c Context) Argmax(a Tensor) Tensor { return mk(ggmlArgmax(uintptr(c), tp(a))) }

// OptStepAdamW updates a in place from grad with the moments m and v; params
// holds 7 floats: alpha, beta1, beta2, eps, weight decay, 1/(1-beta1^t),
// 1/(1-beta2^t).
func (c Context) OptStepAdamW(a, grad, m, v, params Tensor) Tensor {
	return mk(ggmlOptStepAdamW(uintptr(c), tp(a), tp(grad), tp(m), tp(v), tp(params)))
}

// NewGraph creates a graph of at most size nodes; grads reserves room for
// gradients (needed by BuildBackward).
func (c Context) NewGraph(size int, grads bool) Graph {
	return Graph(ggmlNewGraphCustom(uintptr(c), uintptr(size), grads))
}

// BuildForward adds t and everything it depends on to the graph.
func (g Graph) BuildForward(t Tensor) { ggmlBuildForwardExpand(uintptr(g), tp(t)) }

// BuildBackward appends the backward pass to g. gradAccs is indexed like the
// graph's nodes at the time of the call; a non-nil entry is a persistent
// accumulator that the gradient of that node is added into (it is not
// cleared by the graph). New gradient tensors are created in ctx.
func (g Graph) BuildBackward(ctx Context, gradAccs []Tensor) {
	accs := make([]uintptr, len(gradAccs))
	for i, t := range gradAccs {
		accs[i] = tp(t)
	}
	var p *uintptr
	if len(accs) > 0 {
		p = &accs[0]
	}
	ggmlBuildBackwardExpand(uintptr(ctx), uintptr(g), p)
}

// Reset zeroes the gradients and AdamW moments in g and seeds loss gradients
// with 1.
func (g Graph) Reset() { ggmlGraphReset(uintptr(g)) }

// NNodes is the number of nodes (non-leaf tensors) in the graph.
func (g Graph) NNodes() int { return int(ggmlGraphNNodes(uintptr(g))) }

// Node returns node i (negative counts from the end).
func (g Graph) Node(i int) Tensor { return mk(ggmlGraphNode(uintptr(g), int32(i))) }

// Grad returns the gradient of t in a graph built with BuildBackward, or nil.
func (g Graph) Grad(t Tensor) Tensor { return mk(ggmlGraphGetGrad(uintptr(g), tp(t))) }

// GradAcc returns the gradient accumulator of t, or nil.
func (g Graph) GradAcc(t Tensor) Tensor { return mk(ggmlGraphGetGradAcc(uintptr(g), tp(t))) }
