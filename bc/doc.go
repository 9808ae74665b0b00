// Package bc builds omar's built-in model by behaviour cloning, and
// clones recorded play into training sequences:
//
//   - a corpus (BuildCorpus): the games' scripted policies play, and the
//     seats to learn are rendered through the model's own seat streams
//     and chat template exactly as self-play renders them (selfplay.Clone),
//     each environment at its own weight;
//   - the built-in model's build (Build, DefaultBuild): a byte-level BPE
//     tokenizer fitted to the corpus's text, a small model with every
//     weight trained from scratch on the corpus, then the DAgger rounds
//     (the model plays, the expert script labels its turns), resumable
//     from a work directory to the same bytes;
//   - SFT: a LoRA adapter's supervised warm-up on trajectories or on
//     episode records (omar sft).
//
// The sequences go through loop.Sequences, the bridge the training run
// uses, so a cloned reply is the same tokens, mask and weights PPO would
// train on. bc sits above loop and loop never imports it. Package
// llamacpp it uses for two things alone: a build that pins a CPU variant
// of ggml's kernels loads the library itself, before the backend and the
// trainer would load the default one, and the DAgger rounds play on an
// F32 KV cache.
package bc
