package llamacpp

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// cModelParams mirrors struct llama_model_params (80 bytes, llama.h v0.5.0).
type cModelParams struct {
	devices                  uintptr // ggml_backend_dev_t *
	tensorBuftOverrides      uintptr // const struct llama_model_tensor_buft_override *
	nGPULayers               int32
	splitMode                int32 // enum llama_split_mode
	loadMode                 int32 // enum llama_load_mode
	lazyMode                 int32 // enum llama_lazy_mode
	mainGPU                  int32
	_                        [4]byte
	tensorSplit              uintptr // const float *
	progressCallback         uintptr // llama_progress_callback
	progressCallbackUserData uintptr
	kvOverrides              uintptr // const struct llama_model_kv_override *
	vocabOnly                bool
	checkTensors             bool
	useExtraBufts            bool
	noHost                   bool
	noAlloc                  bool
	loadMTP                  bool
	_                        [2]byte
}

// enum llama_load_mode
const (
	loadModeAuto = -1
	loadModeNone = 0
	loadModeMmap = 1
)

var (
	// struct llama_model_params llama_model_default_params(void);
	llamaModelDefaultParams func() cModelParams
	// struct llama_model * llama_model_load_from_file(const char * path_model, struct llama_model_params params);
	llamaModelLoadFromFile func(path *byte, p cModelParams) uintptr
	// void llama_model_free(struct llama_model * model);
	llamaModelFree func(m uintptr)
	// const struct llama_vocab * llama_model_get_vocab(const struct llama_model * model);
	llamaModelGetVocab func(m uintptr) uintptr
	// int32_t llama_model_n_ctx_train(const struct llama_model * model);
	llamaModelNCtxTrain func(m uintptr) int32
	// int32_t llama_model_n_embd(const struct llama_model * model);
	llamaModelNEmbd func(m uintptr) int32
	// int32_t llama_model_n_layer(const struct llama_model * model);
	llamaModelNLayer func(m uintptr) int32
	// int32_t llama_model_n_head(const struct llama_model * model);
	llamaModelNHead func(m uintptr) int32
	// uint64_t llama_model_n_params(const struct llama_model * model);
	llamaModelNParams func(m uintptr) uint64
	// uint64_t llama_model_size(const struct llama_model * model);
	llamaModelSize func(m uintptr) uint64
	// int32_t llama_model_desc(const struct llama_model * model, char * buf, size_t buf_size);
	llamaModelDesc func(m uintptr, buf *byte, n uintptr) int32
	// int32_t llama_model_meta_val_str(const struct llama_model * model, const char * key, char * buf, size_t buf_size);
	llamaModelMetaValStr func(m uintptr, key *byte, buf *byte, n uintptr) int32
	// const char * llama_model_chat_template(const struct llama_model * model, const char * name);
	llamaModelChatTemplate func(m uintptr, name *byte) *byte
	// bool llama_model_has_encoder(const struct llama_model * model);
	llamaModelHasEncoder func(m uintptr) bool
)

func init() {
	register(func(libs libraries) error {
		return bindAll(libs.llama, []binding{{&llamaModelDefaultParams, "llama_model_default_params"},
			{&llamaModelLoadFromFile, "llama_model_load_from_file"},
			{&llamaModelFree, "llama_model_free"},
			{&llamaModelGetVocab, "llama_model_get_vocab"},
			{&llamaModelNCtxTrain, "llama_model_n_ctx_train"},
			{&llamaModelNEmbd, "llama_model_n_embd"},
			{&llamaModelNLayer, "llama_model_n_layer"},
			{&llamaModelNHead, "llama_model_n_head"},
			{&llamaModelNParams, "llama_model_n_params"},
			{&llamaModelSize, "llama_model_size"},
			{&llamaModelDesc, "llama_model_desc"},
			{&llamaModelMetaValStr, "llama_model_meta_val_str"},
			{&llamaModelChatTemplate, "llama_model_chat_template"},
			{&llamaModelHasEncoder, "llama_model_has_encoder"},
		})
	})
}

// ModelOptions configure model loading.
type ModelOptions struct {
	// GPULayers is the number of layers offloaded to a GPU backend; -1
	// offloads all, 0 keeps everything on the CPU.
	GPULayers int
	// NoMmap reads the weights into memory instead of mapping the file.
	NoMmap bool
	// VocabOnly loads only the vocabulary (tokenizer tests, tools).
	VocabOnly bool
	// CheckTensors validates the tensor data while loading (slow).
	CheckTensors bool
}

// Defaults returns the default model options: everything on the CPU, mmap.
func (ModelOptions) Defaults() ModelOptions { return ModelOptions{} }

// Validate reports options that cannot work.
func (o ModelOptions) Validate() error {
	if o.GPULayers < -1 {
		return fmt.Errorf("llamacpp: gpu layers %d: want -1 (all) or ≥ 0", o.GPULayers)
	}
	return nil
}

// Model is a loaded llama.cpp model. Close it after every LlamaContext made from
// it is closed.
type Model struct {
	ptr   uintptr
	vocab *Vocab
	path  string
	// adapters serialises loading and freeing LoRA adapters: llama.cpp
	// registers each in a set of the model's (llama_model::loras), which
	// two contexts' loops swapping adapters at once would corrupt.
	adapters sync.Mutex
}

// ErrBadModelFile marks model files that are not valid GGUF (wrong magic,
// truncated, inconsistent header); errors.Is works on LoadModel's error.
var ErrBadModelFile = errors.New("not a valid GGUF model file")

// LoadModel loads a GGUF model. The file's header is checked in Go first so
// a corrupt or truncated file gives a clear error instead of a crash inside
// the library.
func LoadModel(path string, o ModelOptions) (*Model, error) {
	if !Loaded() {
		return nil, ErrNotLoaded
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := CheckModelFile(path); err != nil {
		return nil, err
	}
	p := llamaModelDefaultParams()
	p.nGPULayers = int32(o.GPULayers)
	if o.NoMmap {
		p.loadMode = loadModeNone
	}
	p.vocabOnly = o.VocabOnly
	p.checkTensors = o.CheckTensors
	cpath := cString(path)
	ptr := llamaModelLoadFromFile(&cpath[0], p)
	runtime.KeepAlive(cpath)
	if ptr == 0 {
		return nil, fmt.Errorf("llamacpp: load model %s: llama.cpp refused it (see the log for the reason: unsupported architecture, missing tensors or keys)", path)
	}
	m := &Model{ptr: ptr, path: path}
	m.vocab = &Vocab{ptr: llamaModelGetVocab(ptr)}
	return m, nil
}

// Close frees the model. Safe to call twice.
func (m *Model) Close() error {
	if m == nil || m.ptr == 0 {
		return nil
	}
	llamaModelFree(m.ptr)
	m.ptr = 0
	return nil
}

// Path is the file the model was loaded from.
func (m *Model) Path() string { return m.path }

// Vocab returns the model's vocabulary (owned by the model).
func (m *Model) Vocab() *Vocab { return m.vocab }

// NCtxTrain is the context length the model was trained with.
func (m *Model) NCtxTrain() int { return int(llamaModelNCtxTrain(m.ptr)) }

// NEmbd is the embedding width.
func (m *Model) NEmbd() int { return int(llamaModelNEmbd(m.ptr)) }

// NLayer is the number of transformer blocks.
func (m *Model) NLayer() int { return int(llamaModelNLayer(m.ptr)) }

// NHead is the number of attention heads.
func (m *Model) NHead() int { return int(llamaModelNHead(m.ptr)) }

// NParams is the number of parameters.
func (m *Model) NParams() uint64 { return llamaModelNParams(m.ptr) }

// Size is the total size of the weights in bytes.
func (m *Model) Size() uint64 { return llamaModelSize(m.ptr) }

// Desc is llama.cpp's one-line description (architecture, size, type).
func (m *Model) Desc() string {
	buf := make([]byte, 256)
	n := llamaModelDesc(m.ptr, &buf[0], uintptr(len(buf)))
	if n < 0 {
		return ""
	}
	return string(buf[:min(int(n), len(buf)-1)])
}

// Meta returns a metadata value as a string (arrays are not supported by
// llama.cpp here); ok is false when the key is absent.
func (m *Model) Meta(key string) (string, bool) {
	ckey := cString(key)
	buf := make([]byte, 1024)
	for {
		n := llamaModelMetaValStr(m.ptr, &ckey[0], &buf[0], uintptr(len(buf)))
		if n < 0 {
			return "", false
		}
		if int(n) < len(buf) {
			runtime.KeepAlive(ckey)
			return string(buf[:n]), true
		}
		buf = make([]byte, n+1)
	}
}

// ChatTemplate returns the model's chat template (name "" for the default
// one); ok is false when the model has none.
func (m *Model) ChatTemplate(name string) (string, bool) {
	var p *byte
	var cname []byte
	if name != "" {
		cname = cString(name)
		p = &cname[0]
	}
	t := llamaModelChatTemplate(m.ptr, p)
	runtime.KeepAlive(cname)
	if t == nil {
		return "", false
	}
	return goString(t), true
}

// HasEncoder reports encoder-decoder models (not supported by inference).
func (m *Model) HasEncoder() bool { return llamaModelHasEncoder(m.ptr) }

// sizeofModelParams is checked against the header in the layout test.
const sizeofModelParams = unsafe.Sizeof(cModelParams{})
