// Package advantage turns rewards and critic values into per-token
// advantages and value-loss targets. Every estimator (hierarchical, gae,
// turn_gae, grpo, rae, reinforce) takes the same Input and reads what it
// needs of it, so a trainer calls them all alike; the formulas are those of
// docs/mission.md §1 and docs/selfplay.md. It knows nothing of games or
// models: the caller turns its trajectories into Samples.
package advantage

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
)

// Sample is one trajectory as an estimator sees it. Every estimator takes
// the same input (Input) and ignores what it does not need: GAE
// variants read Values and TurnEnds, GRPO reads Group, RAE reads Env and
// Role.
type Sample struct {
	// Mask marks the generated tokens; advantages are zero elsewhere.
	Mask []bool
	// Values are the critic's per-token values (len(Mask)), or nil when
	// there is no critic (every value is then 0).
	Values []float32
	// TurnEnds are the indices of each turn's last generated token.
	TurnEnds []int
	// TurnRewards are optional per-turn rewards (len(TurnEnds) or nil).
	TurnRewards []float64
	// Reward is the terminal reward.
	Reward float64
	// ShapedTurns: TurnRewards already include the terminal reward (see
	// selfplay.Trajectory.ShapedTurns), so Reward is not added to them.
	ShapedTurns bool
	// Group is the GRPO group (same scenario and role).
	Group string
	// Env and Role key the RAE baseline.
	Env, Role string
	// Flagged marks the turns a guard found degenerate (len(TurnEnds) or
	// nil); their credit is zeroed. hierarchical and turn_gae set the
	// turn-level advantage A_k of a flagged turn to 0 before it is placed
	// on the turn's tokens (hierarchical: the end-of-turn token's
	// pseudo-reward); gae, grpo, rae and reinforce give every token of a
	// flagged turn advantage 0. Returns (the critic's targets) are those
	// of the unflagged computation, and other turns' advantages are
	// unchanged; whitening leaves flagged turns' tokens out.
	Flagged []bool
}

// Input is the one input type of every estimator.
type Input struct {
	Samples []Sample
}

// Output is an estimator's advantages, per sample and token, zero off the
// mask. Returns are the value-loss targets.
type Output struct {
	Advantages [][]float32
	Returns    [][]float32
}

// Params configure every estimator; each reads what it needs.
type Params struct {
	// Gamma and Lambda are the token-level discount and GAE λ.
	Gamma  float64 `yaml:"gamma" json:"gamma"`
	Lambda float64 `yaml:"lambda" json:"lambda"`
	// TurnGamma and TurnLambda are the turn-level discount and GAE λ.
	TurnGamma  float64 `yaml:"turn_gamma" json:"turn_gamma"`
	TurnLambda float64 `yaml:"turn_lambda" json:"turn_lambda"`
	// Whiten normalises the advantages of all generated tokens of a batch
	// to mean 0 and standard deviation 1.
	Whiten bool `yaml:"whiten" json:"whiten"`
	// GroupStd divides GRPO advantages by the group's standard deviation.
	GroupStd bool `yaml:"group_std" json:"group_std"`
	// BaselineDecay is the RAE baseline's EMA decay α: b ← α·b + (1−α)·R.
	BaselineDecay float64 `yaml:"baseline_decay" json:"baseline_decay"`
}

// Defaults returns our defaults: γ=λ=1 at token level, γ=0.99 λ=0.95 at turn
// level (docs/mission.md §1; the paper leaves them open), no whitening, GRPO
// with standard-deviation scaling, RAE decay 0.95 (SPIRAL).
func (Params) Defaults() Params {
	return Params{Gamma: 1, Lambda: 1, TurnGamma: 0.99, TurnLambda: 0.95, GroupStd: true, BaselineDecay: 0.95}
}

// Validate checks the ranges.
func (p Params) Validate() error {
	for _, v := range []struct {
		name string
		x    float64
	}{{"gamma", p.Gamma}, {"lambda", p.Lambda}, {"turn_gamma", p.TurnGamma}, {"turn_lambda", p.TurnLambda}, {"baseline_decay", p.BaselineDecay}} {
		if math.IsNaN(v.x) || v.x < 0 || v.x > 1 {
			return fmt.Errorf("advantage: estimator %s = %v, want [0, 1]", v.name, v.x)
		}
	}
	return nil
}

// Estimator turns rewards (and critic values) into advantages.
type Estimator interface {
	Name() string
	Estimate(in Input) (Output, error)
}

// StatefulEstimator is an estimator with state that a checkpoint must
// keep (RAE's baselines).
type StatefulEstimator interface {
	Estimator
	MarshalState() ([]byte, error)
	UnmarshalState([]byte) error
}

var estimators = map[string]func(Params) Estimator{
	"hierarchical": func(p Params) Estimator { return hierarchical{p} },
	"gae":          func(p Params) Estimator { return tokenGAE{p} },
	"turn_gae":     func(p Params) Estimator { return turnGAE{p} },
	"grpo":         func(p Params) Estimator { return grpo{p} },
	"rae":          func(p Params) Estimator { return &rae{p: p, baselines: map[string]float64{}} },
	"reinforce":    func(p Params) Estimator { return reinforce{p} },
}

// Default names OMAR's hierarchical estimator.
const Default = "hierarchical"

// Names lists the registered estimators.
func Names() []string {
	names := make([]string, 0, len(estimators))
	for n := range estimators {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// New returns the estimator registered as name, with p validated.
func New(name string, p Params) (Estimator, error) {
	mk, ok := estimators[name]
	if !ok {
		return nil, fmt.Errorf("advantage: unknown estimator %q (have %v)", name, Names())
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return mk(p), nil
}

func (s *Sample) validate(i int) error {
	n := len(s.Mask)
	if s.Values != nil && len(s.Values) != n {
		return fmt.Errorf("advantage: sample %d: %d values for %d tokens", i, len(s.Values), n)
	}
	if s.Flagged != nil && len(s.Flagged) != len(s.TurnEnds) {
		return fmt.Errorf("advantage: sample %d: %d turn flags for %d turns", i, len(s.Flagged), len(s.TurnEnds))
	}
	if s.TurnRewards != nil && len(s.TurnRewards) != len(s.TurnEnds) {
		return fmt.Errorf("advantage: sample %d: %d turn rewards for %d turns", i, len(s.TurnRewards), len(s.TurnEnds))
	}
	prev := -1
	for k, e := range s.TurnEnds {
		if e <= prev || e >= n || !s.Mask[e] {
			return fmt.Errorf("advantage: sample %d: turn %d ends at %d (previous end %d, %d tokens, or not generated)", i, k, e, prev, n)
		}
		prev = e
	}
	for t := prev + 1; t < n; t++ {
		if s.Mask[t] {
			return fmt.Errorf("advantage: sample %d: generated token %d after the last turn end %d", i, t, prev)
		}
	}
	return nil
}

func (s *Sample) value(t int) float64 {
	if s.Values == nil {
		return 0
	}
	return float64(s.Values[t])
}

// turnReward is r_k: the per-turn reward plus, on the last turn, the
// terminal reward.
func (s *Sample) turnReward(k int) float64 {
	r := 0.0
	if s.TurnRewards != nil {
		r = s.TurnRewards[k]
	}
	if k == len(s.TurnEnds)-1 && !s.ShapedTurns {
		r += s.Reward
	}
	return r
}

// score is the scalar outcome used by the critic-free estimators.
func (s *Sample) score() float64 {
	r := s.Reward
	if s.ShapedTurns {
		r = 0
	}
	for _, x := range s.TurnRewards {
		r += x
	}
	return r
}

func (s *Sample) flagged(k int) bool { return s.Flagged != nil && s.Flagged[k] }

// guarded returns turn-level advantages with those of flagged turns set to
// 0, and whether any was (adv itself when none is).
func guarded(in Input, adv [][]float64) ([][]float64, bool) {
	var out [][]float64
	for i := range in.Samples {
		s := &in.Samples[i]
		for k := range s.TurnEnds {
			if !s.flagged(k) {
				continue
			}
			if out == nil {
				out = make([][]float64, len(adv))
				for j := range adv {
					out[j] = slices.Clone(adv[j])
				}
			}
			out[i][k] = 0
		}
	}
	if out == nil {
		return adv, false
	}
	return out, true
}

// turnTokens returns the generated token indices of turn k.
func (s *Sample) turnTokens(k int) []int {
	start := -1
	if k > 0 {
		start = s.TurnEnds[k-1]
	}
	var idx []int
	for t := start + 1; t <= s.TurnEnds[k]; t++ {
		if s.Mask[t] {
			idx = append(idx, t)
		}
	}
	return idx
}

// gaeScan is generalised advantage estimation over many concatenated
// episodes in one backward pass (the vectorised form): step i ends its
// episode when last[i], and then bootstraps from tail[i] instead of
// v[i+1]. adv receives A_i = Σ_l (γλ)^l δ_{i+l} within the episode.
func gaeScan(r, v []float64, last []bool, tail []float64, gamma, lambda float64, adv []float64) {
	running := 0.0
	for i := len(r) - 1; i >= 0; i-- {
		next := 0.0
		if last[i] {
			next, running = tail[i], 0
		} else {
			next = v[i+1]
		}
		delta := r[i] + gamma*next - v[i]
		running = delta + gamma*lambda*running
		adv[i] = running
	}
}

// flat collects steps of many episodes for gaeScan.
type flat struct {
	r, v, tail, adv []float64
	last            []bool
}

func (f *flat) add(r, v float64, last bool, tail float64) {
	f.r, f.v, f.last, f.tail = append(f.r, r), append(f.v, v), append(f.last, last), append(f.tail, tail)
}

func (f *flat) scan(gamma, lambda float64) {
	f.adv = make([]float64, len(f.r))
	gaeScan(f.r, f.v, f.last, f.tail, gamma, lambda, f.adv)
}

func newOutput(in Input) Output {
	out := Output{Advantages: make([][]float32, len(in.Samples)), Returns: make([][]float32, len(in.Samples))}
	for i, s := range in.Samples {
		out.Advantages[i] = make([]float32, len(s.Mask))
		out.Returns[i] = make([]float32, len(s.Mask))
	}
	return out
}

func validateInput(in Input) error {
	for i := range in.Samples {
		if err := in.Samples[i].validate(i); err != nil {
			return err
		}
	}
	return nil
}

// turnLevel runs turn-level GAE over every sample: step k of a sample is
// its turn k with value V_k = Values[TurnEnds[k]] and reward r_k. It
// returns A_k per sample and turn.
func turnLevel(in Input, gamma, lambda float64) [][]float64 {
	var f flat
	for i := range in.Samples {
		s := &in.Samples[i]
		for k, e := range s.TurnEnds {
			f.add(s.turnReward(k), s.value(e), k == len(s.TurnEnds)-1, 0)
		}
	}
	f.scan(gamma, lambda)
	out := make([][]float64, len(in.Samples))
	j := 0
	for i := range in.Samples {
		out[i] = f.adv[j : j+len(in.Samples[i].TurnEnds)]
		j += len(in.Samples[i].TurnEnds)
	}
	return out
}

// hierarchical is OMAR's estimator. Turn level: A_k by GAE over turns
// (γ_turn, λ_turn) with V_k the critic's value at turn k's last token,
// r_k = 0 before the last turn (plus optional per-turn rewards) and R on
// the last. Token level: inside turn k, A_k enters as the temporal
// difference of the end-of-turn token (δ_end = A_k; equivalently the turn's
// λ-return A_k+V_k is the end token's reward and the turn is terminal at
// token level), and ordinary GAE (γ, λ) with the per-token values runs back
// over the turn's tokens: δ_t = γV_{t+1} − V_t. With γ=λ=1 a token's
// advantage is A_k + V_k − V_t and its return A_k + V_k for every token of
// the turn, so the critic is trained on one consistent target per turn.
type hierarchical struct{ p Params }

func (hierarchical) Name() string { return "hierarchical" }

func (h hierarchical) Estimate(in Input) (Output, error) {
	if err := validateInput(in); err != nil {
		return Output{}, err
	}
	turnAdv := turnLevel(in, h.p.TurnGamma, h.p.TurnLambda)
	// The token-level pass runs on the guarded turn advantages for the
	// advantages, and once more on the unguarded ones for the returns when
	// a turn is flagged (the critic keeps learning what the state is worth).
	tokenLevel := func(turnAdv [][]float64) (flat, [][2]int) {
		var f flat
		var where [][2]int
		for i := range in.Samples {
			s := &in.Samples[i]
			for k := range s.TurnEnds {
				idx := s.turnTokens(k)
				for j, t := range idx {
					end := j == len(idx)-1
					r := 0.0
					if end {
						r = turnAdv[i][k] + s.value(t)
					}
					f.add(r, s.value(t), end, 0)
					where = append(where, [2]int{i, t})
				}
			}
		}
		f.scan(h.p.Gamma, h.p.Lambda)
		return f, where
	}
	f, where := tokenLevel(turnAdv)
	out := newOutput(in)
	for j, w := range where {
		out.Returns[w[0]][w[1]] = float32(f.adv[j] + f.v[j])
	}
	if g, ok := guarded(in, turnAdv); ok {
		f, _ = tokenLevel(g)
	}
	for j, w := range where {
		out.Advantages[w[0]][w[1]] = float32(f.adv[j])
	}
	finish(in, out, h.p, false)
	return out, nil
}

// tokenGAE is ordinary token-level GAE over the generated tokens of each
// trajectory (prompt tokens are skipped: the step after a turn's last
// token is the next turn's first), with per-turn rewards on turn ends and
// the terminal reward on the last generated token.
type tokenGAE struct{ p Params }

func (tokenGAE) Name() string { return "gae" }

func (g tokenGAE) Estimate(in Input) (Output, error) {
	if err := validateInput(in); err != nil {
		return Output{}, err
	}
	var f flat
	var where [][2]int
	for i := range in.Samples {
		s := &in.Samples[i]
		ends := map[int]int{}
		for k, e := range s.TurnEnds {
			ends[e] = k
		}
		lastTok := -1
		if len(s.TurnEnds) > 0 {
			lastTok = s.TurnEnds[len(s.TurnEnds)-1]
		}
		for t, m := range s.Mask {
			if !m {
				continue
			}
			r := 0.0
			if k, ok := ends[t]; ok {
				r = s.turnReward(k)
			}
			f.add(r, s.value(t), t == lastTok, 0)
			where = append(where, [2]int{i, t})
		}
	}
	f.scan(g.p.Gamma, g.p.Lambda)
	out := newOutput(in)
	for j, w := range where {
		out.Advantages[w[0]][w[1]] = float32(f.adv[j])
		out.Returns[w[0]][w[1]] = float32(f.adv[j] + f.v[j])
	}
	finish(in, out, g.p, true)
	return out, nil
}

// turnGAE is turn-level GAE where every token of a turn shares the turn's
// advantage (SocialRL-Sotopia); the return of each token is A_k + V_k.
type turnGAE struct{ p Params }

func (turnGAE) Name() string { return "turn_gae" }

func (g turnGAE) Estimate(in Input) (Output, error) {
	if err := validateInput(in); err != nil {
		return Output{}, err
	}
	turnAdv := turnLevel(in, g.p.TurnGamma, g.p.TurnLambda)
	credit, _ := guarded(in, turnAdv)
	out := newOutput(in)
	for i := range in.Samples {
		s := &in.Samples[i]
		for k, e := range s.TurnEnds {
			ret := turnAdv[i][k] + s.value(e)
			for _, t := range s.turnTokens(k) {
				out.Advantages[i][t] = float32(credit[i][k])
				out.Returns[i][t] = float32(ret)
			}
		}
	}
	finish(in, out, g.p, false)
	return out, nil
}

// grpo: the advantage of every generated token is the sample's score minus
// its group's mean (divided by the group's standard deviation when
// GroupStd), the group being the same scenario and role.
type grpo struct{ p Params }

func (grpo) Name() string { return "grpo" }

func (g grpo) Estimate(in Input) (Output, error) {
	if err := validateInput(in); err != nil {
		return Output{}, err
	}
	type stat struct{ sum, sq, n float64 }
	groups := map[string]*stat{}
	for i := range in.Samples {
		s := &in.Samples[i]
		st := groups[s.Group]
		if st == nil {
			st = &stat{}
			groups[s.Group] = st
		}
		x := s.score()
		st.sum, st.sq, st.n = st.sum+x, st.sq+x*x, st.n+1
	}
	out := newOutput(in)
	for i := range in.Samples {
		s := &in.Samples[i]
		st := groups[s.Group]
		mean := st.sum / st.n
		a := s.score() - mean
		if g.p.GroupStd {
			std := math.Sqrt(math.Max(0, st.sq/st.n-mean*mean))
			a /= std + 1e-6
		}
		fill(s, out, i, a, s.score())
	}
	finish(in, out, g.p, true)
	return out, nil
}

// rae is SPIRAL's role-conditioned advantage estimation: one EMA baseline
// per (environment, role); A = R − b, then b ← α·b + (1−α)·R, sample by
// sample in input order. The baselines are checkpointed state.
type rae struct {
	p         Params
	mu        sync.Mutex
	baselines map[string]float64
}

func (*rae) Name() string { return "rae" }

func raeKey(env, role string) string { return env + "/" + role }

func (e *rae) Estimate(in Input) (Output, error) {
	if err := validateInput(in); err != nil {
		return Output{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	out := newOutput(in)
	for i := range in.Samples {
		s := &in.Samples[i]
		key := raeKey(s.Env, s.Role)
		b := e.baselines[key]
		x := s.score()
		fill(s, out, i, x-b, x)
		e.baselines[key] = e.p.BaselineDecay*b + (1-e.p.BaselineDecay)*x
	}
	finish(in, out, e.p, true)
	return out, nil
}

// raeState is the checkpoint form of the baselines (sorted, so the bytes
// are deterministic).
type raeState struct {
	Baselines []raeBaseline `json:"baselines"`
}

type raeBaseline struct {
	Key   string  `json:"key"`
	Value float64 `json:"value"`
}

// MarshalState encodes the baselines.
func (e *rae) MarshalState() ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := raeState{Baselines: []raeBaseline{}}
	for k, v := range e.baselines {
		st.Baselines = append(st.Baselines, raeBaseline{k, v})
	}
	slices.SortFunc(st.Baselines, func(a, b raeBaseline) int {
		if a.Key < b.Key {
			return -1
		}
		if a.Key > b.Key {
			return 1
		}
		return 0
	})
	return json.Marshal(st)
}

// UnmarshalState restores the baselines.
func (e *rae) UnmarshalState(b []byte) error {
	var st raeState
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("advantage: rae state: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.baselines = map[string]float64{}
	for _, x := range st.Baselines {
		e.baselines[x.Key] = x.Value
	}
	return nil
}

// Baseline returns the current baseline of (env, role).
func (e *rae) Baseline(env, role string) float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.baselines[raeKey(env, role)]
}

// reinforce: every generated token's advantage is the sample's score.
type reinforce struct{ p Params }

func (reinforce) Name() string { return "reinforce" }

func (r reinforce) Estimate(in Input) (Output, error) {
	if err := validateInput(in); err != nil {
		return Output{}, err
	}
	out := newOutput(in)
	for i := range in.Samples {
		s := &in.Samples[i]
		fill(s, out, i, s.score(), s.score())
	}
	finish(in, out, r.p, true)
	return out, nil
}

func fill(s *Sample, out Output, i int, adv, ret float64) {
	for t, m := range s.Mask {
		if m {
			out.Advantages[i][t] = float32(adv)
			out.Returns[i][t] = float32(ret)
		}
	}
}

// finish zeroes the advantages of flagged turns' tokens (zeroTokens: the
// estimators without a turn level) and applies whitening over every
// generated token of the batch outside flagged turns.
func finish(in Input, out Output, p Params, zeroTokens bool) {
	var skip [][]bool // skip[i][t]: token t of sample i is in a flagged turn
	for i := range in.Samples {
		s := &in.Samples[i]
		for k := range s.TurnEnds {
			if !s.flagged(k) {
				continue
			}
			if skip == nil {
				skip = make([][]bool, len(in.Samples))
			}
			if skip[i] == nil {
				skip[i] = make([]bool, len(s.Mask))
			}
			for _, t := range s.turnTokens(k) {
				skip[i][t] = true
				if zeroTokens {
					out.Advantages[i][t] = 0
				}
			}
		}
	}
	skipped := func(i, t int) bool { return skip != nil && skip[i] != nil && skip[i][t] }
	if !p.Whiten {
		return
	}
	var sum, sq, n float64
	for i, s := range in.Samples {
		for t, m := range s.Mask {
			if m && !skipped(i, t) {
				x := float64(out.Advantages[i][t])
				sum, sq, n = sum+x, sq+x*x, n+1
			}
		}
	}
	if n == 0 {
		return
	}
	mean := sum / n
	std := math.Sqrt(math.Max(0, sq/n-mean*mean))
	for i, s := range in.Samples {
		for t, m := range s.Mask {
			if m && !skipped(i, t) {
				out.Advantages[i][t] = float32((float64(out.Advantages[i][t]) - mean) / (std + 1e-8))
			}
		}
	}
}
