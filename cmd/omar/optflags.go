package main

import (
	"os"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/internal/cliflag"
	"github.com/omar-selfplay/omar/loop"
	"github.com/omar-selfplay/omar/players"
)

// The option flags omar's commands share: one name and one usage for each
// setting (docs/flags.md).

// llamaLibEnv is the one place the library directory's environment
// variable is read; --llama-lib overrides it.
func llamaLibEnv() string { return os.Getenv("OMAR_LLAMA_LIB") }

// bindBackend binds the flags of how backends are opened; be selects the
// players.Backend inside T.
func bindBackend[T any](f *cliflag.OptionFlags[T], be func(*T) *players.Backend) {
	f.String("llama-lib", "llama.cpp library directory (default: OMAR_LLAMA_LIB, else lib/llama/cpu)", func(o *T) *string { return &be(o).LlamaLib })
	f.Int("threads", "threads for token generation (default half the CPUs, at most 8)", func(o *T) *int { return &be(o).Threads })
	f.Int("threads-batch", "threads for prompt processing (default --threads)", func(o *T) *int { return &be(o).ThreadsBatch })
	f.Int("contexts", "llama contexts per model, each on --threads threads (a model too small to split across threads uses a core per context; default 1)", func(o *T) *int { return &be(o).Contexts })
	f.Int("gpu-layers", "layers offloaded to a GPU backend (-1 all)", func(o *T) *int { return &be(o).GPULayers })
	f.String("kv", "KV cache type: f16 (default), f32 or q8_0", func(o *T) *string { return &be(o).KVCache })
}

// bindRollout binds the flags that override a rollout's options; ro
// selects them inside T.
func bindRollout[T any](f *cliflag.OptionFlags[T], ro func(*T) *loop.RolloutOptions) {
	f.String("env", "environment id (overrides the config; see omar envs)", func(o *T) *string { return &ro(o).Env })
	f.String("model", "policy model GGUF file", func(o *T) *string { return &ro(o).Model })
	f.Func("agents", "seat agents, e.g. '*=policy,seat0=scripted:random'", func(o *T, v string) error {
		a, err := engine.ParseAgents(v)
		ro(o).Agents = a
		return err
	})
	f.String("llama-lib", "llama.cpp library directory (default: OMAR_LLAMA_LIB, else lib/llama/cpu)", func(o *T) *string { return &ro(o).LlamaLib })
	f.Int("episodes", "number of episodes (per iteration in selfplay)", func(o *T) *int { return &ro(o).Episodes })
	f.Int("parallel", "episodes in flight", func(o *T) *int { return &ro(o).Parallel })
	f.Uint64("seed", "run seed", func(o *T) *uint64 { return &ro(o).Seed })
	f.Float32("temperature", "sampling temperature", func(o *T) *float32 { return &ro(o).Temperature })
	f.Int("threads", "CPU threads of the llama backend", func(o *T) *int { return &ro(o).Threads })
	f.Int("contexts", "llama contexts over the model, each on --threads threads (0: 2 for a model file of at most 32 MiB on the CPU with one thread, else 1)", func(o *T) *int { return &ro(o).Contexts })
}
