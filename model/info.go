package model

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/omar-selfplay/omar/gguf"
)

// Info summarises a GGUF model file (ours or any real one).
type Info struct {
	Arch           string
	Name           string
	Type           string // general.type: "model", "adapter" or empty
	FileSize       int64
	Params         uint64 // elements of all tensors
	TensorCount    int
	TensorTypes    []TypeCount // tensors per storage type, most common first
	BlockCount     uint64
	ContextLength  uint64
	EmbeddingSize  uint64
	FeedForward    uint64
	HeadCount      uint64
	HeadCountKV    uint64
	VocabSize      int
	TokenizerModel string // tokenizer.ggml.model: "gpt2", "llama", …
	PreTokenizer   string
	ChatTemplate   string
	TiedEmbeddings bool // no output.weight: llama.cpp reuses token_embd
}

// TypeCount counts the tensors of one storage type.
type TypeCount struct {
	Type    gguf.TensorType
	Tensors int
	Params  uint64
}

// Inspect reads the summary of a parsed file. Missing optional keys stay
// zero; a file without general.architecture is an error.
func Inspect(f *gguf.File) (Info, error) {
	var in Info
	var err error
	if in.Arch, err = f.String("general.architecture"); err != nil {
		return in, fmt.Errorf("model: not a model file: %w", err)
	}
	in.Name, _ = f.String("general.name")
	in.Type, _ = f.String("general.type")
	in.FileSize = f.Size
	a := in.Arch + "."
	in.BlockCount, _ = f.Uint(a + "block_count")
	in.ContextLength, _ = f.Uint(a + "context_length")
	in.EmbeddingSize, _ = f.Uint(a + "embedding_length")
	in.FeedForward, _ = f.Uint(a + "feed_forward_length")
	in.HeadCount, _ = f.Uint(a + "attention.head_count")
	in.HeadCountKV, _ = f.Uint(a + "attention.head_count_kv")
	in.TokenizerModel, _ = f.String("tokenizer.ggml.model")
	in.PreTokenizer, _ = f.String("tokenizer.ggml.pre")
	in.ChatTemplate, _ = f.String("tokenizer.chat_template")
	if toks, err := f.Strings("tokenizer.ggml.tokens"); err == nil {
		in.VocabSize = len(toks)
	}
	in.TensorCount = len(f.Tensors)
	byType := map[gguf.TensorType]*TypeCount{}
	for _, t := range f.Tensors {
		n := t.Elements()
		in.Params += n
		tc := byType[t.Type]
		if tc == nil {
			tc = &TypeCount{Type: t.Type}
			byType[t.Type] = tc
		}
		tc.Tensors++
		tc.Params += n
	}
	for _, tc := range byType {
		in.TensorTypes = append(in.TensorTypes, *tc)
	}
	slices.SortFunc(in.TensorTypes, func(x, y TypeCount) int {
		return cmp.Or(cmp.Compare(y.Tensors, x.Tensors), cmp.Compare(x.Type, y.Type))
	})
	_, hasOutput := f.Tensor("output.weight")
	_, hasEmbd := f.Tensor("token_embd.weight")
	in.TiedEmbeddings = hasEmbd && !hasOutput
	return in, nil
}
