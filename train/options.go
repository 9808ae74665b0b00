// Package train is omar's in-process trainer: PPO (and supervised warm-up)
// on a ggml graph that it builds from Go for the llama, qwen2 and qwen3
// architectures. The base model's weights are read from the GGUF file and,
// by default, frozen: only LoRA adapters (A, B per adapted matrix) and a value
// head on the final hidden state are trained, with ggml's automatic
// differentiation and AdamW. The adapter is exported as a llama.cpp LoRA GGUF
// so the inference backend can hot-swap it. With Options.Full every weight of
// the model is trained on the same graph (training from scratch), and
// SaveModel writes the model llama.cpp loads. Learning rates follow an
// optional warm-up and decay schedule (Options.LRSchedule). Every loss term (PPO's clipped surrogate, value,
// KL, entropy, cross-entropy, and any new one) is a Loss combined into an
// Objective (loss.go, losses.go).
//
// Conventions (see docs/training.md): per-token arrays are indexed like
// Sequence.Tokens. Entry i of a logprob is log π(Tokens[i] | Tokens[:i]); entry i
// of a value is V(Tokens[:i]), computed from the hidden state at position i-1.
// Entry 0 has no prediction and is always 0.
package train

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"

	"github.com/omar-selfplay/omar/internal/cpuuse"
)

// Bounds of the integer options: each feeds loop counts or tensor sizes,
// and a typo (epochs: 1e9) would otherwise run for ever or overflow an
// allocation size. docs/security.md lists them.
const (
	MaxEpochs      = 100     // PPO reuses a batch a few times; 100 is far past useful
	MaxMiniBatch   = 1 << 20 // sequences per minibatch
	MaxBatchTokens = 1 << 22 // padded tokens of one forward/backward pass
	MaxLoRARank    = 4096    // beyond any model's hidden size we train
)

// Options configures a Trainer.
type Options struct {
	// LoRA rank and alpha: the adapter adds (alpha/rank)·B·A·x to W·x.
	LoRARank  int     `yaml:"lora_rank"`
	LoRAAlpha float32 `yaml:"lora_alpha"`
	// LoRAModules names the adapted matrices of every layer: attn_q, attn_k,
	// attn_v, attn_output, ffn_gate, ffn_up, ffn_down.
	LoRAModules []string `yaml:"lora_modules"`
	// LR is AdamW's learning rate for the adapter, ValueLR for the value head.
	LR      float32 `yaml:"lr"`
	ValueLR float32 `yaml:"value_lr"`
	// WeightDecay is AdamW's decoupled weight decay (both groups).
	WeightDecay float32 `yaml:"weight_decay"`
	// ClipEps is PPO's ratio clip ε; ValueClip clips the value change around
	// OldValues (0 = unclipped value loss).
	ClipEps   float32 `yaml:"clip_eps"`
	ValueClip float32 `yaml:"value_clip"`
	// ValueCoef weighs the value loss against the policy loss (the adapter
	// receives gradient from both, the value head only from the value loss).
	ValueCoef float32 `yaml:"value_coef"`
	// LossAggregation is how per-token losses make a minibatch loss:
	// "token" (mean over all trained tokens: long sequences weigh more; ""
	// means the same) or "sequence" (mean over sequences of each sequence's
	// token mean).
	LossAggregation string `yaml:"loss_aggregation"`
	// KLCoef weighs the k3 estimate of KL(π‖π_base); EntropyCoef the entropy
	// bonus (subtracted from the loss).
	KLCoef      float32 `yaml:"kl_coef"`
	EntropyCoef float32 `yaml:"entropy_coef"`
	// EntropyDecaySteps anneals the entropy bonus: each Step trains with
	// EntropyCoef·max(0, 1 − s/EntropyDecaySteps), s the optimizer steps
	// taken before it, so that a run explores first and converges after
	// (0: a constant bonus). docs/learning.md#exploration.
	EntropyDecaySteps int `yaml:"entropy_decay_steps"`
	// LogprobsOver is the distribution whose log-probabilities every
	// loss and score uses at a trained token: "vocabulary" ("" means the
	// same) the model's softmax over the whole vocabulary; "grammar" the
	// softmax renormalised over Sequence.Allowed where a position has
	// one — the distribution the sampler drew from under a reply's
	// grammar, so that PPO's ratio, the KL and the entropy are those of
	// the sampled policy (docs/learning.md#grammar-logprobs). It adds a
	// vocabulary-sized mask to each pass's logits.
	LogprobsOver string `yaml:"logprobs_over"`
	// TargetKL stops a Step early (before the update) when a minibatch's
	// approximate KL between the behaviour policy (OldLogprobs) and the
	// current one exceeds 1.5·TargetKL (0 = never).
	TargetKL float32 `yaml:"target_kl"`
	// MaxGradNorm clips the global gradient norm of each optimizer step
	// (0 = no clipping).
	MaxGradNorm float32 `yaml:"max_grad_norm"`
	// LRSchedule shapes LR and ValueLR by optimizer step (see
	// Options.LRFactor): "constant" ("" means the same), "cosine" or
	// "linear" decay to MinLRRatio·LR at TotalSteps, after WarmupSteps of
	// linear warm-up from LR/WarmupSteps (any schedule may warm up).
	LRSchedule  string  `yaml:"lr_schedule"`
	WarmupSteps int     `yaml:"warmup_steps"`
	TotalSteps  int     `yaml:"total_steps"`
	MinLRRatio  float32 `yaml:"min_lr_ratio"`
	// Full trains every base weight (embeddings, attention, FFN, norms,
	// biases, output) in F32 instead of a LoRA adapter (the LoRA fields
	// are then ignored): AdamW with LR on all of them, WeightDecay on the
	// matrices and embeddings only, none on norms and biases. The value
	// head is trained as in LoRA mode, when an objective uses it. There
	// is no frozen reference model, so losses that need one (KLToBase)
	// and Evaluate's RefLogprobs are refused. SaveModel writes the result.
	Full bool `yaml:"full"`
	// OutProdBackward keeps ggml's own input gradient of the frozen
	// matrices, out_prod(W, dyᵀ), instead of mul_mat(Wᵀ, dy) with a
	// transposed copy of each made at load (LoRA mode on the CPU; full
	// mode and CUDA always use out_prod). The copies double the frozen
	// weights' memory; the forward kernels run the product several times
	// faster on the CPU.
	OutProdBackward bool `yaml:"out_prod_backward"`
	// BackwardType is the type of those transposed copies: BackwardAuto
	// (the default, "" too) makes Q8_0 copies of the matrices the file
	// stores quantized and F32 copies of F32, F16 and BF16 ones;
	// BackwardF32 makes every copy F32, the exact transpose (4 bytes a
	// parameter); BackwardQ8_0 makes every copy Q8_0 (about 1.06 bytes a
	// parameter). A matrix whose columns do not fill Q8_0 blocks of 32
	// gets an F32 copy whatever is set.
	BackwardType string `yaml:"backward_type"`
	// DequantizeBase holds the frozen matrices and embeddings in F32 even
	// where the model file stores them quantized or in half precision
	// (LoRA mode on the CPU; full mode and CUDA always hold F32). By
	// default they keep the file's type: the forward pass then runs the
	// kernels llama.cpp samples with, so the trainer's logprobs are the
	// sampler's to rounding on short sequences and ten or more times
	// closer to them than dequantized on long ones, in a fraction of the
	// memory (a quarter or less for 8-bit and smaller types). F16 and BF16 keep their type only
	// with the transposed copies (OutProdBackward off): ggml's CPU
	// out_prod has no kernel for them.
	DequantizeBase bool `yaml:"dequantize_base"`
	// Epochs over the data of one Step call; MiniBatch sequences per
	// optimizer step.
	Epochs    int `yaml:"epochs"`
	MiniBatch int `yaml:"minibatch"`
	// BatchTokens bounds the padded tokens of one forward/backward pass;
	// a minibatch is split into passes of sequences of similar length whose
	// gradients are accumulated.
	BatchTokens int `yaml:"batch_tokens"`
	// ActivationMB bounds, in MiB, the activations a training pass keeps
	// for its backward (and the logits of any pass): a pass predicted to
	// need more runs one layer at a time, keeping only each layer's input
	// and recomputing the layer in the backward (its attention one group
	// of query rows at a time, each group's scores within the budget),
	// with the output layer over a chunk of rows at a time (segment.go).
	// 0 means the default, 1,024 MiB.
	ActivationMB int `yaml:"activation_mb"`
	// Threads for the CPU backend (explicit: ggml's default busy-waits).
	Threads int `yaml:"threads"`
	// Device is "cpu" or "cuda" (the first GPU of the ggml backend registry;
	// ops the GPU cannot run fall back to the CPU through the scheduler).
	Device string `yaml:"device"`
	// Seed for the LoRA initialisation and the minibatch shuffling.
	Seed uint64 `yaml:"seed"`
	// LibDir is the llama.cpp library directory New loads when the
	// libraries are not loaded yet ("" finds lib/llama/cpu, see
	// llamacpp.DefaultLibDir). Not part of a config: where the libraries
	// are is a property of the machine.
	LibDir string `yaml:"-"`
}

// Values of Options.LogprobsOver.
const (
	LogprobsOverVocabulary = "vocabulary"
	LogprobsOverGrammar    = "grammar"
)

// Values of Options.BackwardType.
const (
	BackwardAuto = "auto"
	BackwardF32  = "f32"
	BackwardQ8_0 = "q8_0"
)

// EntropyCoefAt is the entropy bonus's weight after step optimizer steps
// (EntropyDecaySteps).
func (o Options) EntropyCoefAt(step int) float32 {
	if o.EntropyDecaySteps <= 0 {
		return o.EntropyCoef
	}
	return o.EntropyCoef * float32(max(0, 1-float64(step)/float64(o.EntropyDecaySteps)))
}

// OverGrammar reports whether logprobs are renormalised over the recorded
// grammar sets (Options.LogprobsOver).
func (o Options) OverGrammar() bool { return o.LogprobsOver == LogprobsOverGrammar }

// AllModules are the matrices that can carry a LoRA adapter.
var AllModules = []string{"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}

// Defaults returns the default options: rank-8 LoRA on every matrix,
// PPO ε=0.2, lr 1e-4 (policy) / 5e-4 (value head), one CPU thread. ggml's
// CPU workers spin at every op barrier, so more threads than free cores is
// many times slower than one thread; raise Threads only on an idle machine.
func (Options) Defaults() Options {
	return Options{
		LoRARank:        8,
		LoRAAlpha:       16,
		LoRAModules:     slices.Clone(AllModules),
		LR:              1e-4,
		ValueLR:         5e-4,
		ClipEps:         0.2,
		ValueClip:       0.2,
		ValueCoef:       0.5,
		LossAggregation: "token",
		KLCoef:          0.05,
		EntropyCoef:     0,
		MaxGradNorm:     1,
		Epochs:          2,
		MiniBatch:       8,
		BatchTokens:     2048,
		Threads:         1,
		Device:          "cpu",
		Seed:            1,
	}
}

// FullDefaults returns the defaults of a full-parameter trainer (Full):
// one epoch per call, learning rate 1e-3, weight decay 0.1, no KL term (there
// is no frozen reference) and a decay floor of 0.1·LR for a schedule, which
// the caller turns on with LRSchedule "cosine", WarmupSteps and TotalSteps
// (it knows how many steps the run takes).
func (o Options) FullDefaults() Options {
	o = o.Defaults()
	o.Full = true
	o.LR = 1e-3
	o.WeightDecay = 0.1
	o.Epochs = 1
	o.KLCoef = 0
	o.MinLRRatio = 0.1
	return o
}

// Validate reports the first invalid field.
func (o Options) Validate() error {
	if err := o.validateSchedule(); err != nil {
		return err
	}
	switch {
	case o.LR <= 0 || o.ValueLR <= 0:
		return fmt.Errorf("train: learning rates must be > 0 (lr %g, value lr %g)", o.LR, o.ValueLR)
	case o.WeightDecay < 0 || o.WeightDecay >= 1:
		return fmt.Errorf("train: weight decay %g outside [0, 1)", o.WeightDecay)
	case o.ClipEps <= 0 || o.ClipEps >= 1:
		return fmt.Errorf("train: clip eps %g outside (0, 1)", o.ClipEps)
	case o.ValueClip < 0:
		return fmt.Errorf("train: value clip %g < 0", o.ValueClip)
	case o.ValueCoef < 0 || o.KLCoef < 0 || o.EntropyCoef < 0:
		return errors.New("train: loss coefficients must be >= 0")
	case o.EntropyDecaySteps < 0:
		return fmt.Errorf("train: entropy decay steps %d < 0", o.EntropyDecaySteps)
	case o.TargetKL < 0:
		return fmt.Errorf("train: target KL %g < 0", o.TargetKL)
	case o.MaxGradNorm < 0:
		return fmt.Errorf("train: max grad norm %g < 0", o.MaxGradNorm)
	case o.Epochs < 1 || o.Epochs > MaxEpochs:
		return fmt.Errorf("train: epochs %d: want 1..%d", o.Epochs, MaxEpochs)
	case o.MiniBatch < 1 || o.MiniBatch > MaxMiniBatch:
		return fmt.Errorf("train: minibatch %d: want 1..%d", o.MiniBatch, MaxMiniBatch)
	case o.BatchTokens < 16 || o.BatchTokens > MaxBatchTokens:
		return fmt.Errorf("train: batch tokens %d: want 16..%d", o.BatchTokens, MaxBatchTokens)
	case o.ActivationMB < 0 || o.ActivationMB > 1<<30:
		return fmt.Errorf("train: activation mb %d: want 0..%d", o.ActivationMB, 1<<30)
	case o.Threads < 1 || o.Threads > cpuuse.MaxThreads():
		return fmt.Errorf("train: threads %d: want 1..%d (%d per core of this machine's %d)", o.Threads, cpuuse.MaxThreads(), cpuuse.ThreadsPerCore, runtime.NumCPU())
	case o.LossAggregation != "" && o.LossAggregation != "token" && o.LossAggregation != "sequence":
		return fmt.Errorf("train: loss aggregation %q (want token or sequence)", o.LossAggregation)
	case o.Device != "cpu" && o.Device != "cuda":
		return fmt.Errorf("train: device %q (want cpu or cuda)", o.Device)
	case o.BackwardType != "" && o.BackwardType != BackwardAuto && o.BackwardType != BackwardF32 && o.BackwardType != BackwardQ8_0:
		return fmt.Errorf("train: backward_type %q (want %s, %s or %s)", o.BackwardType, BackwardAuto, BackwardF32, BackwardQ8_0)
	case o.LogprobsOver != "" && o.LogprobsOver != LogprobsOverVocabulary && o.LogprobsOver != LogprobsOverGrammar:
		return fmt.Errorf("train: logprobs_over %q (want %s or %s)", o.LogprobsOver, LogprobsOverVocabulary, LogprobsOverGrammar)
	}
	if o.Full {
		if o.KLCoef != 0 {
			return fmt.Errorf("train: kl coef %g: a full-parameter trainer keeps no frozen reference model to measure the KL to (set 0)", o.KLCoef)
		}
		return nil // the LoRA fields are not used
	}
	switch {
	case o.LoRARank < 1 || o.LoRARank > MaxLoRARank:
		return fmt.Errorf("train: lora rank %d: want 1..%d", o.LoRARank, MaxLoRARank)
	case o.LoRAAlpha <= 0:
		return fmt.Errorf("train: lora alpha %g <= 0", o.LoRAAlpha)
	case len(o.LoRAModules) == 0:
		return errors.New("train: no lora modules")
	}
	seen := map[string]bool{}
	for _, m := range o.LoRAModules {
		if !slices.Contains(AllModules, m) {
			return fmt.Errorf("train: unknown lora module %q (want one of %v)", m, AllModules)
		}
		if seen[m] {
			return fmt.Errorf("train: lora module %q listed twice", m)
		}
		seen[m] = true
	}
	return nil
}

// Sequence is one trajectory (a seat's token stream) to score or train on.
// All per-token slices have len(Tokens) entries; each loss reads only the
// fields it needs (Loss.Check says which).
type Sequence struct {
	Tokens []int32
	// Mask is true on tokens the model generated: only they are trained.
	Mask []bool
	// OldLogprobs are the behaviour policy's logprobs (0 where !Mask).
	OldLogprobs []float32
	// Advantages, Returns and OldValues feed the PPO losses (used where Mask).
	Advantages, Returns, OldValues []float32
	// Allowed are, by position, the tokens a grammar allowed where the
	// sampler recorded them (nil elsewhere): with LogprobsOver "grammar"
	// position i's logprob is renormalised over Allowed[i], which must
	// hold Tokens[i].
	Allowed map[int][]int32
	// RefLogprobs are the base model's logprobs (adapter off; 0 where
	// !Mask), for the KL penalty: Evaluate returns them. A Step computes
	// them itself, with a no-grad pass, only for the sequences that lack
	// them (nil); the base model is frozen, so they stay valid for as long
	// as the tokens do.
	RefLogprobs []float32
	// Weights scale each masked token's loss (nil: 1 each); the
	// minibatch's loss is the mean under these weights. Behaviour cloning
	// uses them to train on the prompt tokens too, at a fraction of a
	// reply token's weight (bc.BuildOptions.PromptWeight).
	Weights []float32
}

// Stats summarises one Step: token-weighted means over every minibatch of
// every epoch, and the mean pre-clipping gradient norm per optimizer step.
type Stats struct {
	// Terms are the objective's terms (named after their losses) and their
	// metrics, in the objective's order: TermPolicy, TermClipFrac,
	// TermValue, TermKL (the k3 estimate to the base model), TermEntropy
	// for Step.
	Terms []TermStat
	// ApproxKL is the approximate KL to the behaviour policy, measured
	// before each update (by PPOClip).
	ApproxKL float64
	GradNorm float64
	// EarlyStopped reports that TargetKL ended the Step early.
	EarlyStopped bool
	// Tokens is the number of sequence tokens run through forward+backward
	// (all epochs, padding excluded).
	Tokens int
	// TrainedTokens is the number of masked (trained) tokens among them.
	TrainedTokens int
	// OptimizerSteps taken during the call.
	OptimizerSteps int
	// Updates lists the call's optimizer steps in order: learning rate,
	// gradient norm and loss of each (what a progress bar or a loss curve
	// plots).
	Updates []Update
}

// Update is one optimizer step.
type Update struct {
	// Step is the trainer's optimizer step count after it (1 = the first
	// step the trainer ever took; it continues across a resume).
	Step int
	// LR is the learning rate the step used: LR·LRFactor(Step).
	LR float32
	// GradNorm is the global gradient norm before clipping.
	GradNorm float64
	// Loss is the objective on the minibatch before the step (the
	// coefficient-weighted sum of its terms).
	Loss float64
	// TrainedTokens of the minibatch.
	TrainedTokens int
}

// Term returns the value of the term or metric called name (0 if the
// objective has none).
func (s Stats) Term(name string) float64 {
	for _, t := range s.Terms {
		if t.Name == name {
			return t.Value
		}
	}
	return 0
}

// validate checks what every pass reads: tokens in the vocabulary and the
// context, a mask, and reference logprobs of the right length if any.
func (s Sequence) validate(i, nVocab, nCtx int) error {
	n := len(s.Tokens)
	if n < 2 {
		return fmt.Errorf("train: sequence %d has %d tokens, want at least 2", i, n)
	}
	if n > nCtx {
		return fmt.Errorf("train: sequence %d has %d tokens, more than the model's context %d", i, n, nCtx)
	}
	if len(s.Mask) != n {
		return fmt.Errorf("train: sequence %d: mask has %d entries, want %d", i, len(s.Mask), n)
	}
	for j, t := range s.Tokens {
		if t < 0 || int(t) >= nVocab {
			return fmt.Errorf("train: sequence %d: token %d at %d outside the vocabulary (%d)", i, t, j, nVocab)
		}
	}
	if s.Weights != nil {
		if err := checkLen(i, "weights", s.Weights, n); err != nil {
			return err
		}
		for j, w := range s.Weights {
			if !(w >= 0) || math.IsInf(float64(w), 0) {
				return fmt.Errorf("train: sequence %d: weight %g at %d, want a finite value ≥ 0", i, w, j)
			}
		}
	}
	for j, set := range s.Allowed {
		if j < 1 || j >= n {
			return fmt.Errorf("train: sequence %d: an allowed set at %d, outside positions 1..%d", i, j, n-1)
		}
		found := false
		for _, id := range set {
			if id < 0 || int(id) >= nVocab {
				return fmt.Errorf("train: sequence %d: allowed token %d at %d outside the vocabulary (%d)", i, id, j, nVocab)
			}
			found = found || id == s.Tokens[j]
		}
		if !found {
			// Renormalised over a set without it, the token would have
			// probability 0 and a logprob of −10³⁰.
			return fmt.Errorf("train: sequence %d: token %d at %d is not in its allowed set", i, s.Tokens[j], j)
		}
	}
	if s.RefLogprobs != nil {
		return checkLen(i, "reference logprobs", s.RefLogprobs, n)
	}
	return nil
}
