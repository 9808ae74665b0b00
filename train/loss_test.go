package train

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/llamacpp"
)

// TestCustomLoss plugs the distillation loss (TopKReverseKL, written
// against the Loss interface alone) into StepWith: its value equals
// a plain-Go computation from the reference forward pass, its gradient
// matches finite differences, training lowers it, and (no term uses the
// value head) the value head does not move.
func TestCustomLoss(t *testing.T) {
	o := testOptions()
	o.LR, o.Epochs, o.MiniBatch = 5e-3, 2, 2
	tr := newTrainer(t, "llama", o)
	randomize(tr, 6, 0.05)
	seqs := randomSeqs(51, 3, 20, 45, tr.Vocab())
	r := rand.New(rand.NewPCG(5, 5))
	loss := TopKReverseKL{K: 4}
	for _, s := range seqs {
		top := make([]TopK, len(s.Tokens))
		for i := range s.Tokens {
			perm := r.Perm(tr.Vocab())
			for j := range loss.K {
				top[i].Tokens = append(top[i].Tokens, int32(perm[j]))
				top[i].Logprobs = append(top[i].Logprobs, float32(-1-2*r.Float64()))
			}
		}
		loss.Teacher = append(loss.Teacher, top)
	}
	obj, err := NewObjective(loss)
	if err != nil {
		t.Fatal(err)
	}

	// Value: Σ over trained tokens / n, from the plain-Go logits.
	ref := loadRef(t, tinyModel(t, "llama"), tr)
	var want float64
	n := 0
	for si, s := range seqs {
		logits, _ := ref.forward(s.Tokens)
		for i := 1; i < len(s.Tokens); i++ {
			if !s.Mask[i] {
				continue
			}
			n++
			row := logits[i-1]
			mx := math.Inf(-1)
			for _, v := range row {
				mx = math.Max(mx, float64(v))
			}
			var z float64
			for _, v := range row {
				z += math.Exp(float64(v) - mx)
			}
			for j := range loss.K {
				top := loss.Teacher[si][i]
				lp := float64(row[top.Tokens[j]]) - mx - math.Log(z)
				want += math.Exp(lp) * (lp - float64(top.Logprobs[j]))
			}
		}
	}
	want /= float64(n)
	ctx := context.Background()
	idx := []int{0, 1, 2}
	evalLoss := func() float64 {
		acc, err := tr.accumulate(ctx, obj, seqs, idx, tr.tokenWeights(seqs, idx))
		if err != nil {
			t.Fatal(err)
		}
		if len(acc.terms) != 1 || acc.terms[0].Name != "reverse_kl" || acc.terms[0].Value != acc.loss {
			t.Fatalf("terms: got %+v (loss %g), want one reverse_kl term equal to the loss", acc.terms, acc.loss)
		}
		if acc.usesValue {
			t.Fatal("the reverse KL does not read the value head, but the pass says it does")
		}
		return acc.loss
	}
	tr.gbuf.Clear(0)
	got := evalLoss()
	if math.Abs(got-want) > 1e-4*math.Max(1, math.Abs(want)) {
		t.Errorf("reverse KL: got %g, want %g", got, want)
	}

	// Gradient along itself against central finite differences.
	grads := readParams(tr, true)
	tr.gbuf.Clear(0)
	theta := readParams(tr, false)
	var norm float64
	for i := range grads {
		for _, g := range grads[i] {
			norm += float64(g) * float64(g)
		}
	}
	norm = math.Sqrt(norm)
	if norm == 0 {
		t.Fatal("zero gradient")
	}
	const h = 1e-3
	at := func(s float64) float64 {
		p := make([][]float32, len(theta))
		for i := range theta {
			p[i] = make([]float32, len(theta[i]))
			for j := range p[i] {
				p[i][j] = theta[i][j] + float32(s*h/norm)*grads[i][j]
			}
		}
		writeParams(tr, p)
		l := evalLoss()
		tr.gbuf.Clear(0)
		return l
	}
	fd := (at(1) - at(-1)) / (2 * h)
	writeParams(tr, theta)
	if math.Abs(fd-norm) > 2e-3*norm+1e-4 {
		t.Errorf("directional derivative: got %g (ggml), want %g (finite differences)", norm, fd)
	}

	// Training lowers it and leaves the value head alone.
	vh := readParams(tr, false)[len(tr.params)-2]
	st, err := tr.StepWith(ctx, obj, seqs)
	if err != nil {
		t.Fatal(err)
	}
	if st.OptimizerSteps != 4 || len(st.Terms) != 1 || st.Terms[0].Name != "reverse_kl" {
		t.Errorf("stats: got %+v, want 4 optimizer steps and one reverse_kl term", st)
	}
	if after := evalLoss(); !(after < got) {
		t.Errorf("reverse KL after StepWith: got %g, want below %g", after, got)
	}
	tr.gbuf.Clear(0)
	if d := maxAbsDiff(vh, readParams(tr, false)[len(tr.params)-2]); d != 0 {
		t.Errorf("StepWith without a value term moved the value head by %g", d)
	}
	if _, err := tr.StepWith(ctx, obj, append(seqs, seqs[0])); err == nil || !strings.Contains(err.Error(), "teacher") {
		t.Errorf("a sequence without teacher data: got %v, want the loss's Check error", err)
	}
}

// TestReferenceLogprobs: Step trains against Sequence.RefLogprobs when a
// sequence has them and computes them itself otherwise, without touching
// the caller's sequences; both routes give the same bits.
func TestReferenceLogprobs(t *testing.T) {
	o := testOptions()
	o.Epochs, o.MiniBatch = 1, 8 // one optimizer step: its stats are measured before it
	ctx := context.Background()
	// run trains a fresh trainer one step with the reference logprobs refs
	// chooses (nil: Step computes them) and returns the stats, the adapter
	// and the k3 KL recomputed in Go from the references it trained against.
	run := func(refs func(i int, s Score) []float32) (Stats, []byte, float64) {
		tr := newTrainer(t, "qwen2", o)
		randomize(tr, 4, 0.05)
		seqs := randomSeqs(61, 4, 20, 40, tr.Vocab())
		scores, err := tr.Evaluate(ctx, seqs)
		if err != nil {
			t.Fatal(err)
		}
		var kl float64
		n := 0
		for i, s := range scores {
			seqs[i].OldLogprobs, seqs[i].OldValues, seqs[i].RefLogprobs = s.Logprobs, s.Values, refs(i, s)
			ref := seqs[i].RefLogprobs
			if ref == nil {
				ref = s.RefLogprobs
			}
			for j, m := range seqs[i].Mask {
				if m && j > 0 {
					d := float64(ref[j] - s.Logprobs[j])
					kl += math.Exp(d) - d - 1
					n++
				}
			}
		}
		in := make([][]float32, len(seqs))
		for i := range seqs {
			in[i] = seqs[i].RefLogprobs
		}
		st, err := tr.Step(ctx, seqs)
		if err != nil {
			t.Fatal(err)
		}
		if st.OptimizerSteps != 1 {
			t.Fatalf("optimizer steps: got %d, want 1", st.OptimizerSteps)
		}
		for i := range seqs {
			if !reflect.DeepEqual(seqs[i].RefLogprobs, in[i]) {
				t.Fatalf("sequence %d: Step changed the caller's RefLogprobs", i)
			}
		}
		return st, adapterBytes(t, tr), kl / float64(n)
	}
	given, givenAdapter, wantKL := run(func(_ int, s Score) []float32 { return s.RefLogprobs })
	computed, computedAdapter, _ := run(func(int, Score) []float32 { return nil })
	mixed, mixedAdapter, _ := run(func(i int, s Score) []float32 {
		if i%2 == 0 {
			return s.RefLogprobs
		}
		return nil
	})
	if !reflect.DeepEqual(given, computed) || !reflect.DeepEqual(given, mixed) {
		t.Errorf("stats: given refs %+v, computed %+v, mixed %+v; want all equal", given, computed, mixed)
	}
	if string(givenAdapter) != string(computedAdapter) || string(givenAdapter) != string(mixedAdapter) {
		t.Error("adapters differ between given and computed reference logprobs")
	}
	// Shifted references: the KL term must be computed from the given
	// values, not from a pass of its own.
	shifted, _, wantShifted := run(func(_ int, s Score) []float32 {
		r := make([]float32, len(s.RefLogprobs))
		for i, v := range s.RefLogprobs {
			if v != 0 {
				r[i] = v + 0.5
			}
		}
		return r
	})
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"given", given.Term(TermKL), wantKL}, {"shifted", shifted.Term(TermKL), wantShifted}} {
		if math.Abs(c.got-c.want) > 1e-4*math.Max(1, c.want) {
			t.Errorf("%s references: KL got %g, want %g", c.name, c.got, c.want)
		}
	}
	if math.Abs(wantShifted-wantKL) < 0.01 {
		t.Errorf("shifting the references moved the KL by only %g: the test does not tell them apart", wantShifted-wantKL)
	}
}

// adapterBytes is the adapter file the trainer writes now.
func adapterBytes(t *testing.T, tr *Trainer) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "adapter.gguf")
	if err := tr.SaveAdapter(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEvaluateReference: Evaluate keeps the reference logprobs a sequence
// carries (copied, and without a pass), EvaluatePolicy skips them, and the
// policy columns do not depend on either.
func TestEvaluateReference(t *testing.T) {
	tr := newTrainer(t, "llama", testOptions())
	randomize(tr, 7, 0.05)
	ctx := context.Background()
	seqs := randomSeqs(62, 3, 10, 40, tr.Vocab())
	full, err := tr.Evaluate(ctx, seqs)
	if err != nil {
		t.Fatal(err)
	}
	policy, err := tr.EvaluatePolicy(ctx, seqs)
	if err != nil {
		t.Fatal(err)
	}
	marker := make([]float32, len(seqs[1].Tokens))
	marker[1] = 42
	seqs[1].RefLogprobs = marker
	kept, err := tr.Evaluate(ctx, seqs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range seqs {
		if policy[i].RefLogprobs != nil {
			t.Errorf("seq %d: EvaluatePolicy returned reference logprobs", i)
		}
		if !reflect.DeepEqual(policy[i].Logprobs, full[i].Logprobs) || !reflect.DeepEqual(policy[i].Values, full[i].Values) {
			t.Errorf("seq %d: EvaluatePolicy's policy scores differ from Evaluate's", i)
		}
		want := full[i].RefLogprobs
		if i == 1 {
			want = marker
		}
		if !reflect.DeepEqual(kept[i].RefLogprobs, want) {
			t.Errorf("seq %d: reference logprobs: got %v…, want %v…", i, kept[i].RefLogprobs[:3], want[:3])
		}
	}
	kept[1].RefLogprobs[1] = 0
	if marker[1] != 42 {
		t.Error("Evaluate returned the caller's RefLogprobs slice, not a copy")
	}
	seqs[1].RefLogprobs = marker[:2]
	if _, err := tr.Evaluate(ctx, seqs); err == nil || !strings.Contains(err.Error(), "reference logprobs") {
		t.Errorf("short RefLogprobs: got %v, want an error naming them", err)
	}
}

// brokenLoss declares an input that no output reads.
type brokenLoss struct{ coef float32 }

func (brokenLoss) Name() string              { return "broken" }
func (brokenLoss) Needs() Needs              { return Needs{} }
func (brokenLoss) Check(int, Sequence) error { return nil }
func (l brokenLoss) Build(ctx llamacpp.Context, f *Forward) (Term, error) {
	unused := f.Input("unused")
	return Term{Value: ctx.Neg(f.WeightedSum(f.Logprob)), Coef: l.coef, Set: func(r Rows) {
		llamacpp.SetF32(unused, make([]float32, r.K))
	}}, nil
}

// TestObjectiveErrors: malformed objectives are errors, not aborts in ggml.
func TestObjectiveErrors(t *testing.T) {
	if _, err := NewObjective(); err == nil {
		t.Error("NewObjective(): got no error")
	}
	if _, err := NewObjective(CrossEntropy{}, CrossEntropy{}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("duplicate loss: got %v, want an error", err)
	}
	tr := newTrainer(t, "llama", testOptions())
	seqs := randomSeqs(63, 2, 10, 30, tr.Vocab())
	for _, tt := range []struct {
		name   string
		losses []Loss
		want   string
	}{
		{"unused input", []Loss{brokenLoss{1}}, `input "unused"`},
		{"all coefficients zero", []Loss{ValueLoss{Coef: 0}, KLToBase{Coef: 0}}, "non-zero coefficient"},
		{"two approximate KLs", []Loss{PPOClip{Eps: 0.2}, renamed{PPOClip{Eps: 0.1}, "policy2"}}, "approximate KL"},
		{"bad clip", []Loss{PPOClip{Eps: 1.5}}, "clip eps"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj, err := NewObjective(tt.losses...)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tr.StepWith(context.Background(), obj, seqs); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
	if tr.Steps() != 0 {
		t.Errorf("optimizer steps after failed objectives: got %d, want 0", tr.Steps())
	}
}

// renamed gives a loss another name.
type renamed struct {
	Loss
	name string
}

func (r renamed) Name() string { return r.name }

// TestValueLossUnclipped: with ValueClip 0 (documented as the unclipped
// value loss) Step runs — the old-values input is not declared, where it
// used to be declared, left out of the graph and crash ggml — and the value
// term is ½·mean (v − R)² even with OldValues absent.
func TestValueLossUnclipped(t *testing.T) {
	o := testOptions()
	o.ValueClip = 0
	tr := newTrainer(t, "llama", o)
	randomize(tr, 9, 0.05)
	seqs := randomSeqs(64, 3, 20, 40, tr.Vocab())
	values, _, _, err := columns(tr.Evaluate(context.Background(), seqs))
	if err != nil {
		t.Fatal(err)
	}
	var want float64
	n := 0
	for i := range seqs {
		seqs[i].OldValues = nil
		for j, m := range seqs[i].Mask {
			if m && j > 0 {
				d := float64(values[i][j] - seqs[i].Returns[j])
				want += 0.5 * d * d
				n++
			}
		}
	}
	want /= float64(n)
	prepared, err := tr.prepare(context.Background(), tr.ppo, seqs) // reference logprobs for the KL term
	if err != nil {
		t.Fatal(err)
	}
	idx := []int{0, 1, 2}
	acc, err := tr.accumulate(context.Background(), tr.ppo, prepared, idx, tr.tokenWeights(prepared, idx))
	tr.gbuf.Clear(0)
	if err != nil {
		t.Fatal(err)
	}
	got := Stats{Terms: acc.terms}.Term(TermValue)
	if math.Abs(got-want) > 1e-4*math.Max(1, want) {
		t.Errorf("value loss: got %g, want %g", got, want)
	}
	if _, err := tr.Step(context.Background(), seqs); err != nil {
		t.Errorf("Step with ValueClip 0: %v", err)
	}
}
