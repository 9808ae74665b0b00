package advantage

import (
	"math"
	"math/rand/v2"
	"testing"
)

func mask(s string) []bool {
	m := make([]bool, len(s))
	for i := range s {
		m[i] = s[i] == '1'
	}
	return m
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-5 }

func checkVec(t *testing.T, what string, got []float32, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !near(float64(got[i]), want[i]) {
			t.Errorf("%s[%d]: got %v, want %v (all: %v)", what, i, got[i], want[i], got)
		}
	}
}

// twoTurns is a seat that spoke twice: tokens 0 and 3 are prompt tokens,
// turn 1 generated tokens 1–2, turn 2 tokens 4–5; it won (R=1).
func twoTurns() Sample {
	return Sample{
		Mask:     mask("011011"),
		Values:   []float32{0, .1, .2, 0, .3, .4},
		TurnEnds: []int{2, 5},
		Reward:   1,
		Group:    "s1/buyer", Env: "e", Role: "buyer",
	}
}

// flaggedTwoTurns is twoTurns with guard flags on its turns.
func flaggedTwoTurns(first, second bool) Sample {
	s := twoTurns()
	s.Flagged = []bool{first, second}
	return s
}

func params(mod func(*Params)) Params {
	p := Params{}.Defaults()
	if mod != nil {
		mod(&p)
	}
	return p
}

// TestEstimatorsHandComputed checks every estimator against values worked
// out by hand in the comments.
func TestEstimatorsHandComputed(t *testing.T) {
	tests := []struct {
		name    string
		est     string
		p       Params
		samples []Sample
		adv     [][]float64
		ret     [][]float64
	}{
		{
			// Turn level, γT=λT=.5: V1=.2, V2=.4; δ2 = 1−.4 = .6, δ1 = .5·.4−.2 = 0;
			// A2 = .6, A1 = 0 + .25·.6 = .15. Token level γ=λ=1: end tokens get A_k;
			// token 1: δ = .2−.1 = .1 → .25; token 4: δ = .4−.3 = .1 → .7.
			// Returns A+V: .35 .35 | 1 1.
			name: "hierarchical", est: "hierarchical",
			p:       params(func(p *Params) { p.TurnGamma, p.TurnLambda = .5, .5 }),
			samples: []Sample{twoTurns()},
			adv:     [][]float64{{0, .25, .15, 0, .7, .6}},
			ret:     [][]float64{{0, .35, .35, 0, 1, 1}},
		},
		{
			// As above with token γ=.5: token 1: δ = .5·.2−.1 = 0 → 0 + .5·.15 = .075;
			// token 4: δ = .5·.4−.3 = −.1 → −.1 + .5·.6 = .2.
			name: "hierarchical token gamma", est: "hierarchical",
			p:       params(func(p *Params) { p.TurnGamma, p.TurnLambda, p.Gamma = .5, .5, .5 }),
			samples: []Sample{twoTurns()},
			adv:     [][]float64{{0, .075, .15, 0, .2, .6}},
			ret:     [][]float64{{0, .175, .35, 0, .5, 1}},
		},
		{
			// No critic, per-turn rewards .1, 0, .2 and R=1, γT=.5 λT=1:
			// r = .1, 0, 1.2; A3 = 1.2, A2 = .5·1.2 = .6, A1 = .1 + .5·.6 = .4.
			name: "hierarchical turn rewards no critic", est: "hierarchical",
			p: params(func(p *Params) { p.TurnGamma, p.TurnLambda = .5, 1 }),
			samples: []Sample{{
				Mask: mask("111"), TurnEnds: []int{0, 1, 2}, TurnRewards: []float64{.1, 0, .2}, Reward: 1,
			}},
			adv: [][]float64{{.4, .6, 1.2}},
			ret: [][]float64{{.4, .6, 1.2}},
		},
		{
			// Shaped turn rewards .1 and 1.2 already hold R=1 on the last
			// turn: r = .1, 1.2 (not 2.2); γT=.5 λT=1: A2 = 1.2, A1 = .1 + .6.
			name: "hierarchical shaped turns", est: "hierarchical",
			p: params(func(p *Params) { p.TurnGamma, p.TurnLambda = .5, 1 }),
			samples: []Sample{{
				Mask: mask("11"), TurnEnds: []int{0, 1}, TurnRewards: []float64{.1, 1.2}, Reward: 1, ShapedTurns: true,
			}},
			adv: [][]float64{{.7, 1.2}},
			ret: [][]float64{{.7, 1.2}},
		},
		{
			// Shaped: score = Σ turn rewards = 1.3, R not added again.
			name: "reinforce shaped turns", est: "reinforce",
			p: params(nil),
			samples: []Sample{{
				Mask: mask("11"), TurnEnds: []int{0, 1}, TurnRewards: []float64{.1, 1.2}, Reward: 1, ShapedTurns: true,
			}},
			adv: [][]float64{{1.3, 1.3}},
			ret: [][]float64{{1.3, 1.3}},
		},
		{
			// Token GAE γ=λ=1 over generated tokens only: A_t = R − V_t.
			name: "gae", est: "gae",
			p:       params(nil),
			samples: []Sample{twoTurns()},
			adv:     [][]float64{{0, .9, .8, 0, .7, .6}},
			ret:     [][]float64{{0, 1, 1, 0, 1, 1}},
		},
		{
			// γ=λ=.5: tok5 δ=.6 → .6; tok4 δ=.5·.4−.3=−.1 → −.1+.25·.6=.05;
			// tok2 δ=.5·.3−.2=−.05 → −.05+.25·.05=−.0375; tok1 δ=.5·.2−.1=0 → .25·−.0375.
			name: "gae discounted", est: "gae",
			p:       params(func(p *Params) { p.Gamma, p.Lambda = .5, .5 }),
			samples: []Sample{twoTurns()},
			adv:     [][]float64{{0, -.009375, -.0375, 0, .05, .6}},
			ret:     [][]float64{{0, .090625, .1625, 0, .35, 1}},
		},
		{
			// Turn GAE γT=λT=.5: A1 = .15, A2 = .6 shared by the turn's tokens;
			// returns A_k + V_k = .35 and 1.
			name: "turn_gae", est: "turn_gae",
			p:       params(func(p *Params) { p.TurnGamma, p.TurnLambda = .5, .5 }),
			samples: []Sample{twoTurns()},
			adv:     [][]float64{{0, .15, .15, 0, .6, .6}},
			ret:     [][]float64{{0, .35, .35, 0, 1, 1}},
		},
		{
			// Group g1 scores 1 and 0: mean .5 → ±.5; g2 alone → 0.
			name: "grpo mean only", est: "grpo",
			p: params(func(p *Params) { p.GroupStd = false }),
			samples: []Sample{
				{Mask: mask("011"), TurnEnds: []int{2}, Reward: 1, Group: "g1"},
				{Mask: mask("01"), TurnEnds: []int{1}, Reward: 0, Group: "g1"},
				{Mask: mask("1"), TurnEnds: []int{0}, Reward: .5, Group: "g2"},
			},
			adv: [][]float64{{0, .5, .5}, {0, -.5}, {0}},
			ret: [][]float64{{0, 1, 1}, {0, 0}, {.5}},
		},
		{
			// With the group's std (.5): ±1.
			name: "grpo std", est: "grpo",
			p: params(nil),
			samples: []Sample{
				{Mask: mask("011"), TurnEnds: []int{2}, Reward: 1, Group: "g1"},
				{Mask: mask("01"), TurnEnds: []int{1}, Reward: 0, Group: "g1"},
			},
			adv: [][]float64{{0, 1, 1}, {0, -1}},
			ret: [][]float64{{0, 1, 1}, {0, 0}},
		},
		{
			// α=.5: buyer R=1 → A=1, b=.5; buyer R=1 → A=.5, b=.75;
			// seller R=.4 → A=.4 (own baseline).
			name: "rae", est: "rae",
			p: params(func(p *Params) { p.BaselineDecay = .5 }),
			samples: []Sample{
				{Mask: mask("1"), TurnEnds: []int{0}, Reward: 1, Env: "e", Role: "buyer"},
				{Mask: mask("1"), TurnEnds: []int{0}, Reward: 1, Env: "e", Role: "buyer"},
				{Mask: mask("01"), TurnEnds: []int{1}, Reward: .4, Env: "e", Role: "seller"},
			},
			adv: [][]float64{{1}, {.5}, {0, .4}},
			ret: [][]float64{{1}, {1}, {0, .4}},
		},
		{
			// Score = R + Σ turn rewards = 1.3.
			name: "reinforce", est: "reinforce",
			p: params(nil),
			samples: []Sample{
				{Mask: mask("0101"), TurnEnds: []int{1, 3}, TurnRewards: []float64{.1, .2}, Reward: 1},
			},
			adv: [][]float64{{0, 1.3, 0, 1.3}},
			ret: [][]float64{{0, 1.3, 0, 1.3}},
		},
		{
			// Whitening two one-token samples 1 and 0: mean .5, std .5 → ±1.
			name: "reinforce whitened", est: "reinforce",
			p: params(func(p *Params) { p.Whiten = true }),
			samples: []Sample{
				{Mask: mask("1"), TurnEnds: []int{0}, Reward: 1},
				{Mask: mask("01"), TurnEnds: []int{1}, Reward: 0},
			},
			adv: [][]float64{{1}, {0, -1}},
			ret: [][]float64{{1}, {0, 0}},
		},
		// A guard flagged one turn (Sample.Flagged). twoTurns, γT=λT=.5, is
		// worked out above: A1=.15, A2=.6, token advantages .25 .15 | .7 .6,
		// returns .35 .35 | 1 1.
		{
			// Turn 1 flagged: its A1 is set to 0 before it goes on token 2,
			// so token 2 gets 0 and token 1 only the critic's difference
			// δ = .2−.1 = .1. Turn 2 and every return are unchanged.
			name: "hierarchical flagged first turn", est: "hierarchical",
			p:       params(func(p *Params) { p.TurnGamma, p.TurnLambda = .5, .5 }),
			samples: []Sample{flaggedTwoTurns(true, false)},
			adv:     [][]float64{{0, .1, 0, 0, .7, .6}},
			ret:     [][]float64{{0, .35, .35, 0, 1, 1}},
		},
		{
			// Turn 2 flagged: A2 → 0 on token 5, token 4 gets .4−.3 = .1;
			// turn 1 keeps A1 = .15 (the outcome still reaches it through
			// the turn-level GAE).
			name: "hierarchical flagged last turn", est: "hierarchical",
			p:       params(func(p *Params) { p.TurnGamma, p.TurnLambda = .5, .5 }),
			samples: []Sample{flaggedTwoTurns(false, true)},
			adv:     [][]float64{{0, .25, .15, 0, .1, 0}},
			ret:     [][]float64{{0, .35, .35, 0, 1, 1}},
		},
		{
			// turn_gae: every token of turn k gets A_k; A1 → 0.
			name: "turn_gae flagged first turn", est: "turn_gae",
			p:       params(func(p *Params) { p.TurnGamma, p.TurnLambda = .5, .5 }),
			samples: []Sample{flaggedTwoTurns(true, false)},
			adv:     [][]float64{{0, 0, 0, 0, .6, .6}},
			ret:     [][]float64{{0, .35, .35, 0, 1, 1}},
		},
		{
			// gae (γ=λ=1) gives .9 .8 | .7 .6 and returns 1; turn 1's tokens → 0.
			name: "gae flagged first turn", est: "gae",
			p:       params(nil),
			samples: []Sample{flaggedTwoTurns(true, false)},
			adv:     [][]float64{{0, 0, 0, 0, .7, .6}},
			ret:     [][]float64{{0, 1, 1, 0, 1, 1}},
		},
		{
			// Whitening leaves the flagged turn out: .7 and .6 have mean .65
			// and std .05 → ±1; the flagged tokens stay 0.
			name: "gae flagged whitened", est: "gae",
			p:       params(func(p *Params) { p.Whiten = true }),
			samples: []Sample{flaggedTwoTurns(true, false)},
			adv:     [][]float64{{0, 0, 0, 0, 1, -1}},
			ret:     [][]float64{{0, 1, 1, 0, 1, 1}},
		},
		{
			// reinforce: score 1 on every token but the flagged turn's.
			name: "reinforce flagged last turn", est: "reinforce",
			p:       params(nil),
			samples: []Sample{flaggedTwoTurns(false, true)},
			adv:     [][]float64{{0, 1, 1, 0, 0, 0}},
			ret:     [][]float64{{0, 1, 1, 0, 1, 1}},
		},
		{
			// Nothing flagged: the same as without flags.
			name: "hierarchical no turn flagged", est: "hierarchical",
			p:       params(func(p *Params) { p.TurnGamma, p.TurnLambda = .5, .5 }),
			samples: []Sample{flaggedTwoTurns(false, false)},
			adv:     [][]float64{{0, .25, .15, 0, .7, .6}},
			ret:     [][]float64{{0, .35, .35, 0, 1, 1}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(tc.est, tc.p)
			if err != nil {
				t.Fatal(err)
			}
			out, err := e.Estimate(Input{Samples: tc.samples})
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.adv {
				checkVec(t, "advantages", out.Advantages[i], tc.adv[i])
				checkVec(t, "returns", out.Returns[i], tc.ret[i])
			}
		})
	}
}

func TestEstimatorRejectsBadInput(t *testing.T) {
	tests := []struct {
		name string
		s    Sample
	}{
		{"values length", Sample{Mask: mask("11"), Values: []float32{1}, TurnEnds: []int{1}}},
		{"turn end unmasked", Sample{Mask: mask("10"), TurnEnds: []int{1}}},
		{"turn ends unsorted", Sample{Mask: mask("11"), TurnEnds: []int{1, 0}}},
		{"generated after last turn", Sample{Mask: mask("11"), TurnEnds: []int{0}}},
		{"turn rewards length", Sample{Mask: mask("1"), TurnEnds: []int{0}, TurnRewards: []float64{1, 2}}},
		{"turn flags length", Sample{Mask: mask("1"), TurnEnds: []int{0}, Flagged: []bool{true, false}}},
	}
	for _, name := range Names() {
		for _, tc := range tests {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				e, err := New(name, params(nil))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := e.Estimate(Input{Samples: []Sample{tc.s}}); err == nil {
					t.Errorf("got no error, want one")
				}
			})
		}
	}
	if _, err := New("nope", params(nil)); err == nil {
		t.Errorf("unknown estimator: got no error, want one")
	}
	if _, err := New("gae", params(func(p *Params) { p.Gamma = 2 })); err == nil {
		t.Errorf("gamma 2: got no error, want one")
	}
}

func TestRAEStateRoundTrip(t *testing.T) {
	p := params(func(p *Params) { p.BaselineDecay = .9 })
	batch := Input{Samples: []Sample{
		{Mask: mask("1"), TurnEnds: []int{0}, Reward: .7, Env: "e", Role: "a"},
		{Mask: mask("1"), TurnEnds: []int{0}, Reward: .2, Env: "e", Role: "b"},
	}}
	cont, _ := New("rae", p)
	if _, err := cont.Estimate(batch); err != nil {
		t.Fatal(err)
	}
	state, err := cont.(StatefulEstimator).MarshalState()
	if err != nil {
		t.Fatal(err)
	}
	restored, _ := New("rae", p)
	if err := restored.(StatefulEstimator).UnmarshalState(state); err != nil {
		t.Fatal(err)
	}
	want, _ := cont.Estimate(batch)
	got, _ := restored.Estimate(batch)
	for i := range want.Advantages {
		if got.Advantages[i][0] != want.Advantages[i][0] {
			t.Errorf("sample %d: got %v, want %v", i, got.Advantages[i][0], want.Advantages[i][0])
		}
	}
	if err := restored.(StatefulEstimator).UnmarshalState([]byte("{")); err == nil {
		t.Errorf("corrupt state: got no error, want one")
	}
}

// naiveGAE is A_k = Σ_l (γλ)^l δ_{k+l} written out as the double sum.
func naiveGAE(r, v []float64, tail, gamma, lambda float64) []float64 {
	n := len(r)
	delta := make([]float64, n)
	for k := range n {
		next := tail
		if k+1 < n {
			next = v[k+1]
		}
		delta[k] = r[k] + gamma*next - v[k]
	}
	a := make([]float64, n)
	for k := range n {
		for l := 0; k+l < n; l++ {
			a[k] += math.Pow(gamma*lambda, float64(l)) * delta[k+l]
		}
	}
	return a
}

// naiveHierarchical follows docs/mission.md §1 literally, one sample and turn
// at a time.
func naiveHierarchical(s Sample, p Params) (adv, ret []float64) {
	K := len(s.TurnEnds)
	rk := make([]float64, K)
	vk := make([]float64, K)
	for k := range K {
		rk[k] = s.turnReward(k)
		vk[k] = s.value(s.TurnEnds[k])
	}
	turnA := naiveGAE(rk, vk, 0, p.TurnGamma, p.TurnLambda)
	adv = make([]float64, len(s.Mask))
	ret = make([]float64, len(s.Mask))
	for k := range K {
		idx := s.turnTokens(k)
		r := make([]float64, len(idx))
		v := make([]float64, len(idx))
		for j, t := range idx {
			v[j] = s.value(t)
		}
		r[len(idx)-1] = turnA[k] + v[len(idx)-1]
		a := naiveGAE(r, v, 0, p.Gamma, p.Lambda)
		for j, t := range idx {
			adv[t], ret[t] = a[j], a[j]+v[j]
		}
	}
	return adv, ret
}

func randomSample(rng *rand.Rand) Sample {
	n := 2 + rng.IntN(30)
	s := Sample{Mask: make([]bool, n), Values: make([]float32, n), Reward: rng.Float64()*2 - 1}
	for t := range n {
		s.Mask[t] = rng.IntN(3) > 0
		s.Values[t] = float32(rng.NormFloat64())
	}
	s.Mask[n-1] = true
	for t := range n {
		if s.Mask[t] && (t == n-1 || !s.Mask[t+1] || rng.IntN(4) == 0) {
			s.TurnEnds = append(s.TurnEnds, t)
			s.TurnRewards = append(s.TurnRewards, rng.Float64()*.2)
		}
	}
	return s
}

// TestNaiveVersusVectorised compares the one-pass backward scans over the
// whole batch with the definitions written as double sums per sample.
func TestNaiveVersusVectorised(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 20 {
		var in Input
		for range 1 + rng.IntN(5) {
			in.Samples = append(in.Samples, randomSample(rng))
		}
		p := params(func(p *Params) {
			p.Gamma, p.Lambda = rng.Float64(), rng.Float64()
			p.TurnGamma, p.TurnLambda = rng.Float64(), rng.Float64()
		})
		h, _ := New("hierarchical", p)
		got, err := h.Estimate(in)
		if err != nil {
			t.Fatal(err)
		}
		g, _ := New("gae", p)
		gotGAE, err := g.Estimate(in)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range in.Samples {
			wa, wr := naiveHierarchical(s, p)
			for tok := range s.Mask {
				if !near(float64(got.Advantages[i][tok]), wa[tok]) || !near(float64(got.Returns[i][tok]), wr[tok]) {
					t.Fatalf("trial %d sample %d token %d: got %v/%v, want %v/%v", trial, i, tok,
						got.Advantages[i][tok], got.Returns[i][tok], wa[tok], wr[tok])
				}
			}
			// Token GAE: the generated tokens form one chain.
			var r, v []float64
			var idx []int
			ends := map[int]int{}
			for k, e := range s.TurnEnds {
				ends[e] = k
			}
			for tok, m := range s.Mask {
				if m {
					rr := 0.0
					if k, ok := ends[tok]; ok {
						rr = s.turnReward(k)
					}
					r, v, idx = append(r, rr), append(v, s.value(tok)), append(idx, tok)
				}
			}
			wa = naiveGAE(r, v, 0, p.Gamma, p.Lambda)
			for j, tok := range idx {
				if !near(float64(gotGAE.Advantages[i][tok]), wa[j]) {
					t.Fatalf("gae trial %d sample %d token %d: got %v, want %v", trial, i, tok, gotGAE.Advantages[i][tok], wa[j])
				}
			}
		}
	}
}

// episode builds a seat trajectory of k turns of n generated tokens each,
// separated by 2 prompt tokens, with reward r and no critic.
func episode(k, n int, r float64) Sample {
	var s Sample
	for range k {
		s.Mask = append(s.Mask, false, false)
		for range n {
			s.Mask = append(s.Mask, true)
		}
		s.TurnEnds = append(s.TurnEnds, len(s.Mask)-1)
	}
	s.Reward, s.Group, s.Env, s.Role = r, "g", "e", "r"
	return s
}

// meanTurnAdvantage is the mean over turns of each turn's mean token
// advantage: the credit one turn of the episode receives on average.
func meanTurnAdvantage(s Sample, adv []float32) float64 {
	sum := 0.0
	for k := range s.TurnEnds {
		idx := s.turnTokens(k)
		a := 0.0
		for _, t := range idx {
			a += float64(adv[t])
		}
		sum += a / float64(len(idx))
	}
	return sum / float64(len(s.TurnEnds))
}

// TestLengthBias shows whether turn-level credit assignment biases long
// episodes against short ones: a 2-turn and an 8-turn episode, both won
// with R=1, in one batch. Without a critic, the turn-level discount γλ<1
// of the hierarchical estimator shrinks the credit of a long episode's
// early turns (its mean per-turn advantage is lower, for the same
// outcome); with γ_turn=λ_turn=1, or with outcome-only estimators, both
// episodes' turns get the same credit. Per-turn whitening keeps whatever
// bias there was (it is an affine map shared by the batch).
func TestLengthBias(t *testing.T) {
	short, long := episode(2, 3, 1), episode(8, 3, 1)
	tests := []struct {
		name   string
		est    string
		p      Params
		biased bool
	}{
		{"hierarchical defaults, no critic", "hierarchical", params(nil), true},
		{"hierarchical γ=λ=1", "hierarchical", params(func(p *Params) { p.TurnGamma, p.TurnLambda = 1, 1 }), false},
		{"turn_gae defaults, no critic", "turn_gae", params(nil), true},
		{"turn_gae whitened", "turn_gae", params(func(p *Params) { p.Whiten = true }), true},
		{"reinforce", "reinforce", params(nil), false},
		// A baseline that does not move between the two samples.
		{"rae", "rae", params(func(p *Params) { p.BaselineDecay = 1 }), false},
		{"gae γ=λ=1", "gae", params(nil), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := New(tc.est, tc.p)
			out, err := e.Estimate(Input{Samples: []Sample{short, long}})
			if err != nil {
				t.Fatal(err)
			}
			s, l := meanTurnAdvantage(short, out.Advantages[0]), meanTurnAdvantage(long, out.Advantages[1])
			t.Logf("mean per-turn advantage: short %.4f, long %.4f", s, l)
			if got := !near(s, l); got != tc.biased {
				t.Errorf("biased: got %v, want %v (short %.4f, long %.4f)", got, tc.biased, s, l)
			}
			if tc.biased && l >= s {
				t.Errorf("long episode favoured: short %.4f, long %.4f", s, l)
			}
		})
	}
	// With a critic that already predicts the discounted outcome, the bias
	// of the defaults vanishes: every δ is 0 and so is every advantage.
	p := params(nil)
	for _, s := range []Sample{short, long} {
		s.Values = make([]float32, len(s.Mask))
		K := len(s.TurnEnds)
		for k := range s.TurnEnds {
			for _, tok := range s.turnTokens(k) {
				s.Values[tok] = float32(math.Pow(p.TurnGamma, float64(K-1-k)))
			}
		}
		e, _ := New("hierarchical", p)
		out, err := e.Estimate(Input{Samples: []Sample{s}})
		if err != nil {
			t.Fatal(err)
		}
		if m := meanTurnAdvantage(s, out.Advantages[0]); math.Abs(m) > 1e-5 {
			t.Errorf("perfect critic, %d turns: mean advantage got %v, want 0", K, m)
		}
	}
}
