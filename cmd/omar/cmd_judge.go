package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/omar-selfplay/omar/inference/ollama"
	"github.com/omar-selfplay/omar/internal/cliflag"
	"github.com/omar-selfplay/omar/internal/progress"
	"github.com/omar-selfplay/omar/loop"
	"github.com/omar-selfplay/omar/players"
	"github.com/omar-selfplay/omar/sotopia"
)

func init() {
	register(command{name: "judge", summary: "(re)score recorded SOTOPIA episodes with an LLM judge", run: runJudge})
}

// judgeFlags are the flags of omar judge.
type judgeFlags struct {
	model, llamaLib, out, label string
	ollama, ollamaModel         string
	context, parallel, threads  int
	gpuLayers                   int
	opts                        sotopia.JudgeOptions
}

func (f *judgeFlags) bind(fs *flag.FlagSet) {
	f.opts = sotopia.JudgeOptions{}.Defaults()
	fs.StringVar(&f.model, "model", "", "judge model GGUF file (this or --ollama-model)")
	fs.StringVar(&f.ollamaModel, "ollama-model", "", "judge with this Ollama model, e.g. qwen3:4b (this or --model)")
	fs.StringVar(&f.ollama, "ollama", os.Getenv("OLLAMA_HOST"), "Ollama server URL (default: OLLAMA_HOST or "+ollama.DefaultHost+")")
	fs.StringVar(&f.llamaLib, "llama-lib", llamaLibEnv(), "llama.cpp library directory (default: OMAR_LLAMA_LIB or lib/llama/cpu)")
	fs.StringVar(&f.out, "out", "", "write the rescored episodes here (default: stdout)")
	fs.StringVar(&f.label, "label", "", `judge name recorded in terms.judge (default "llama:<model file>" or "ollama:<model>")`)
	fs.IntVar(&f.context, "context", 8192, "tokens per judge sequence (prompt + reply) of a GGUF judge")
	fs.IntVar(&f.parallel, "parallel", 4, "episodes judged at once (one batched backend)")
	fs.IntVar(&f.threads, "threads", 2, "CPU threads of a GGUF judge")
	fs.IntVar(&f.gpuLayers, "gpu-layers", 0, "layers offloaded to a GPU (-1 all)")
	fs.IntVar(&f.opts.Retries, "retries", f.opts.Retries, "completions asked again after an invalid one")
	fs.Uint64Var(&f.opts.Seed, "seed", f.opts.Seed, "judge seed (fixed for reproducible scores)")
	var temp float64
	fs.Func("temperature", "judge sampling temperature (default 0)", func(s string) error {
		_, err := fmt.Sscan(s, &temp)
		f.opts.Temperature = float32(temp)
		return err
	})
	fs.IntVar(&f.opts.ReasoningChars, "reasoning-chars", f.opts.ReasoningChars, "longest reasoning string per score")
	fs.IntVar(&f.opts.MaxTokens, "max-tokens", 0, "cap on judge reply tokens (0: the grammar's bound)")
	fs.BoolVar(&f.opts.Extra, "extra", false, "also score the five OMAR metrics (compromise, persuasion, …)")
	fs.BoolVar(&f.opts.Process, "process", false, "also compute the per-turn process reward (one completion per turn)")
	fs.StringVar(&f.opts.StageWeights, "stage-weights", f.opts.StageWeights, "the process reward's stage weights: proposed (by the judge, sanitised) or fixed (the stage table, the ablation)")
}

func runJudge(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "judge")
	var f judgeFlags
	f.bind(fs)
	cliflag.Alias(fs, "o", "out", env.stderr)
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "usage: omar judge --model JUDGE.gguf [flags] EPISODES.jsonl...\n       omar judge --ollama-model NAME [--ollama URL] [flags] EPISODES.jsonl...\n\nRescores recorded sotopia_v1 episodes (engine records, one per line) with an LLM judge and writes them back with the new outcome. A GGUF judge is grammar-constrained; an Ollama judge gets the same JSON as a JSON schema (its format). Invalid replies are retried. Records of other environments are copied unchanged.")
		cliflag.Print(env.stderr, fs)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	jc := loop.JudgeOptions{Model: f.model, Ollama: f.ollama, OllamaModel: f.ollamaModel, Context: f.context}
	if fs.NArg() == 0 || f.model == "" && f.ollamaModel == "" {
		fs.Usage()
		return fmt.Errorf("need --model or --ollama-model, and at least one episodes file: %w", cliflag.ErrUsage)
	}
	if err := jc.Validate(); err != nil {
		return fmt.Errorf("%w (--model, --ollama-model): %w", err, cliflag.ErrUsage)
	}
	f.opts.Label = f.label
	o := loop.RescoreOptions{Judge: jc, Parallel: f.parallel, Sotopia: f.opts, Log: env.stderr,
		Rollout: loop.RolloutOptions{Backend: players.Backend{LlamaLib: f.llamaLib, Threads: f.threads, GPULayers: f.gpuLayers, KVCache: "f16"}}}
	fs.Visit(func(fl *flag.Flag) { o.KeepContext = o.KeepContext || fl.Name == "context" })
	w := env.stdout
	if f.out != "" {
		file, err := os.Create(f.out)
		if err != nil {
			return err
		}
		defer file.Close()
		w = file
	}
	// Episodes take seconds to minutes each on a CPU: off a terminal, a
	// line every tenth of them.
	var prog *progress.Counter
	sum, err := loop.Rescore(ctx, o, fs.Args(), w, func(n int) {
		prog = progress.NewCounter(env.stderr, env.interactive, n, "judging", "judged", "episodes")
	}, func() { prog.Done() })
	prog.Finish()
	if err != nil {
		return err
	}
	fmt.Fprintln(env.stderr, sum)
	if f.out != "" {
		return w.(*os.File).Close()
	}
	return nil
}
