package train

import (
	"fmt"

	"github.com/omar-selfplay/omar/llamacpp"
)

// The built-in losses. Per trained row (w = Forward.Weight, m = Forward.Mask):
//
//	r      = exp((lp − old)·m)
//	clip   = step(r − (1+ε))·[A>0] + step((1−ε) − r)·[A<0]
//	L_pg   = −Σ w·((1−clip)·r·A + clip·c·A)         c = 1 ± ε, a constant
//	L_v    = ½Σ w·((1−vclip)·(v−R)² + vclip·(v_c−R)²)
//	L_kl   = Σ w·(exp(δ) − δ − 1),  δ = (ref − lp)·m  (k3 estimator)
//	H      = Σ w·(lse − Σ_v softmax·logits)
//	L_ce   = −Σ w·lp
//
// step() has zero gradient, so where PPO's min() picks the clipped branch the
// gradient is exactly zero, and elsewhere it is the gradient of −r·A: the
// exact gradient of the clipped objective (ggml's clamp has no backward).
// Values are clipped the same way, v_c = old_v + ε_v·sgn(v − old_v) (sgn:
// zero gradient), used only where |v − old_v| > ε_v and (v_c−R)² > (v−R)².

// PPOLosses are the terms of Step's objective as the options configure
// them: L_pg + c_v·L_v + β·L_kl − c_H·H.
func (o Options) PPOLosses() []Loss {
	return []Loss{
		PPOClip{Eps: o.ClipEps},
		ValueLoss{Clip: o.ValueClip, Coef: o.ValueCoef},
		KLToBase{Coef: o.KLCoef},
		EntropyBonus{Coef: o.EntropyCoef},
	}
}

// checkLen reports a per-token field of sequence i whose length is not n.
func checkLen(i int, name string, v []float32, n int) error {
	if len(v) != n {
		return fmt.Errorf("train: sequence %d: %s has %d entries, want %d", i, name, len(v), n)
	}
	return nil
}

// PPOClip is PPO's clipped surrogate with ratio clip Eps, on
// Sequence.OldLogprobs (behaviour policy) and Advantages. It also measures
// the share of clipped tokens (metric TermClipFrac) and the approximate KL
// to the behaviour policy, (r − 1) − log r, that Options.TargetKL checks.
type PPOClip struct{ Eps float32 }

func (PPOClip) Name() string { return TermPolicy }
func (PPOClip) Needs() Needs { return Needs{} }
func (PPOClip) Check(i int, s Sequence) error {
	if err := checkLen(i, "old logprobs", s.OldLogprobs, len(s.Tokens)); err != nil {
		return err
	}
	return checkLen(i, "advantages", s.Advantages, len(s.Tokens))
}

func (l PPOClip) Build(ctx llamacpp.Context, f *Forward) (Term, error) {
	if !(l.Eps > 0 && l.Eps < 1) {
		return Term{}, fmt.Errorf("clip eps %g outside (0, 1)", l.Eps)
	}
	old := f.Input("old_lp")
	adv := f.Input("adv")
	posA := f.Input("pos_a")       // 1 where A > 0
	negA := f.Input("neg_a")       // 1 where A < 0
	clipAdv := f.Input("clip_adv") // (1 ± ε)·A
	logr := ctx.Mul(ctx.Sub(f.Logprob, old), f.Mask())
	r := ctx.Exp(logr)
	approxKL := f.WeightedSum(ctx.Sub(ctx.ScaleBias(r, 1, -1), logr))
	hi := ctx.Mul(ctx.Step(ctx.ScaleBias(r, 1, -(1+l.Eps))), posA)
	lo := ctx.Mul(ctx.Step(ctx.ScaleBias(r, -1, 1-l.Eps)), negA)
	clipped := ctx.Add(hi, lo)
	keep := ctx.ScaleBias(clipped, -1, 1)
	pg := ctx.Neg(f.WeightedSum(ctx.Add(ctx.Mul(keep, ctx.Mul(r, adv)), ctx.Mul(clipped, clipAdv))))
	eps := l.Eps
	return Term{
		Value:    pg,
		Coef:     1,
		Metrics:  []Metric{{TermClipFrac, f.WeightedSum(clipped)}},
		ApproxKL: approxKL,
		Set: func(r Rows) {
			n := r.K
			oldV, advV, pos, neg, cA := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
			for k := range r.Seq {
				s, i := &r.Seqs[r.Seq[k]], r.Pos[k]
				a := s.Advantages[i]
				oldV[k], advV[k] = s.OldLogprobs[i], a
				switch {
				case a > 0:
					pos[k], cA[k] = 1, (1+eps)*a
				case a < 0:
					neg[k], cA[k] = 1, (1-eps)*a
				}
			}
			llamacpp.SetF32(old, oldV)
			llamacpp.SetF32(adv, advV)
			llamacpp.SetF32(posA, pos)
			llamacpp.SetF32(negA, neg)
			llamacpp.SetF32(clipAdv, cA)
		},
	}, nil
}

// ValueLoss is the squared error of the value head against
// Sequence.Returns, clipped around OldValues by Clip (0: unclipped, and
// OldValues are not read), weighted by Coef.
type ValueLoss struct{ Clip, Coef float32 }

func (ValueLoss) Name() string { return TermValue }
func (ValueLoss) Needs() Needs { return Needs{} }
func (l ValueLoss) Check(i int, s Sequence) error {
	if err := checkLen(i, "returns", s.Returns, len(s.Tokens)); err != nil {
		return err
	}
	if l.Clip > 0 {
		return checkLen(i, "old values", s.OldValues, len(s.Tokens))
	}
	return nil
}

func (l ValueLoss) Build(ctx llamacpp.Context, f *Forward) (Term, error) {
	if l.Clip < 0 {
		return Term{}, fmt.Errorf("value clip %g < 0", l.Clip)
	}
	ret := f.Input("ret")
	v := f.Value()
	sq := ctx.Sqr(ctx.Sub(v, ret))
	vterm := sq
	var oldV llamacpp.Tensor
	if l.Clip > 0 {
		oldV = f.Input("old_v")
		d := ctx.Sub(v, oldV)
		vc := ctx.Add(oldV, ctx.Scale(ctx.Sgn(d), l.Clip))
		sqc := ctx.Sqr(ctx.Sub(vc, ret))
		over := ctx.Step(ctx.ScaleBias(ctx.Sqr(d), 1, -l.Clip*l.Clip))
		worse := ctx.Step(ctx.Sub(sqc, sq))
		vclip := ctx.Mul(over, worse)
		vterm = ctx.Add(ctx.Mul(ctx.ScaleBias(vclip, -1, 1), sq), ctx.Mul(vclip, sqc))
	}
	return Term{
		Value: ctx.Scale(f.WeightedSum(vterm), 0.5),
		Coef:  l.Coef,
		Set: func(r Rows) {
			llamacpp.SetF32(ret, r.Values(func(s, i int) float32 { return r.Seqs[s].Returns[i] }))
			if oldV != nil {
				llamacpp.SetF32(oldV, r.Values(func(s, i int) float32 { return r.Seqs[s].OldValues[i] }))
			}
		},
	}, nil
}

// KLToBase is the k3 estimate of KL(π‖π_base) on Sequence.RefLogprobs (the
// base model's logprobs, adapter off), weighted by Coef.
type KLToBase struct{ Coef float32 }

func (KLToBase) Name() string              { return TermKL }
func (KLToBase) Needs() Needs              { return Needs{Reference: true} }
func (KLToBase) Check(int, Sequence) error { return nil } // the trainer checks and fills RefLogprobs

func (l KLToBase) Build(ctx llamacpp.Context, f *Forward) (Term, error) {
	ref := f.Input("ref_lp")
	delta := ctx.Mul(ctx.Sub(ref, f.Logprob), f.Mask())
	k3 := ctx.ScaleBias(ctx.Sub(ctx.Exp(delta), delta), 1, -1)
	return Term{
		Value: f.WeightedSum(k3),
		Coef:  l.Coef,
		Set: func(r Rows) {
			llamacpp.SetF32(ref, r.Values(func(s, i int) float32 { return r.Seqs[s].RefLogprobs[i] }))
		},
	}, nil
}

// EntropyBonus is the policy's entropy on the trained tokens, subtracted
// from the objective with weight Coef.
type EntropyBonus struct{ Coef float32 }

func (EntropyBonus) Name() string              { return TermEntropy }
func (EntropyBonus) Needs() Needs              { return Needs{} }
func (EntropyBonus) Check(int, Sequence) error { return nil }

func (l EntropyBonus) Build(ctx llamacpp.Context, f *Forward) (Term, error) {
	ent := ctx.Sub(f.LogSumExp, ctx.SumRows(ctx.Mul(ctx.SoftMax(f.Logits), f.Logits)))
	return Term{Value: f.WeightedSum(ent), Coef: -l.Coef}, nil
}

// CrossEntropy is the mean negative log-likelihood of the trained tokens:
// supervised fine-tuning.
type CrossEntropy struct{}

func (CrossEntropy) Name() string              { return TermCrossEntropy }
func (CrossEntropy) Needs() Needs              { return Needs{} }
func (CrossEntropy) Check(int, Sequence) error { return nil }

func (CrossEntropy) Build(ctx llamacpp.Context, f *Forward) (Term, error) {
	return Term{Value: ctx.Neg(f.WeightedSum(f.Logprob)), Coef: 1}, nil
}
