package llamacpp

// ggml-backend.h and ggml-alloc.h: devices, backends, buffers, tensor data
// transfer, graph computation and the backend scheduler.

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// DeviceType is enum ggml_backend_dev_type.
type DeviceType int32

// Device types.
const (
	DeviceCPU   DeviceType = 0
	DeviceGPU   DeviceType = 1
	DeviceIGPU  DeviceType = 2
	DeviceAccel DeviceType = 3
)

// Backend is a ggml_backend_t.
type Backend uintptr

// Buffer is a ggml_backend_buffer_t.
type Buffer uintptr

// Sched is a ggml_backend_sched_t.
type Sched uintptr

var (
	ggmlBackendLoadAllFromPath func(dir string)                         // void ggml_backend_load_all_from_path(const char * dir_path)
	ggmlBackendDevCount        func() uintptr                           // size_t ggml_backend_dev_count(void)
	ggmlBackendDevGet          func(i uintptr) uintptr                  // ggml_backend_dev_t ggml_backend_dev_get(size_t index)
	ggmlBackendDevName         func(dev uintptr) string                 // const char * ggml_backend_dev_name(ggml_backend_dev_t device)
	ggmlBackendDevDescription  func(dev uintptr) string                 // const char * ggml_backend_dev_description(ggml_backend_dev_t device)
	ggmlBackendDevType         func(dev uintptr) DeviceType             // enum ggml_backend_dev_type ggml_backend_dev_type(ggml_backend_dev_t device)
	ggmlBackendDevBackendReg   func(dev uintptr) uintptr                // ggml_backend_reg_t ggml_backend_dev_backend_reg(ggml_backend_dev_t device)
	ggmlBackendGetDevice       func(b uintptr) uintptr                  // ggml_backend_dev_t ggml_backend_get_device(ggml_backend_t backend)
	ggmlBackendDevInit         func(dev uintptr, params string) uintptr // ggml_backend_t ggml_backend_dev_init(ggml_backend_dev_t device, const char * params)
	ggmlBackendRegGetProcAddr  func(reg uintptr, name string) uintptr   // void * ggml_backend_reg_get_proc_address(ggml_backend_reg_t reg, const char * name)
	ggmlBackendFree            func(b uintptr)                          // void ggml_backend_free(ggml_backend_t backend)
	ggmlBackendName            func(b uintptr) string                   // const char * ggml_backend_name(ggml_backend_t backend)
	ggmlBackendAllocCtxTensors func(ctx, b uintptr) uintptr             // ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors(struct ggml_context * ctx, ggml_backend_t backend)
	ggmlBackendBufferFree      func(buf uintptr)                        // void ggml_backend_buffer_free(ggml_backend_buffer_t buffer)
	ggmlBackendBufferClear     func(buf uintptr, v uint8)               // void ggml_backend_buffer_clear(ggml_backend_buffer_t buffer, uint8_t value)
	ggmlBackendBufferGetSize   func(buf uintptr) uintptr                // size_t ggml_backend_buffer_get_size(ggml_backend_buffer_t buffer)
	ggmlBackendTensorSet       func(t uintptr, data unsafe.Pointer, offset, size uintptr)
	ggmlBackendTensorGet       func(t uintptr, data unsafe.Pointer, offset, size uintptr)
	ggmlBackendTensorMemset    func(t uintptr, v uint8, offset, size uintptr)
	ggmlBackendGraphCompute    func(b, g uintptr) int32 // enum ggml_status ggml_backend_graph_compute(ggml_backend_t backend, struct ggml_cgraph * cgraph)
	ggmlBackendSchedNew        func(backends *uintptr, bufts *uintptr, n int32, graphSize uintptr, parallel, opOffload bool) uintptr
	ggmlBackendSchedFree       func(s uintptr)
	ggmlBackendSchedReset      func(s uintptr)
	ggmlBackendSchedAllocGraph func(s, g uintptr) bool
	ggmlBackendSchedCompute    func(s, g uintptr) int32
	ggmlBackendSchedBufSize    func(s, b uintptr) uintptr // size_t ggml_backend_sched_get_buffer_size(ggml_backend_sched_t sched, ggml_backend_t backend)
)

func init() {
	register(func(libs libraries) error {
		if err := bindAll(libs.ggmlBase, []binding{
			{&ggmlBackendDevName, "ggml_backend_dev_name"},
			{&ggmlBackendDevDescription, "ggml_backend_dev_description"},
			{&ggmlBackendDevType, "ggml_backend_dev_type"},
			{&ggmlBackendDevBackendReg, "ggml_backend_dev_backend_reg"},
			{&ggmlBackendGetDevice, "ggml_backend_get_device"},
			{&ggmlBackendDevInit, "ggml_backend_dev_init"},
			{&ggmlBackendRegGetProcAddr, "ggml_backend_reg_get_proc_address"},
			{&ggmlBackendFree, "ggml_backend_free"},
			{&ggmlBackendName, "ggml_backend_name"},
			{&ggmlBackendAllocCtxTensors, "ggml_backend_alloc_ctx_tensors"},
			{&ggmlBackendBufferFree, "ggml_backend_buffer_free"},
			{&ggmlBackendBufferClear, "ggml_backend_buffer_clear"},
			{&ggmlBackendBufferGetSize, "ggml_backend_buffer_get_size"},
			{&ggmlBackendTensorSet, "ggml_backend_tensor_set"},
			{&ggmlBackendTensorGet, "ggml_backend_tensor_get"},
			{&ggmlBackendTensorMemset, "ggml_backend_tensor_memset"},
			{&ggmlBackendGraphCompute, "ggml_backend_graph_compute"},
			{&ggmlBackendSchedNew, "ggml_backend_sched_new"},
			{&ggmlBackendSchedFree, "ggml_backend_sched_free"},
			{&ggmlBackendSchedReset, "ggml_backend_sched_reset"},
			{&ggmlBackendSchedAllocGraph, "ggml_backend_sched_alloc_graph"},
			{&ggmlBackendSchedCompute, "ggml_backend_sched_graph_compute"},
			{&ggmlBackendSchedBufSize, "ggml_backend_sched_get_buffer_size"},
		}); err != nil {
			return err
		}
		return bindAll(libs.ggml, []binding{
			{&ggmlBackendLoadAllFromPath, "ggml_backend_load_all_from_path"},
			{&ggmlBackendDevCount, "ggml_backend_dev_count"},
			{&ggmlBackendDevGet, "ggml_backend_dev_get"},
		})
	})
}

var backendsMu sync.Mutex

// LoadBackends registers the dynamically loaded ggml backends (CPU variants,
// CUDA when present) from the directory Load used. It is idempotent: when
// devices are already registered (by an earlier call, or by whoever set up
// llama.cpp), it does nothing, so that no device is registered twice.
func LoadBackends() error {
	if !Loaded() || ggmlBackendDevCount == nil {
		return ErrNotLoaded
	}
	backendsMu.Lock()
	defer backendsMu.Unlock()
	if ggmlBackendDevCount() == 0 {
		ggmlBackendLoadAllFromPath(loadDir)
	}
	if ggmlBackendDevCount() == 0 {
		return fmt.Errorf("llamacpp: no ggml backend found in %s", loadDir)
	}
	return nil
}

// DeviceInfo describes one registered ggml device.
type DeviceInfo struct {
	Index       int
	Name        string
	Description string
	Type        DeviceType
}

// Devices lists the registered devices in registry order.
func Devices() ([]DeviceInfo, error) {
	if err := LoadBackends(); err != nil {
		return nil, err
	}
	n := int(ggmlBackendDevCount())
	out := make([]DeviceInfo, n)
	for i := range n {
		d := ggmlBackendDevGet(uintptr(i))
		out[i] = DeviceInfo{Index: i, Name: ggmlBackendDevName(d), Description: ggmlBackendDevDescription(d), Type: ggmlBackendDevType(d)}
	}
	return out, nil
}

// NewBackend initialises the first device of the given type. For the CPU
// device nThreads > 0 sets the thread count explicitly (ggml's default uses
// as many busy-waiting threads as it likes, which is ruinous on small
// machines).
func NewBackend(typ DeviceType, nThreads int) (Backend, error) {
	if err := LoadBackends(); err != nil {
		return 0, err
	}
	n := int(ggmlBackendDevCount())
	for i := range n {
		d := ggmlBackendDevGet(uintptr(i))
		if ggmlBackendDevType(d) != typ {
			continue
		}
		b := ggmlBackendDevInit(d, "")
		if b == 0 {
			return 0, fmt.Errorf("llamacpp: cannot initialise device %s", ggmlBackendDevName(d))
		}
		if typ == DeviceCPU && nThreads > 0 {
			if err := Backend(b).SetThreads(nThreads); err != nil {
				ggmlBackendFree(b)
				return 0, err
			}
		}
		return Backend(b), nil
	}
	return 0, fmt.Errorf("llamacpp: no ggml device of type %d (registered devices: %d)", typ, n)
}

// SetThreads sets the number of threads a CPU backend computes its next
// graphs with (it is an error on other backends). The results do not
// depend on it: ggml splits every op's output rows between the threads,
// and each row is summed by one.
func (b Backend) SetThreads(n int) error {
	if n < 1 {
		return fmt.Errorf("llamacpp: %d threads", n)
	}
	d := ggmlBackendGetDevice(uintptr(b))
	fn := ggmlBackendRegGetProcAddr(ggmlBackendDevBackendReg(d), "ggml_backend_set_n_threads")
	if fn == 0 {
		return fmt.Errorf("llamacpp: backend %s has no ggml_backend_set_n_threads", b.Name())
	}
	// void ggml_backend_set_n_threads(ggml_backend_t backend, int n_threads)
	purego.SyscallN(fn, uintptr(b), uintptr(n))
	return nil
}

// Name is the backend's name, e.g. "CPU" or "CUDA0".
func (b Backend) Name() string { return ggmlBackendName(uintptr(b)) }

// Free releases the backend.
func (b Backend) Free() {
	if b != 0 {
		ggmlBackendFree(uintptr(b))
	}
}

// AllocContextTensors allocates one buffer on b holding every tensor of ctx
// that has no data yet.
func (b Backend) AllocContextTensors(ctx Context) (Buffer, error) {
	buf := ggmlBackendAllocCtxTensors(uintptr(ctx), uintptr(b))
	if buf == 0 {
		return 0, errors.New("llamacpp: ggml_backend_alloc_ctx_tensors failed (out of memory or empty context)")
	}
	return Buffer(buf), nil
}

// Compute runs the graph on b. Every tensor must already have memory.
func (b Backend) Compute(g Graph) error {
	return status("ggml_backend_graph_compute", ggmlBackendGraphCompute(uintptr(b), uintptr(g)))
}

// Free releases the buffer.
func (buf Buffer) Free() {
	if buf != 0 {
		ggmlBackendBufferFree(uintptr(buf))
	}
}

// Clear sets every byte of the buffer to v.
func (buf Buffer) Clear(v uint8) { ggmlBackendBufferClear(uintptr(buf), v) }

// Size is the buffer's size in bytes.
func (buf Buffer) Size() int { return int(ggmlBackendBufferGetSize(uintptr(buf))) }

// SetF32 copies data into the F32 tensor t, which must be allocated and hold
// exactly len(data) elements.
func SetF32(t Tensor, data []float32) {
	checkLen(t, len(data)*4)
	if len(data) > 0 {
		ggmlBackendTensorSet(tp(t), unsafe.Pointer(&data[0]), 0, uintptr(len(data)*4))
	}
}

// SetI32 copies data into the I32 tensor t.
func SetI32(t Tensor, data []int32) {
	checkLen(t, len(data)*4)
	if len(data) > 0 {
		ggmlBackendTensorSet(tp(t), unsafe.Pointer(&data[0]), 0, uintptr(len(data)*4))
	}
}

// SetBytes copies raw data (of any type) into the allocated tensor t.
func SetBytes(t Tensor, data []byte) {
	checkLen(t, len(data))
	if len(data) > 0 {
		ggmlBackendTensorSet(tp(t), unsafe.Pointer(&data[0]), 0, uintptr(len(data)))
	}
}

// GetF32 copies the F32 tensor t into dst (len = number of elements).
func GetF32(t Tensor, dst []float32) {
	checkLen(t, len(dst)*4)
	if len(dst) > 0 {
		ggmlBackendTensorGet(tp(t), unsafe.Pointer(&dst[0]), 0, uintptr(len(dst)*4))
	}
}

// Zero sets every byte of the allocated tensor t to 0.
func Zero(t Tensor) { ggmlBackendTensorMemset(tp(t), 0, 0, uintptr(Nbytes(t))) }

func checkLen(t Tensor, n int) {
	if got := Nbytes(t); got != n {
		panic(fmt.Sprintf("llamacpp: tensor %q holds %d bytes, transfer of %d", GetName(t), got, n))
	}
}

// NewSched creates a scheduler over backends (the last must be the CPU
// backend) for graphs of up to graphSize nodes. Ops a backend cannot run fall
// back to the next one.
func NewSched(backends []Backend, graphSize int) (Sched, error) {
	if len(backends) == 0 {
		return 0, errors.New("llamacpp: scheduler needs at least one backend")
	}
	bs := make([]uintptr, len(backends))
	for i, b := range backends {
		bs[i] = uintptr(b)
	}
	s := ggmlBackendSchedNew(&bs[0], nil, int32(len(bs)), uintptr(graphSize), false, true)
	if s == 0 {
		return 0, errors.New("llamacpp: ggml_backend_sched_new failed")
	}
	return Sched(s), nil
}

// Free releases the scheduler and its compute buffers.
func (s Sched) Free() {
	if s != 0 {
		ggmlBackendSchedFree(uintptr(s))
	}
}

// Alloc assigns memory to every unallocated tensor of g, reusing (and if
// needed growing) the scheduler's compute buffers. Inputs must be written
// after Alloc.
func (s Sched) Alloc(g Graph) error {
	ggmlBackendSchedReset(uintptr(s))
	if !ggmlBackendSchedAllocGraph(uintptr(s), uintptr(g)) {
		return errors.New("llamacpp: ggml_backend_sched_alloc_graph failed")
	}
	return nil
}

// Compute runs an allocated graph.
func (s Sched) Compute(g Graph) error {
	return status("ggml_backend_sched_graph_compute", ggmlBackendSchedCompute(uintptr(s), uintptr(g)))
}

// BufferSize is the size of the scheduler's compute buffer on backend b.
func (s Sched) BufferSize(b Backend) int {
	return int(ggmlBackendSchedBufSize(uintptr(s), uintptr(b)))
}

func status(op string, st int32) error {
	switch st {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("llamacpp: %s aborted", op)
	case -2:
		return fmt.Errorf("llamacpp: %s: allocation failed", op)
	}
	return fmt.Errorf("llamacpp: %s failed (status %d)", op, st)
}
