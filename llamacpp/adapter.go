package llamacpp

import (
	"fmt"
	"runtime"
	"unsafe"
)

var (
	// struct llama_adapter_lora * llama_adapter_lora_init(struct llama_model * model, const char * path_lora);
	llamaAdapterLoraInit func(m uintptr, path *byte) uintptr
	// void llama_adapter_lora_free(struct llama_adapter_lora * adapter);
	llamaAdapterLoraFree func(a uintptr)
	// int32_t llama_set_adapters_lora(struct llama_context * ctx, struct llama_adapter_lora ** adapters,
	//                                 size_t n_adapters, float * scales);
	llamaSetAdaptersLora func(c uintptr, adapters unsafe.Pointer, n uintptr, scales unsafe.Pointer) int32
	// int32_t llama_adapter_meta_val_str(const struct llama_adapter_lora * adapter, const char * key, char * buf, size_t buf_size);
	llamaAdapterMetaValStr func(a uintptr, key *byte, buf *byte, n uintptr) int32
)

func init() {
	register(func(libs libraries) error {
		return bindAll(libs.llama, []binding{{&llamaAdapterLoraInit, "llama_adapter_lora_init"},
			{&llamaAdapterLoraFree, "llama_adapter_lora_free"},
			{&llamaSetAdaptersLora, "llama_set_adapters_lora"},
			{&llamaAdapterMetaValStr, "llama_adapter_meta_val_str"},
		})
	})
}

// Adapter is a LoRA adapter loaded for one model. Detach it from every
// context (SetAdapters with none) before Close.
type Adapter struct {
	ptr   uintptr
	path  string
	model *Model
}

// LoadAdapter loads a LoRA adapter GGUF (general.type=adapter,
// adapter.type=lora) made for m.
func LoadAdapter(m *Model, path string) (*Adapter, error) {
	if err := CheckModelFile(path); err != nil {
		return nil, err
	}
	cpath := cString(path)
	m.adapters.Lock()
	ptr := llamaAdapterLoraInit(m.ptr, &cpath[0])
	m.adapters.Unlock()
	runtime.KeepAlive(cpath)
	if ptr == 0 {
		return nil, fmt.Errorf("llamacpp: load LoRA adapter %s: llama.cpp refused it (see the log: not an adapter, or tensors that do not match the model)", path)
	}
	return &Adapter{ptr: ptr, path: path, model: m}, nil
}

// Path is the adapter's file.
func (a *Adapter) Path() string { return a.path }

// Meta returns a metadata value of the adapter as a string.
func (a *Adapter) Meta(key string) (string, bool) {
	ckey := cString(key)
	buf := make([]byte, 512)
	n := llamaAdapterMetaValStr(a.ptr, &ckey[0], &buf[0], uintptr(len(buf)))
	runtime.KeepAlive(ckey)
	if n < 0 {
		return "", false
	}
	return string(buf[:min(int(n), len(buf)-1)]), true
}

// Close frees the adapter. Safe to call twice.
func (a *Adapter) Close() error {
	if a == nil || a.ptr == 0 {
		return nil
	}
	a.model.adapters.Lock()
	llamaAdapterLoraFree(a.ptr)
	a.model.adapters.Unlock()
	a.ptr = 0
	return nil
}

// SetAdapters replaces the context's LoRA adapters (none: the base model),
// each with its scale. Cached KV entries computed under other adapters are
// not recomputed: clear the memory when the policy changes.
func (c *LlamaContext) SetAdapters(adapters []*Adapter, scales []float32) error {
	if len(adapters) != len(scales) {
		return fmt.Errorf("llamacpp: %d adapters but %d scales", len(adapters), len(scales))
	}
	ptrs := make([]uintptr, len(adapters)+1)
	sc := make([]float32, len(adapters)+1)
	for i, a := range adapters {
		if a == nil || a.ptr == 0 {
			return fmt.Errorf("llamacpp: adapter %d is closed", i)
		}
		ptrs[i] = a.ptr
		sc[i] = scales[i]
	}
	rc := llamaSetAdaptersLora(c.ptr, unsafe.Pointer(&ptrs[0]), uintptr(len(adapters)), unsafe.Pointer(&sc[0]))
	runtime.KeepAlive(ptrs)
	runtime.KeepAlive(sc)
	if rc != 0 {
		return fmt.Errorf("llamacpp: set LoRA adapters failed (status %d)", rc)
	}
	return nil
}
