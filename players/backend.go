package players

import (
	"fmt"

	"github.com/omar-selfplay/omar/inference/llama"
	"github.com/omar-selfplay/omar/inference/ollama"
)

// Backend says how this process opens its backends: the llama.cpp
// library and the machine's settings for every llama backend, and the
// Ollama server. It is embedded inline (the YAML keys below) wherever a
// backend is opened: a run's rollout, omar eval's config, omar serve.
type Backend struct {
	// LlamaLib is the llama.cpp library directory ("" the default:
	// OMAR_LLAMA_LIB, else lib/llama/cpu).
	LlamaLib string `yaml:"llama_lib"`
	// Threads decode each context's steps (0: llama.DefaultThreads);
	// ThreadsBatch processes prompts (0: Threads).
	Threads      int `yaml:"threads"`
	ThreadsBatch int `yaml:"threads_batch,omitempty"`
	// Contexts is the number of llama contexts per model file, each with
	// its own decode loop and share of the sequence slots (0 or 1: one).
	Contexts int `yaml:"contexts"`
	// GPULayers offloaded to a GPU backend (-1 all, 0 none).
	GPULayers int `yaml:"gpu_layers"`
	// KVCache is the K and V cache type: "f16" (the default, also ""),
	// "f32" or "q8_0" (which turns flash attention on).
	KVCache string `yaml:"kv_cache"`
	// FlashAttention is "off", "on" or "auto" ("" off, or on for a q8_0
	// cache).
	FlashAttention string `yaml:"flash_attention,omitempty"`
	// OllamaHost serves ollama: players ("" ollama.DefaultHost).
	OllamaHost string `yaml:"ollama_host"`
}

// Llama returns the options of a llama backend for the model file (and
// adapter, "" none) with slots sequence slots of context tokens each.
// chatTemplate, when set, renders prompts instead of the model's own
// template (the reply settings' chat_template).
func (b Backend) Llama(model, adapter string, slots, context int, chatTemplate string) (llama.Options, error) {
	o := llama.Options{}.Defaults()
	if b.LlamaLib != "" {
		o.LibDir = b.LlamaLib
	}
	o.Model, o.Adapter = model, adapter
	o.Parallel = max(1, slots)
	o.Contexts = min(b.Contexts, o.Parallel)
	o.Context = context
	o.Batch = max(o.Batch, o.Parallel)
	if b.Threads > 0 {
		o.Threads, o.ThreadsBatch = b.Threads, b.Threads
	}
	if b.ThreadsBatch > 0 {
		o.ThreadsBatch = b.ThreadsBatch
	}
	o.GPULayers = b.GPULayers
	if err := o.SetKVCache(b.KVCache); err != nil {
		return o, fmt.Errorf("kv_cache %w", err)
	}
	if b.FlashAttention != "" {
		fa, err := llama.ParseFlashAttention(b.FlashAttention)
		if err != nil {
			return o, fmt.Errorf("flash_attention %w", err)
		}
		o.FlashAttention = fa
	}
	o.ChatTemplate = chatTemplate
	return o, nil
}

// OpenLlama opens a llama backend (see Llama).
func (b Backend) OpenLlama(model, adapter string, slots, context int, chatTemplate string) (*llama.Backend, error) {
	o, err := b.Llama(model, adapter, slots, context, chatTemplate)
	if err != nil {
		return nil, err
	}
	return OpenLlamaOptions(o)
}

// OpenLlamaOptions opens a llama backend from options built elsewhere
// (Backend.Llama, then adjusted): every llama backend of the program is
// opened here.
func OpenLlamaOptions(o llama.Options) (*llama.Backend, error) { return llama.New(o) }

// Ollama returns the options of an Ollama client for model with at most
// parallel requests in flight.
func (b Backend) Ollama(model string, parallel int) ollama.Options {
	host := b.OllamaHost
	if host == "" {
		host = ollama.DefaultHost
	}
	return ollama.Options{Host: host, Model: model, Parallel: max(1, parallel)}
}

// OpenOllama opens an Ollama client (see Ollama).
func (b Backend) OpenOllama(model string, parallel int) (*ollama.Backend, error) {
	return OpenOllamaOptions(b.Ollama(model, parallel))
}

// OpenOllamaOptions opens an Ollama client from options built elsewhere
// (Backend.Ollama, then adjusted, e.g. with a reply format).
func OpenOllamaOptions(o ollama.Options) (*ollama.Backend, error) { return ollama.New(o) }
