package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/model"
)

func init() {
	register(command{name: "model", summary: "create a random test model (init) or describe a GGUF file (info)", run: runModel})
}

const modelUsage = `usage: omar model init --out FILE.gguf [flags]   write a random test model
       omar model info [flags] FILE.gguf       describe a GGUF file
Run 'omar model init -h' or 'omar model info -h' for their flags.`

func runModel(ctx context.Context, env *cliEnv, args []string) error {
	if isHelp(args) {
		fmt.Fprintln(env.stderr, modelUsage)
		return flag.ErrHelp
	}
	if len(args) == 0 {
		fmt.Fprintln(env.stderr, modelUsage)
		return usagef("want 'omar model init|info [flags]'")
	}
	switch args[0] {
	case "init":
		return runModelInit(env, args[1:])
	case "info":
		return runModelInfo(env, args[1:])
	}
	return usagef("unknown subcommand %q, want init or info", args[0])
}

func runModelInit(env *cliEnv, args []string) error {
	fs := newFlags(env, "model init")
	arch := fs.String("arch", "llama", "architecture: "+strings.Join(model.Architectures, ", "))
	preset := fs.String("preset", "tiny", "size: "+strings.Join(model.Presets, ", "))
	seed := fs.Uint64("seed", 1, "seed of the random weights")
	out := fs.String("out", "", "output GGUF file (required)")
	ctxLen := fs.Int("ctx", 0, "context length to record (0: the preset's)")
	f16 := fs.Bool("f16", false, "store weight matrices as F16 instead of F32")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() > 0 {
		return usagef("need --out and no positional arguments")
	}
	opts := model.Options{Arch: *arch, Preset: *preset, Seed: *seed, ContextLength: *ctxLen}
	if *f16 {
		opts.Type = gguf.F16
	}
	opts = opts.Defaults()
	if err := opts.Validate(); err != nil {
		return usageError{err}
	}
	c, err := opts.Config()
	if err != nil {
		return err
	}
	if err := model.WriteFile(*out, opts); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "wrote %s: %s %s, %s parameters, vocabulary %d, context %d, seed %d\n",
		*out, c.Arch, opts.Preset, modelCount(uint64(c.Params())), c.VocabSize, c.ContextLength, opts.Seed)
	return nil
}

func runModelInfo(env *cliEnv, args []string) error {
	fs := newFlags(env, "model info")
	all := fs.Bool("tensors", false, "list every tensor")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("want 'omar model info [flags] FILE.gguf'")
	}
	f, err := gguf.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	in, err := model.Inspect(f)
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(in)
	}
	printModelInfo(env.stdout, fs.Arg(0), f, in, *all)
	return nil
}

func printModelInfo(w io.Writer, path string, f *gguf.File, in model.Info, all bool) {
	name := ""
	if in.Name != "" {
		name = " (" + in.Name + ")"
	}
	fmt.Fprintf(w, "file:          %s, %s bytes, GGUF v%d\n", path, modelCount(uint64(in.FileSize)), f.Version)
	fmt.Fprintf(w, "architecture:  %s%s\n", in.Arch, name)
	if in.Type != "" && in.Type != "model" {
		fmt.Fprintf(w, "type:          %s\n", in.Type)
	}
	fmt.Fprintf(w, "parameters:    %s (%d)\n", modelCount(in.Params), in.Params)
	if in.BlockCount > 0 {
		fmt.Fprintf(w, "shape:         %d layers, embedding %d, feed-forward %d, heads %d (%d KV), context %d\n",
			in.BlockCount, in.EmbeddingSize, in.FeedForward, in.HeadCount, in.HeadCountKV, in.ContextLength)
	}
	if in.VocabSize > 0 {
		fmt.Fprintf(w, "vocabulary:    %d tokens, tokenizer %s, pre-tokenizer %s\n", in.VocabSize, in.TokenizerModel, modelOrNone(in.PreTokenizer))
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
		if !all && strings.HasPrefix(t.Name, "blk.") && !strings.HasPrefix(t.Name, "blk.0.") {
			continue
		}
		fmt.Fprintf(w, "  %-28s %-5v %v\n", t.Name, t.Type, t.Shape)
		shown++
	}
	if rest := len(f.Tensors) - shown; rest > 0 {
		fmt.Fprintf(w, "  … %d more in blocks 1..%d (--tensors lists them)\n", rest, max(in.BlockCount, 1)-1)
	}
}

func modelOrNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// modelCount writes n with a K/M/G suffix.
func modelCount(n uint64) string {
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
