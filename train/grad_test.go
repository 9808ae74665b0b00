package train

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/omar-selfplay/omar/llamacpp"
)

// readParams copies every parameter (or its gradient) out of the backend.
func readParams(tr *Trainer, grads bool) [][]float32 {
	out := make([][]float32, len(tr.params))
	for i, p := range tr.params {
		out[i] = make([]float32, p.n)
		src := p.t
		if grads {
			src = p.grad
		}
		llamacpp.GetF32(src, out[i])
	}
	return out
}

// setRefLogprobs gives seqs the base model's logprobs (the reference pass).
func setRefLogprobs(t *testing.T, tr *Trainer, seqs []Sequence) {
	t.Helper()
	ref, _, err := tr.score(context.Background(), seqs, kindBase)
	if err != nil {
		t.Fatal(err)
	}
	for i := range seqs {
		seqs[i].RefLogprobs = ref[i]
	}
}

func writeParams(tr *Trainer, vals [][]float32) {
	for i, p := range tr.params {
		llamacpp.SetF32(p.t, vals[i])
	}
}

// TestGradientsMatchFiniteDifferences compares ggml's gradient of each loss
// with central finite differences along the gradient direction of each
// parameter group (LoRA A, LoRA B, value head) and along a random direction.
// The old logprobs and values are placed around the current ones so that
// some tokens are clipped and some are not.
func TestGradientsMatchFiniteDifferences(t *testing.T) {
	tests := []struct {
		name               string
		arch               string
		zeroAdv            bool
		value, kl, entropy float32
		block              int  // Trainer.attnBlock: 16 gives sequences of 33–64 tokens two blocks
		grammar            bool // LogprobsOver "grammar", with allowed sets on half the trained tokens
	}{
		{name: "policy", arch: "llama"},
		{name: "policy_qwen3", arch: "qwen3"},
		{name: "policy_blocks", arch: "llama", block: 16},
		{name: "value", arch: "llama", zeroAdv: true, value: 1},
		{name: "kl_entropy", arch: "qwen2", zeroAdv: true, kl: 1, entropy: 0.5},
		{name: "grammar", arch: "llama", kl: 1, entropy: 0.5, grammar: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions()
			o.ValueCoef, o.KLCoef, o.EntropyCoef = tt.value, tt.kl, tt.entropy
			if tt.grammar {
				o.LogprobsOver = LogprobsOverGrammar
			}
			tr := newTrainer(t, tt.arch, o)
			tr.attnBlock = tt.block
			randomize(tr, 5, 0.05)
			ctx := context.Background()
			seqs := randomSeqs(17, 3, 20, 50, tr.Vocab())
			if tt.grammar {
				addAllowed(seqs, tr.Vocab(), 23)
			}
			values, lps, _, err := columns(tr.Evaluate(ctx, seqs))
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(9, 9))
			for i := range seqs {
				for j, m := range seqs[i].Mask {
					if !m {
						continue
					}
					seqs[i].OldLogprobs[j] = lps[i][j] + float32(r.Float64()*0.6-0.3)
					seqs[i].OldValues[j] = values[i][j] + float32(r.Float64()*0.6-0.3)
					if tt.zeroAdv {
						seqs[i].Advantages[j] = 0
					}
				}
			}
			setRefLogprobs(t, tr, seqs)
			idx := []int{0, 1, 2}
			n := 0
			for _, s := range seqs {
				n += trainedTokens(s)
			}
			loss := func() (float64, Stats) {
				acc, err := tr.accumulate(ctx, tr.ppo, seqs, idx, tr.tokenWeights(seqs, idx))
				if err != nil {
					t.Fatal(err)
				}
				return acc.loss, Stats{Terms: acc.terms, ApproxKL: acc.approxKL}
			}
			tr.gbuf.Clear(0)
			l0, sums := loss()
			grads := readParams(tr, true)
			tr.gbuf.Clear(0)
			theta := readParams(tr, false)
			if tt.name == "policy" && (sums.Term(TermClipFrac) < 0.05 || sums.Term(TermClipFrac) > 0.95) {
				t.Fatalf("clip fraction %g: the test should mix clipped and unclipped tokens", sums.Term(TermClipFrac))
			}

			groups := map[string]func(i int) bool{
				"lora_a": func(i int) bool { return tr.params[i].group == 0 && i%2 == 0 },
				"lora_b": func(i int) bool { return tr.params[i].group == 0 && i%2 == 1 },
				"value":  func(i int) bool { return tr.params[i].group == 1 },
				"random": func(int) bool { return true },
			}
			for _, gname := range []string{"lora_a", "lora_b", "value", "random"} {
				in := groups[gname]
				dir := make([][]float32, len(grads))
				var norm float64
				for i := range grads {
					dir[i] = make([]float32, len(grads[i]))
					if !in(i) {
						continue
					}
					for j := range dir[i] {
						if gname == "random" {
							dir[i][j] = float32(r.NormFloat64())
						} else {
							dir[i][j] = grads[i][j]
						}
						norm += float64(dir[i][j]) * float64(dir[i][j])
					}
				}
				norm = math.Sqrt(norm)
				var analytic, gnorm float64
				for i := range grads {
					for j := range dir[i] {
						if norm > 0 {
							dir[i][j] /= float32(norm)
						}
						analytic += float64(grads[i][j]) * float64(dir[i][j])
						if in(i) {
							gnorm += float64(grads[i][j]) * float64(grads[i][j])
						}
					}
				}
				gnorm = math.Sqrt(gnorm)
				if gname == "value" && tt.value == 0 {
					if gnorm != 0 {
						t.Errorf("value head gradient %g without a value loss, want 0", gnorm)
					}
					continue
				}
				if gnorm == 0 {
					t.Errorf("%s: zero gradient", gname)
					continue
				}
				const h = 1e-3
				eval := func(s float64) float64 {
					p := make([][]float32, len(theta))
					for i := range theta {
						p[i] = make([]float32, len(theta[i]))
						for j := range p[i] {
							p[i][j] = theta[i][j] + float32(s*h)*dir[i][j]
						}
					}
					writeParams(tr, p)
					l, _ := loss()
					tr.gbuf.Clear(0)
					return l
				}
				fd := (eval(1) - eval(-1)) / (2 * h)
				writeParams(tr, theta)
				if d := math.Abs(fd - analytic); d > 2e-3*gnorm+1e-4 {
					t.Errorf("%s: directional derivative: got %g (ggml), want %g (finite differences), |grad| %g, loss %g", gname, analytic, fd, gnorm, l0)
				} else {
					t.Logf("%s: ggml %.6g, finite differences %.6g, |grad| %.4g", gname, analytic, fd, gnorm)
				}
			}
		})
	}
}

// TestLossValues recomputes every reported loss term in Go from Evaluate's
// logprobs and values and compares: the graph computes PPO's clipped
// objectives, the clipped value loss, k3 KL and the clip fraction.
func TestLossValues(t *testing.T) {
	o := testOptions()
	tr := newTrainer(t, "qwen3", o)
	randomize(tr, 8, 0.05)
	ctx := context.Background()
	seqs := randomSeqs(23, 3, 20, 50, tr.Vocab())
	values, lps, refs, err := columns(tr.Evaluate(ctx, seqs))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(4, 4))
	for i := range seqs {
		for j, m := range seqs[i].Mask {
			if m {
				seqs[i].OldLogprobs[j] = lps[i][j] + float32(r.Float64()*0.8-0.4)
				seqs[i].OldValues[j] = values[i][j] + float32(r.Float64()*0.8-0.4)
			}
		}
	}
	for i := range seqs {
		seqs[i].RefLogprobs = refs[i]
	}
	idx := []int{0, 1, 2}
	acc, err := tr.accumulate(ctx, tr.ppo, seqs, idx, tr.tokenWeights(seqs, idx))
	tr.gbuf.Clear(0)
	if err != nil {
		t.Fatal(err)
	}
	sums := Stats{Terms: acc.terms, ApproxKL: acc.approxKL}
	eps, vc := float64(o.ClipEps), float64(o.ValueClip)
	var pg, vl, kl, clip, akl float64
	n := 0
	for i, s := range seqs {
		for j := 1; j < len(s.Tokens); j++ {
			if !s.Mask[j] {
				continue
			}
			n++
			a := float64(s.Advantages[j])
			ratio := math.Exp(float64(lps[i][j] - s.OldLogprobs[j]))
			akl += ratio - 1 - math.Log(ratio)
			clipped := math.Min(math.Max(ratio, 1-eps), 1+eps)
			pg -= math.Min(ratio*a, clipped*a)
			if (a > 0 && ratio > 1+eps) || (a < 0 && ratio < 1-eps) {
				clip++
			}
			v, old, ret := float64(values[i][j]), float64(s.OldValues[j]), float64(s.Returns[j])
			vcl := old + math.Min(math.Max(v-old, -vc), vc)
			vl += 0.5 * math.Max((v-ret)*(v-ret), (vcl-ret)*(vcl-ret))
			d := float64(refs[i][j] - lps[i][j])
			kl += math.Exp(d) - d - 1
		}
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{TermPolicy, sums.Term(TermPolicy), pg / float64(n)},
		{TermValue, sums.Term(TermValue), vl / float64(n)},
		{TermKL, sums.Term(TermKL), kl / float64(n)},
		{TermClipFrac, sums.Term(TermClipFrac), clip / float64(n)},
		{"approx_kl", sums.ApproxKL, akl / float64(n)},
	} {
		if math.Abs(c.got-c.want) > 1e-4*math.Max(1, math.Abs(c.want)) {
			t.Errorf("%s: got %g, want %g", c.name, c.got, c.want)
		}
	}
	if sums.Term(TermClipFrac) == 0 || sums.Term(TermKL) == 0 {
		t.Errorf("clip fraction %g and KL %g should both be non-zero here", sums.Term(TermClipFrac), sums.Term(TermKL))
	}
}

// addAllowed gives every other trained token of seqs an allowed set of 1–6
// tokens holding it.
func addAllowed(seqs []Sequence, vocab int, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 3))
	for i := range seqs {
		s := &seqs[i]
		s.Allowed = map[int][]int32{}
		for j, m := range s.Mask {
			if !m || j == 0 || r.IntN(2) == 0 {
				continue
			}
			set := []int32{s.Tokens[j]}
			for range r.IntN(6) {
				if id := int32(r.IntN(vocab)); !slices.Contains(set, id) {
					set = append(set, id)
				}
			}
			slices.Sort(set)
			s.Allowed[j] = set
		}
	}
}

// TestGrammarLogprobs checks the renormalised logprobs against the
// vocabulary ones: at a position with an allowed set A, log π_A(x) =
// log π(x) − log Σ_{a∈A} π(a), with each π(a) measured by a sequence that
// holds a at that position (the prefix, and so the distribution, is the
// same).
func TestGrammarLogprobs(t *testing.T) {
	o := testOptions()
	vocab := newTrainer(t, "qwen3", o)
	randomize(vocab, 5, 0.05)
	o.LogprobsOver = LogprobsOverGrammar
	gram := newTrainer(t, "qwen3", o)
	randomize(gram, 5, 0.05)
	ctx := context.Background()
	seqs := randomSeqs(31, 2, 24, 40, vocab.Vocab())
	addAllowed(seqs, vocab.Vocab(), 7)
	_, got, _, err := columns(gram.Evaluate(ctx, seqs))
	if err != nil {
		t.Fatal(err)
	}
	_, full, _, err := columns(vocab.Evaluate(ctx, seqs))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for i, s := range seqs {
		for j, m := range s.Mask {
			if !m || j == 0 {
				continue
			}
			set := s.Allowed[j]
			if set == nil {
				if d := math.Abs(float64(got[i][j] - full[i][j])); d > 1e-4 {
					t.Errorf("seq %d pos %d without a set: %g, vocabulary %g", i, j, got[i][j], full[i][j])
				}
				continue
			}
			var alts []Sequence
			for _, a := range set {
				alt := Sequence{Tokens: slices.Clone(s.Tokens[:j+1]), Mask: make([]bool, j+1)}
				alt.Tokens[j], alt.Mask[j] = a, true
				alts = append(alts, alt)
			}
			_, lps, _, err := columns(vocab.Evaluate(ctx, alts))
			if err != nil {
				t.Fatal(err)
			}
			var mass float64
			for k := range alts {
				mass += math.Exp(float64(lps[k][j]))
			}
			want := float64(full[i][j]) - math.Log(mass)
			if d := math.Abs(float64(got[i][j]) - want); d > 1e-4 {
				t.Errorf("seq %d pos %d, set %v: renormalised %g, want %g", i, j, set, got[i][j], want)
			}
			checked++
		}
	}
	if checked < 5 {
		t.Fatalf("only %d positions with a set checked", checked)
	}
}
