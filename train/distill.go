package train

import (
	"fmt"

	"github.com/omar-selfplay/omar/llamacpp"
)

// TopK are a teacher's k most likely tokens at one position and their
// log-probabilities under the teacher.
type TopK struct {
	Tokens   []int32
	Logprobs []float32
}

// TopKReverseKL is on-policy distillation's loss: per trained token, the
// reverse KL Σ_j p(j)·(log p(j) − log q(j)) from the policy p to a teacher
// q over the teacher's top-k tokens j at that position (the positions'
// teacher lists are Teacher[sequence][position], filled where the
// sequence's Mask is true; sequence indices are those of the slice given
// to the step). It is written against the Loss interface alone: the data
// lives in the loss and reaches the graph through Term.Set.
type TopKReverseKL struct {
	K       int
	Teacher [][]TopK
}

// TermReverseKL names TopKReverseKL's term in Stats.
const TermReverseKL = "reverse_kl"

// Name implements Loss.
func (TopKReverseKL) Name() string { return TermReverseKL }

// Needs implements Loss.
func (TopKReverseKL) Needs() Needs { return Needs{} }

// Check implements Loss: every trained position has K teacher tokens.
func (l TopKReverseKL) Check(i int, s Sequence) error {
	if i >= len(l.Teacher) || len(l.Teacher[i]) != len(s.Tokens) {
		return fmt.Errorf("train: sequence %d: no teacher data", i)
	}
	for pos, on := range s.Mask {
		if on && pos > 0 && (len(l.Teacher[i][pos].Tokens) != l.K || len(l.Teacher[i][pos].Logprobs) != l.K) {
			return fmt.Errorf("train: sequence %d position %d: %d teacher tokens, want %d", i, pos, len(l.Teacher[i][pos].Tokens), l.K)
		}
	}
	return nil
}

// Build implements Loss. The policy's logprobs of the teacher's tokens are
// gathered from the selected rows' logits: an I32 index row·V + token and
// an F32 matrix of the teacher's logprobs.
func (l TopKReverseKL) Build(ctx llamacpp.Context, f *Forward) (Term, error) {
	if l.K < 1 {
		return Term{}, fmt.Errorf("train: reverse KL over %d tokens", l.K)
	}
	V := f.Logits.Ne[0]
	k, K := int64(l.K), int64(f.K)
	at := f.NewInput("topk_at", llamacpp.TypeI32, k*K)
	q := f.NewInput("topk_teacher", llamacpp.TypeF32, k, K)
	x := ctx.Reshape(ctx.GetRows(ctx.Reshape(f.Logits, 1, V*K), at), k, K)
	logp := ctx.Add(x, ctx.Scale(f.LogSumExp, -1)) // [k, K], lse broadcast over k
	kl := ctx.SumRows(ctx.Mul(ctx.Exp(logp), ctx.Sub(logp, q)))
	return Term{
		Value: f.WeightedSum(kl),
		Coef:  1,
		Set: func(r Rows) {
			idx := make([]int32, k*K)
			tq := make([]float32, k*K)
			for row := range r.K {
				for j := range l.K {
					idx[row*l.K+j] = int32(row) * int32(V) // padding: token 0, teacher 0
				}
			}
			for row := range r.Seq {
				top := l.Teacher[r.Seq[row]][r.Pos[row]]
				for j := range l.K {
					idx[row*l.K+j] += top.Tokens[j]
					tq[row*l.K+j] = top.Logprobs[j]
				}
			}
			llamacpp.SetI32(at, idx)
			llamacpp.SetF32(q, tq)
		},
	}, nil
}
