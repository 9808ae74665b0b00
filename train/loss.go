package train

import (
	"errors"
	"fmt"

	"github.com/omar-selfplay/omar/llamacpp"
)

// Loss is one term of a training objective. PPO's clipped surrogate, the
// value loss, the KL penalty, the entropy bonus and supervised cross-entropy
// are Losses (losses.go); a new one is written against this interface alone
// and trained with StepWith.
//
// A loss is built once per graph shape (the graphs are cached), so Build
// must depend on the loss's configuration only; the data of a step reaches
// it through Term.Set, either from Sequence fields or from data the loss
// holds, indexed by Rows.Seq (positions in the slice given to the step).
type Loss interface {
	// Name identifies the term in Stats and in errors.
	Name() string
	// Needs tells what the loss reads beyond the forward pass, so that the
	// trainer can provide it before the first pass.
	Needs() Needs
	// Check reports why sequence i cannot feed the loss (a per-token field
	// it reads is missing or of the wrong length). It runs for every
	// sequence before any pass.
	Check(i int, s Sequence) error
	// Build declares the loss's inputs in ctx and returns its term, built
	// from the shared quantities of the pass in f.
	Build(ctx llamacpp.Context, f *Forward) (Term, error)
}

// Needs lists what a Loss reads besides the forward pass.
type Needs struct {
	// Reference: Sequence.RefLogprobs. The trainer fills them, with a
	// no-grad pass with the adapter off, for the sequences that lack them.
	Reference bool
}

// Term is a built loss: scalar tensors of one pass's graph and the function
// that fills the loss's inputs.
type Term struct {
	// Value is the loss's scalar for the pass: the sum over rows of the
	// per-row loss times Forward.Weight, so that the passes of a minibatch
	// add up to its mean. It is reported in Stats under the loss's name.
	Value llamacpp.Tensor
	// Coef weighs Value in the objective a step minimises (negative for a
	// bonus); 0 computes and reports the term without training on it.
	Coef float32
	// Metrics are further scalars reported after the term (PPO's clip
	// fraction), summed over passes like Value.
	Metrics []Metric
	// ApproxKL, when set, is the pass's share of the minibatch's
	// approximate KL(π_old‖π) to the behaviour policy: Options.TargetKL
	// compares the minibatch's sum with 1.5·TargetKL before each update. At
	// most one term of an objective sets it.
	ApproxKL llamacpp.Tensor
	// Set fills the inputs Build declared, for the rows of one pass (nil
	// when the loss has none of its own). Every declared input must be
	// used by Value, a metric or ApproxKL: an input outside the graph gets
	// no memory.
	Set func(r Rows)
}

// Metric is a named scalar of a pass.
type Metric struct {
	Name  string
	Value llamacpp.Tensor
}

// TermStat is one reported scalar of a step: a loss's term (named after
// the loss) or one of its metrics.
type TermStat struct {
	Name  string
	Value float64
}

// Names of the terms and metrics of the built-in losses in Stats.Terms.
const (
	TermPolicy       = "policy"        // PPOClip
	TermClipFrac     = "clip_frac"     // PPOClip's metric: share of clipped tokens
	TermValue        = "value"         // ValueLoss
	TermKL           = "kl"            // KLToBase
	TermEntropy      = "entropy"       // EntropyBonus
	TermCrossEntropy = "cross_entropy" // CrossEntropy
)

// Forward holds the quantities of one pass that losses build on. The pass
// runs the model over a batch of padded sequences and applies the output
// layer only to the K selected rows: the rows whose next token is trained
// (Sequence.Mask), then padding up to K. Per-row tensors are [1, K].
type Forward struct {
	// K is the number of selected rows; Rows.Seq tells how many are real.
	K int
	// Logprob is log π(target) of each row; LogSumExp the log-normaliser
	// of its logits.
	Logprob, LogSumExp llamacpp.Tensor
	// Logits [V, K] and Hidden [E, K] (the final normalised hidden state)
	// of the selected rows.
	Logits, Hidden llamacpp.Tensor

	ctx                 llamacpp.Context
	t                   *Trainer
	weight, mask, value llamacpp.Tensor // nil until a loss uses them
	// inputs are every input declared: run checks that each got memory.
	inputs []llamacpp.Tensor
}

// Weight is the row's share of the minibatch mean, [1, K]: 1/n for every
// trained row (n = trained tokens of the minibatch), or 1/(n_s·S) with
// LossAggregation "sequence"; 0 on padding. The trainer fills it.
func (f *Forward) Weight() llamacpp.Tensor {
	if f.weight == nil {
		f.weight = f.Input("w")
	}
	return f.weight
}

// Mask is 1 on real rows and 0 on padding, [1, K]. Multiplying an exponent
// by it keeps padding rows at e⁰ = 1, so that no overflow there turns into
// 0·∞ = NaN. The trainer fills it.
func (f *Forward) Mask() llamacpp.Tensor {
	if f.mask == nil {
		f.mask = f.Input("m")
	}
	return f.mask
}

// Value is the value head on the selected rows, [1, K], built once per
// pass. A step whose objective uses it trains the value head; otherwise it
// updates the adapter alone (AdamW would still move the head through its
// moments).
func (f *Forward) Value() llamacpp.Tensor {
	if f.value == nil {
		f.value = f.t.value(f.ctx, f.Hidden)
	}
	return f.value
}

// Input declares a per-row F32 input [1, K] named name; the loss fills it in
// Term.Set, typically with Rows.Values.
func (f *Forward) Input(name string) llamacpp.Tensor {
	return f.NewInput(name, llamacpp.TypeF32, 1, int64(f.K))
}

// NewInput declares an input of any type and shape (token ids of a
// teacher's top-k, say), filled in Term.Set with llamacpp.SetF32 or SetI32.
func (f *Forward) NewInput(name string, typ llamacpp.Type, ne ...int64) llamacpp.Tensor {
	x := f.ctx.NewTensor(typ, ne...)
	llamacpp.SetInput(llamacpp.SetName(x, name))
	f.inputs = append(f.inputs, x)
	return x
}

// WeightedSum is Σ_rows Weight·x: the pass's share of the minibatch mean of
// the per-row quantity x [1, K].
func (f *Forward) WeightedSum(x llamacpp.Tensor) llamacpp.Tensor {
	return f.ctx.Sum(f.ctx.Mul(f.Weight(), x))
}

// Rows are the selected rows of one pass: row k < len(Seq) predicts token
// Pos[k] of Seqs[Seq[k]]; rows len(Seq)…K−1 are padding, with input value 0.
type Rows struct {
	Seqs []Sequence // the sequences given to the step
	Seq  []int      // per real row: index into Seqs
	Pos  []int      // per real row: the position of the token it predicts (≥ 1)
	K    int        // rows of the graph
}

// Values returns a K-entry input with at(seq, pos) on the real rows and 0 on
// the padding.
func (r Rows) Values(at func(seq, pos int) float32) []float32 {
	out := make([]float32, r.K)
	for k := range r.Seq {
		out[k] = at(r.Seq[k], r.Pos[k])
	}
	return out
}

// Objective is the weighted sum of losses a step minimises. Graphs are
// cached per objective and shape: make an objective once and reuse it.
type Objective struct {
	losses []Loss
	needs  Needs
}

// NewObjective combines losses (their terms are added in this order). Names
// must be unique; a loss's Needs are merged.
func NewObjective(losses ...Loss) (*Objective, error) {
	if len(losses) == 0 {
		return nil, errors.New("train: objective without losses")
	}
	o := &Objective{losses: losses}
	seen := map[string]bool{}
	for _, l := range losses {
		if l == nil {
			return nil, errors.New("train: nil loss in objective")
		}
		if seen[l.Name()] {
			return nil, fmt.Errorf("train: loss %q listed twice", l.Name())
		}
		seen[l.Name()] = true
		if l.Needs().Reference {
			o.needs.Reference = true
		}
	}
	return o, nil
}

// Losses returns the objective's losses in order.
func (o *Objective) Losses() []Loss { return append([]Loss(nil), o.losses...) }

// builtTerm is one loss's part of a built training graph.
type builtTerm struct {
	name string
	term Term
}

// buildObjective adds the objective's terms to a training graph over the
// forward quantities f, expanding each reported scalar in order (approx KL,
// value, metrics: the order of the graph's nodes, which fixes the order in
// which the backward pass sums gradients), and returns the terms and the
// total loss Σ Coef·Value. Terms with Coef 0 are reported only.
func (t *Trainer) buildObjective(ctx llamacpp.Context, g llamacpp.Graph, obj *Objective, f *Forward) ([]builtTerm, llamacpp.Tensor, error) {
	var terms []builtTerm
	var loss llamacpp.Tensor
	var approxOwner string
	output := func(name string, x llamacpp.Tensor) {
		llamacpp.SetOutput(llamacpp.SetName(x, name))
		g.BuildForward(x)
	}
	for _, l := range obj.losses {
		term, err := l.Build(ctx, f)
		if err != nil {
			return nil, nil, fmt.Errorf("train: loss %s: %w", l.Name(), err)
		}
		if term.Value == nil {
			return nil, nil, fmt.Errorf("train: loss %s built no value", l.Name())
		}
		if term.ApproxKL != nil {
			if approxOwner != "" {
				return nil, nil, fmt.Errorf("train: losses %s and %s both measure the approximate KL", approxOwner, l.Name())
			}
			approxOwner = l.Name()
			output("approx_kl", term.ApproxKL)
		}
		output(l.Name(), term.Value)
		for _, m := range term.Metrics {
			output(m.Name, m.Value)
		}
		terms = append(terms, builtTerm{name: l.Name(), term: term})
		switch c := term.Coef; {
		case c == 0:
		case loss == nil:
			loss = term.Value
			if c != 1 {
				loss = ctx.Scale(term.Value, c)
			}
		case c > 0:
			loss = ctx.Add(loss, scaled(ctx, term.Value, c))
		default:
			loss = ctx.Sub(loss, scaled(ctx, term.Value, -c))
		}
	}
	if loss == nil {
		return nil, nil, errors.New("train: objective has no term with a non-zero coefficient")
	}
	return terms, loss, nil
}

// scaled is c·x, without a node when c is 1.
func scaled(ctx llamacpp.Context, x llamacpp.Tensor, c float32) llamacpp.Tensor {
	if c == 1 {
		return x
	}
	return ctx.Scale(x, c)
}
