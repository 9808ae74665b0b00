package llamacpp

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"

	"github.com/omar-selfplay/omar/gguf"
)

// This file checks a GGUF file in Go before llama.cpp sees it. The file's
// structure is checked by the one GGUF reader (package gguf: header,
// metadata, tensor descriptions, every tensor's data inside the file);
// then its hyperparameters are checked against what llama.cpp v0.5.0
// needs. llama.cpp rejects most bad files itself with a log line and a
// NULL, but some values reach a GGML_ASSERT (abort: the whole process
// dies with a C stack dump) or a read past an array's end: a block count
// beyond LLAMA_MAX_LAYERS, a NaN or non-positive norm epsilon (ggml's
// rms_norm asserts eps ≥ 0, and NaN fails every comparison), head counts
// that do not divide (mul_mat's broadcast asserts), an odd or too large
// RoPE dimension (rope asserts), vocabulary arrays shorter than the token
// list. A clear error naming the key is better than any of those.

// llama.cpp v0.5.0 limits (llama-hparams.h).
const (
	llamaMaxLayers  = 512 // LLAMA_MAX_LAYERS
	llamaMaxExperts = 512 // LLAMA_MAX_EXPERTS
	// maxWidth bounds embedding, feed-forward and head sizes: far above
	// any released model, far below sizes whose products overflow.
	maxWidth = 1 << 20
	// maxHeads bounds attention heads per layer.
	maxHeads = 1 << 12
	// maxTrainContext bounds context_length (int32 in llama.cpp).
	maxTrainContext = 1 << 28
)

// ModelFileError says what is wrong with a model file and where.
type ModelFileError struct {
	Path   string
	Offset int64 // byte offset where the problem was found, -1 if none
	Reason string
	// Key is the metadata key at fault for a hyperparameter ("" for a
	// structural problem).
	Key string
	err error // the reader's error, if any
}

func (e *ModelFileError) Error() string {
	if e.Offset >= 0 {
		return fmt.Sprintf("llamacpp: %s: %s (at byte %d): %v", e.Path, e.Reason, e.Offset, ErrBadModelFile)
	}
	return fmt.Sprintf("llamacpp: %s: %s: %v", e.Path, e.Reason, ErrBadModelFile)
}

// Unwrap returns ErrBadModelFile and the reader's error (a
// *gguf.FormatError, gguf.ErrNotGGUF) when there is one.
func (e *ModelFileError) Unwrap() []error {
	if e.err != nil {
		return []error{ErrBadModelFile, e.err}
	}
	return []error{ErrBadModelFile}
}

// CheckModelFile verifies that path is a complete GGUF file (v2 or v3)
// through package gguf, and that a model's hyperparameters are ones
// llama.cpp can use (CheckHyperparams).
func CheckModelFile(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("llamacpp: model file: %w", err)
	}
	if st.IsDir() {
		return &ModelFileError{Path: path, Offset: -1, Reason: "is a directory"}
	}
	f, err := gguf.Open(path)
	if err != nil {
		var fe *gguf.FormatError
		switch {
		case errors.As(err, &fe):
			return &ModelFileError{Path: path, Offset: fe.Offset, Reason: fe.Msg, err: err}
		case errors.Is(err, gguf.ErrNotGGUF):
			return &ModelFileError{Path: path, Offset: 0, Reason: "bad magic, want \"GGUF\"", err: err}
		}
		return fmt.Errorf("llamacpp: read %s: %w", path, err)
	}
	defer f.Close()
	if err := CheckHyperparams(f); err != nil {
		var me *ModelFileError
		if errors.As(err, &me) {
			me.Path = path
		}
		return err
	}
	return nil
}

// CheckHyperparams checks the hyperparameters of a model file that
// llama.cpp reads (block count, widths, head counts, epsilons, RoPE,
// experts, vocabulary against tensor shapes). Keys that are absent are
// left to llama.cpp, which refuses a missing required key cleanly. An
// adapter file (general.type = adapter) has only its alpha checked.
func CheckHyperparams(f *gguf.File) error {
	h := hparams{f: f}
	if typ, _ := f.String("general.type"); typ == "adapter" {
		h.positiveFloat("adapter.lora.alpha", 0, false)
		return h.err
	}
	arch, err := f.String("general.architecture")
	if err != nil {
		return nil // llama.cpp: "unknown model architecture"
	}
	k := func(s string) string { return arch + "." + s }

	nLayer, hasLayers := h.uintIn(k("block_count"), 1, llamaMaxLayers)
	nEmbd, hasEmbd := h.uintIn(k("embedding_length"), 1, maxWidth)
	h.uintIn(k("context_length"), 1, maxTrainContext)
	h.perLayer(k("feed_forward_length"), nLayer, hasLayers, 0, maxWidth)
	heads := h.perLayer(k("attention.head_count"), nLayer, hasLayers, 1, maxHeads)
	kvHeads := h.perLayer(k("attention.head_count_kv"), nLayer, hasLayers, 1, maxHeads)
	if heads != nil && kvHeads != nil {
		for i := range min(len(heads), len(kvHeads)) {
			if heads[i]%kvHeads[i] != 0 {
				h.fail(k("attention.head_count_kv"), fmt.Sprintf("%d does not divide attention.head_count %d (layer %d): grouped-query attention needs whole groups", kvHeads[i], heads[i], i))
				break
			}
		}
	}
	headK, hasHeadK := h.uintIn(k("attention.key_length"), 1, maxWidth)
	h.uintIn(k("attention.value_length"), 1, maxWidth)
	if !hasHeadK && hasEmbd && len(heads) > 0 && heads[0] > 0 {
		if nEmbd%heads[0] != 0 {
			h.fail(k("embedding_length"), fmt.Sprintf("%d is not a multiple of attention.head_count %d (and attention.key_length is absent)", nEmbd, heads[0]))
		}
		headK, hasHeadK = nEmbd/heads[0], true
	}
	if rope, ok := h.uintIn(k("rope.dimension_count"), 0, maxWidth); ok {
		switch {
		case rope%2 != 0:
			h.fail(k("rope.dimension_count"), fmt.Sprintf("%d is odd: RoPE rotates pairs of dimensions", rope))
		case hasHeadK && rope > headK:
			h.fail(k("rope.dimension_count"), fmt.Sprintf("%d exceeds the head size %d", rope, headK))
		}
	}
	h.positiveFloat(k("rope.freq_base"), 0, false)
	h.positiveFloat(k("rope.freq_scale"), 0, false)
	h.positiveFloat(k("rope.scaling.factor"), 0, true)
	h.positiveFloat(k("attention.layer_norm_rms_epsilon"), 1, false)
	h.positiveFloat(k("attention.layer_norm_epsilon"), 1, false)
	nExpert, _ := h.uintIn(k("expert_count"), 0, llamaMaxExperts)
	if used, ok := h.uintIn(k("expert_used_count"), 0, llamaMaxExperts); ok && used > nExpert {
		h.fail(k("expert_used_count"), fmt.Sprintf("%d exceeds expert_count %d", used, nExpert))
	}

	// Vocabulary: llama.cpp indexes scores and token types by token id and
	// sizes the embedding and output by the token count.
	tokens, err := f.Strings("tokenizer.ggml.tokens")
	if v, ok := f.Get("tokenizer.ggml.tokens"); ok && err != nil {
		h.fail("tokenizer.ggml.tokens", fmt.Sprintf("is %T, want an array of strings", v))
	}
	if err == nil {
		n := uint64(len(tokens))
		if n == 0 {
			h.fail("tokenizer.ggml.tokens", "is empty")
		}
		for _, key := range []string{"tokenizer.ggml.scores", "tokenizer.ggml.token_type"} {
			if v, ok := f.Get(key); ok {
				if got := arrayLen(v); got != int(n) {
					h.fail(key, fmt.Sprintf("has %d entries for %d tokens", got, n))
				}
			}
		}
		if vs, ok := h.uintIn(k("vocab_size"), 1, math.MaxInt32); ok && vs != n {
			h.fail(k("vocab_size"), fmt.Sprintf("%d but tokenizer.ggml.tokens has %d tokens", vs, n))
		}
		for _, name := range []string{"token_embd.weight", "output.weight"} {
			t, ok := f.Tensor(name)
			if !ok || len(t.Shape) < 2 {
				continue
			}
			if hasEmbd && t.Shape[0] != nEmbd {
				h.fail(k("embedding_length"), fmt.Sprintf("%d but tensor %s has rows of %d", nEmbd, name, t.Shape[0]))
			}
			if t.Shape[1] != n {
				h.fail("tokenizer.ggml.tokens", fmt.Sprintf("has %d tokens but tensor %s has %d rows", n, name, t.Shape[1]))
			}
		}
	}
	return h.err
}

// hparams collects the first problem of a hyperparameter check.
type hparams struct {
	f   *gguf.File
	err error
}

func (h *hparams) fail(key, reason string) {
	if h.err == nil {
		h.err = &ModelFileError{Offset: -1, Key: key, Reason: key + " " + reason}
	}
}

// uintIn reads an integer key and checks lo ≤ v ≤ hi; ok is false when
// the key is absent or bad.
func (h *hparams) uintIn(key string, lo, hi uint64) (v uint64, ok bool) {
	raw, present := h.f.Get(key)
	if !present {
		return 0, false
	}
	v, ok = intValue(raw)
	switch {
	case !ok:
		h.fail(key, fmt.Sprintf("= %v (%T), want an integer in [%d, %d]", raw, raw, lo, hi))
	case v < lo || v > hi:
		h.fail(key, fmt.Sprintf("= %s, want an integer in [%d, %d]", intText(raw), lo, hi))
		ok = false
	}
	return v, ok
}

// perLayer reads a key that is one integer for every layer or an array
// with one per layer, checks each against [lo, hi] and returns them (nil
// when absent or bad).
func (h *hparams) perLayer(key string, nLayer uint64, hasLayers bool, lo, hi uint64) []uint64 {
	raw, present := h.f.Get(key)
	if !present {
		return nil
	}
	if _, scalar := intValue(raw); scalar {
		v, ok := h.uintIn(key, lo, hi)
		if !ok {
			return nil
		}
		return []uint64{v}
	}
	n := arrayLen(raw)
	if n < 0 {
		h.fail(key, fmt.Sprintf("is %T, want an integer or one per layer", raw))
		return nil
	}
	if hasLayers && uint64(n) != nLayer {
		h.fail(key, fmt.Sprintf("has %d entries for block_count %d layers", n, nLayer))
		return nil
	}
	out := make([]uint64, n)
	for i := range n {
		v, ok := intValue(arrayAt(raw, i))
		if !ok || v < lo || v > hi {
			h.fail(key, fmt.Sprintf("[%d] = %v, want an integer in [%d, %d]", i, arrayAt(raw, i), lo, hi))
			return nil
		}
		out[i] = v
	}
	return out
}

// positiveFloat checks that a float key, when present, is finite and
// positive (zeroOK also accepts 0, which means "unset" for some keys) and
// below hi when hi > 0.
func (h *hparams) positiveFloat(key string, hi float64, zeroOK bool) {
	raw, present := h.f.Get(key)
	if !present {
		return
	}
	var v float64
	switch x := raw.(type) {
	case float32:
		v = float64(x)
	case float64:
		v = x
	default:
		h.fail(key, fmt.Sprintf("= %v (%T), want a float", raw, raw))
		return
	}
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		h.fail(key, fmt.Sprintf("= %v, want a finite number", v))
	case v == 0 && zeroOK:
	case v <= 0:
		h.fail(key, fmt.Sprintf("= %v, want > 0", v))
	case hi > 0 && v >= hi:
		h.fail(key, fmt.Sprintf("= %v, want < %v", v, hi))
	}
}

// intValue converts a metadata integer of any type; negative values and
// non-integers give ok false.
func intValue(v any) (uint64, bool) {
	switch x := v.(type) {
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	case int8:
		return uint64(x), x >= 0
	case int16:
		return uint64(x), x >= 0
	case int32:
		return uint64(x), x >= 0
	case int64:
		return uint64(x), x >= 0
	}
	return 0, false
}

// intText prints an integer metadata value as stored (a negative one
// stays negative).
func intText(v any) string {
	switch x := v.(type) {
	case int8, int16, int32, int64:
		return fmt.Sprint(x)
	}
	u, _ := intValue(v)
	return strconv.FormatUint(u, 10)
}

// arrayLen is the length of a metadata array, -1 for a scalar.
func arrayLen(v any) int {
	switch x := v.(type) {
	case []uint8:
		return len(x)
	case []int8:
		return len(x)
	case []uint16:
		return len(x)
	case []int16:
		return len(x)
	case []uint32:
		return len(x)
	case []int32:
		return len(x)
	case []uint64:
		return len(x)
	case []int64:
		return len(x)
	case []float32:
		return len(x)
	case []float64:
		return len(x)
	case []bool:
		return len(x)
	case []string:
		return len(x)
	}
	return -1
}

// arrayAt is element i of an integer metadata array (nil otherwise).
func arrayAt(v any, i int) any {
	switch x := v.(type) {
	case []uint8:
		return x[i]
	case []int8:
		return x[i]
	case []uint16:
		return x[i]
	case []int16:
		return x[i]
	case []uint32:
		return x[i]
	case []int32:
		return x[i]
	case []uint64:
		return x[i]
	case []int64:
		return x[i]
	}
	return nil
}
