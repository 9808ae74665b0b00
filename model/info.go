package model

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

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

// Write describes the model for a person (omar model info): the file,
// the shape, the vocabulary, the tensors (those outside the blocks and the
// first block's, or every one with allTensors).
func (in Info) Write(w io.Writer, path string, f *gguf.File, allTensors bool) {
	name := ""
	if in.Name != "" {
		name = " (" + in.Name + ")"
	}
	fmt.Fprintf(w, "file:          %s, %s bytes, GGUF v%d\n", path, Count(uint64(in.FileSize)), f.Version)
	fmt.Fprintf(w, "architecture:  %s%s\n", in.Arch, name)
	if in.Type != "" && in.Type != "model" {
		fmt.Fprintf(w, "type:          %s\n", in.Type)
	}
	fmt.Fprintf(w, "parameters:    %s (%d)\n", Count(in.Params), in.Params)
	if in.BlockCount > 0 {
		fmt.Fprintf(w, "shape:         %d layers, embedding %d, feed-forward %d, heads %d (%d KV), context %d\n",
			in.BlockCount, in.EmbeddingSize, in.FeedForward, in.HeadCount, in.HeadCountKV, in.ContextLength)
	}
	if in.VocabSize > 0 {
		fmt.Fprintf(w, "vocabulary:    %d tokens, tokenizer %s, pre-tokenizer %s\n", in.VocabSize, in.TokenizerModel, orNone(in.PreTokenizer))
	}
	tmpl := "none"
	if in.ChatTemplate != "" {
		tmpl = fmt.Sprintf("%d bytes", len(in.ChatTemplate))
		if strings.Contains(in.ChatTemplate, "<|im_start|>") {
			tmpl += ", ChatML"
		}
	}
	fmt.Fprintf(w, "chat template: %s\n", tmpl)
	if in.TiedEmbeddings {
		fmt.Fprintln(w, "output:        tied to token_embd")
	}
	var types []string
	for _, tc := range in.TensorTypes {
		types = append(types, fmt.Sprintf("%d %v", tc.Tensors, tc.Type))
	}
	fmt.Fprintf(w, "tensors:       %d (%s)\n", in.TensorCount, strings.Join(types, ", "))
	// Without --tensors: the tensors outside the blocks and those of the
	// first block, which show the per-layer layout.
	shown := 0
	for _, t := range f.Tensors {
		if !allTensors && strings.HasPrefix(t.Name, "blk.") && !strings.HasPrefix(t.Name, "blk.0.") {
			continue
		}
		fmt.Fprintf(w, "  %-28s %-5v %v\n", t.Name, t.Type, t.Shape)
		shown++
	}
	if rest := len(f.Tensors) - shown; rest > 0 {
		fmt.Fprintf(w, "  … %d more in blocks 1..%d (--tensors lists them)\n", rest, max(in.BlockCount, 1)-1)
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// Summary says what a model of o (defaulted, its Config c) is, as `omar
// model init` reports what it wrote: the architecture and size, or the
// shape and its layers; the parameters; the weights' type; the vocabulary
// and where the tokenizer came from (tokenizerDir, for o.Tokenizer); the
// context and the seed.
func (o Options) Summary(c Config, tokenizerDir string) string {
	what := c.Arch + " " + o.Preset
	if o.Shape != "" {
		what = "the " + o.Shape + " shape (" + c.Arch + ")"
		if o.Layers > 0 {
			what += fmt.Sprintf(" with %d layers", o.Layers)
		}
	}
	tokenizer := "generated tokenizer"
	if o.Tokenizer != nil {
		tokenizer = "tokenizer of " + tokenizerDir + " (pre-tokenizer " + o.Tokenizer.Pre + ")"
	}
	return fmt.Sprintf("%s, %s parameters, %v weights, vocabulary %d, %s, context %d, seed %d",
		what, Count(uint64(c.Params())), o.Type, c.VocabSize, tokenizer, c.ContextLength, o.Seed)
}

// Count writes n short, with a K/M/G suffix: 950, 12.3K, 4.56M.
func Count(n uint64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fG", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fK", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

// TrainingContext is the context_length of the GGUF model at path, 0 when
// the file cannot tell (a backend reports a bad file itself).
func TrainingContext(path string) int {
	f, err := gguf.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	in, err := Inspect(f)
	if err != nil {
		return 0
	}
	return int(min(in.ContextLength, 1<<31))
}
