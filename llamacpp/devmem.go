package llamacpp

import "fmt"

// void ggml_backend_dev_memory(ggml_backend_dev_t device, size_t * free, size_t * total)
var ggmlBackendDevMemory func(dev uintptr, free, total *uintptr)

func init() {
	register(func(libs libraries) error {
		return bindAll(libs.ggmlBase, []binding{{&ggmlBackendDevMemory, "ggml_backend_dev_memory"}})
	})
}

// Memory reports the free and total memory of the backend's device in
// bytes, as its driver counts them (for a GPU, what cudaMemGetInfo
// says; for the CPU, the host's). A trainer checks a model against it
// before allocating anything on a GPU, where running out of memory
// midway fails a pass instead of swapping.
func (b Backend) Memory() (free, total int64, err error) {
	if b == 0 {
		return 0, 0, fmt.Errorf("llamacpp: memory of a nil backend")
	}
	d := ggmlBackendGetDevice(uintptr(b))
	if d == 0 {
		return 0, 0, fmt.Errorf("llamacpp: backend %s has no device", b.Name())
	}
	var f, t uintptr
	ggmlBackendDevMemory(d, &f, &t)
	return int64(f), int64(t), nil
}
