package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/gbnf"
	"github.com/omar-selfplay/omar/inference/llama"
	"github.com/omar-selfplay/omar/internal/cliflag"
	"github.com/omar-selfplay/omar/players"
)

func init() {
	register(command{name: "generate", summary: "generate text with a GGUF model through llama.cpp", run: runGenerate})
}

// llamaFlags are the flags every llama.cpp command shares.
type llamaFlags struct {
	model, lib            string
	threads, threadsBatch int
	gpuLayers             int
	ctx                   int
	kv, flashAttn         string
}

func (f *llamaFlags) bind(fs interface {
	StringVar(*string, string, string, string)
	IntVar(*int, string, int, string)
}) {
	n := llama.DefaultThreads()
	fs.StringVar(&f.model, "model", "", "GGUF model file (required)")
	fs.StringVar(&f.lib, "llama-lib", llamaLibEnv(), "llama.cpp library directory (default: OMAR_LLAMA_LIB, else lib/llama/cpu)")
	fs.IntVar(&f.threads, "threads", n, "threads for token generation (default half the CPUs, at most 8; more than the free cores collapses throughput: llama.cpp's threads spin-wait)")
	fs.IntVar(&f.threadsBatch, "threads-batch", n, "threads for prompt processing (default half the CPUs, at most 8)")
	fs.IntVar(&f.gpuLayers, "gpu-layers", 0, "layers offloaded to a GPU backend (-1 all)")
	fs.IntVar(&f.ctx, "context", 2048, "tokens per sequence")
	fs.StringVar(&f.kv, "kv", "f16", "KV cache type: f16, f32 or q8_0")
	fs.StringVar(&f.flashAttn, "flash-attn", "off", "flash attention: off, on or auto")
}

func (f *llamaFlags) options() (llama.Options, error) {
	if f.model == "" {
		return llama.Options{}, fmt.Errorf("--model is required: %w", cliflag.ErrUsage)
	}
	be := players.Backend{LlamaLib: f.lib, Threads: f.threads, ThreadsBatch: f.threadsBatch, GPULayers: f.gpuLayers,
		KVCache: f.kv, FlashAttention: f.flashAttn}
	o, err := be.Llama(f.model, "", llama.Options{}.Defaults().Parallel, f.ctx, "")
	if err != nil {
		return o, fmt.Errorf("%w: %w", err, cliflag.ErrUsage)
	}
	return o, nil
}

func runGenerate(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "generate")
	var lf llamaFlags
	lf.bind(fs)
	promptText := fs.String("prompt", "Hello", "prompt text (a user message when --chat)")
	system := fs.String("system", "", "system message (with --chat)")
	chat := fs.Bool("chat", true, "wrap the prompt with the model's chat template")
	n := fs.Int("n", 128, "most tokens to generate")
	grammar := fs.String("grammar", "", "GBNF grammar constraining the reply (root rule \"root\"), or @file")
	seed := fs.Uint64("seed", 0, "sampling seed")
	temp := fs.Float64("temperature", 0.8, "sampling temperature (0: greedy)")
	topK := fs.Int("top-k", 0, "top-k (0: off)")
	topP := fs.Float64("top-p", 0, "top-p (0 or 1: off)")
	minP := fs.Float64("min-p", 0, "min-p (0: off)")
	stop := fs.String("stop", "", "stop string")
	asJSON := fs.Bool("json", false, "print the response (tokens, logprobs) as JSON")
	adapter := fs.String("adapter", "", "LoRA adapter GGUF to apply (e.g. adapter.gguf of an omar selfplay or sft run)")
	cliflag.Alias(fs, "ctx", "context", env.stderr)
	cliflag.Alias(fs, "temp", "temperature", env.stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: %w", fs.Args(), cliflag.ErrUsage)
	}
	o, err := lf.options()
	if err != nil {
		return err
	}
	o.Parallel = 1
	o.Adapter = *adapter
	g := *grammar
	if name, ok := strings.CutPrefix(g, "@"); ok {
		b, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		g = string(b)
	}
	if g != "" {
		// Before the model loads: a bad grammar fails in milliseconds.
		if _, err := gbnf.Check(g, "root", gbnf.Limits{}.Defaults()); err != nil {
			return fmt.Errorf("--grammar: %w", err)
		}
	}
	b, err := players.OpenLlamaOptions(o)
	if err != nil {
		return err
	}
	defer b.Close()
	toks, err := inference.PromptTokens(b, *system, *promptText, *chat)
	if err != nil {
		return err
	}
	req := inference.Request{
		Prompt: toks, MaxTokens: *n, Grammar: g,
		Sampling: inference.Sampling{Temperature: float32(*temp), TopK: *topK, TopP: float32(*topP), MinP: float32(*minP), Seed: *seed},
	}
	if *stop != "" {
		req.Stop = []string{*stop}
	}
	start := time.Now()
	out, err := b.Generate(ctx, []inference.Request{req})
	if err != nil {
		return err
	}
	el := time.Since(start)
	r := out[0]
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		return enc.Encode(struct {
			PromptTokens int `json:"prompt_tokens"`
			inference.Response
		}{len(toks), r})
	}
	fmt.Fprintln(env.stdout, r.Text)
	fmt.Fprintf(env.stderr, "%d prompt tokens, %d generated (%s) in %s, %.1f tokens/s\n",
		len(toks), len(r.Tokens), r.Stop, el.Round(time.Millisecond), float64(len(r.Tokens))/el.Seconds())
	return nil
}
