// Package model creates the small random-weight language models omar uses
// for tests and benchmarks, and the tokenizers that go with them. LoRA
// adapter files are written and read by package gguf (gguf.WriteLoRA), the
// same writer the trainer exports its adapters with.
//
// Generate/WriteFile produce a GGUF that llama.cpp loads like any real
// model: architecture llama, qwen2 or qwen3 with the standard tensor names
// and hyper-parameter keys, seeded random F32 weights, and a byte-level BPE
// tokenizer ("gpt2" model, "gpt-2" pre-tokenizer) whose merges are learned
// deterministically from a built-in corpus, with the ChatML special tokens
// and chat template. The same seed gives the same bytes.
//
//	err := model.WriteFile("tiny.gguf", model.Options{Arch: "llama", Preset: "tiny", Seed: 1})
//
// Stand-ins of real models: Options.Shape names a released model's exact
// shape (Shapes, with the numbers of its config.json) and
// Options.Tokenizer a Hugging Face tokenizer converted as llama.cpp's
// converter does (ReadHFTokenizer), so that the file differs from the
// real model only in its weights. Options.Type may also be Q8_0, encoded
// here block by block as ggml does.
//
// Tokenizer is a pure-Go tokenizer for the vocabularies written
// here (tests, scripted backends); at run time llama.cpp's own tokenizer is
// used. Inspect summarises any GGUF model, including real ones.
package model
