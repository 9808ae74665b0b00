package sotopia

import (
	"fmt"
	"math"
	"slices"
)

// Where the stage weights of the process reward come from
// (JudgeOptions.StageWeights).
const (
	// StageWeightsProposed: the judge proposes the weights with each
	// turn's judgement, as SocialRL-Sotopia's reward model does, and
	// SanitizeWeights makes them safe to use. The default.
	StageWeightsProposed = "proposed"
	// StageWeightsFixed: the fixed table StageWeights, the paper's
	// ablation; the judge is not asked for weights.
	StageWeightsFixed = "fixed"
)

// WeightPolicy bounds the process-dimension weights a judge may propose
// and says what replaces a proposal that cannot be used.
type WeightPolicy struct {
	// Cap is the largest final weight of a dimension that Caps does not
	// name. Without it one proposal could put the whole process reward on
	// a single dimension, which a policy would then learn to game.
	Cap float64
	// Caps override Cap per dimension (keys of ProcessDimensions).
	Caps map[string]float64
	// Prior[s] are the weights of stage Stages[s] (indexed like
	// ProcessDimensions) used when a proposal is missing or unusable.
	Prior [3][6]float64
	// PriorPassRate is every dimension's pass rate on a turn without a
	// valid judgement: with no evidence either way a criterion is as
	// likely to pass as to fail.
	PriorPassRate float64
}

// Defaults returns our default policy: every dimension capped at 0.5, the
// fixed stage table as the prior and a prior pass rate of 0.5.
func (WeightPolicy) Defaults() WeightPolicy {
	return WeightPolicy{Cap: 0.5, Prior: StageWeights, PriorPassRate: 0.5}
}

// caps returns the cap of every dimension, indexed like ProcessDimensions.
func (p WeightPolicy) caps() []float64 {
	out := make([]float64, len(ProcessDimensions))
	for d, dim := range ProcessDimensions {
		out[d] = p.Cap
		if c, ok := p.Caps[dim.Key]; ok {
			out[d] = c
		}
	}
	return out
}

// Validate checks p. The caps must add up to at least 1 (less a rounding
// tolerance, so that six caps of 1/6 pass): otherwise no weights that sum
// to 1 respect them.
func (p WeightPolicy) Validate() error {
	for k := range p.Caps {
		if !slices.ContainsFunc(ProcessDimensions, func(d Dimension) bool { return d.Key == k }) {
			return fmt.Errorf("sotopia: weight cap of unknown process dimension %q", k)
		}
	}
	sum := 0.0
	for d, c := range p.caps() {
		if !(c > 0 && c <= 1) {
			return fmt.Errorf("sotopia: weight cap of %s is %v, want 0 < cap ≤ 1", ProcessDimensions[d].Key, c)
		}
		sum += c
	}
	if sum < 1-1e-9 {
		return fmt.Errorf("sotopia: weight caps add up to %v < 1", sum)
	}
	for s, row := range p.Prior {
		total := 0.0
		for d, w := range row {
			if !(w >= 0) || math.IsInf(w, 0) {
				return fmt.Errorf("sotopia: prior weight of %s in stage %s is %v", ProcessDimensions[d].Key, Stages[s], w)
			}
			total += w
		}
		if total == 0 {
			return fmt.Errorf("sotopia: prior weights of stage %s are all zero", Stages[s])
		}
	}
	if !(p.PriorPassRate >= 0 && p.PriorPassRate <= 1) {
		return fmt.Errorf("sotopia: prior pass rate %v outside 0..1", p.PriorPassRate)
	}
	return nil
}

// SanitizeWeights turns the weights a judge proposed for a turn of stage
// into the weights of the process reward, indexed like ProcessDimensions:
//
//  1. whitelist: keys that are not a process dimension are dropped, and a
//     dimension the proposal leaves out weighs 0;
//  2. reject: a NaN or infinite weight makes the whole proposal unusable;
//  3. clip: w_d = min(max(p_d, 0), 1);
//  4. fallback: if the proposal is unusable or Σ w_d = 0, w = the stage's
//     prior (fellBack is then true);
//  5. normalise: w_d ← w_d / Σ w;
//  6. caps with overflow redistribution: every weight above its cap c_d is
//     cut to c_d, and the mass cut, Σ (w_d − c_d), goes to the dimensions
//     still below their caps in proportion to their weights (equally when
//     those weigh nothing); repeated until no weight exceeds its cap;
//  7. normalise again, so that Σ w_d = 1 to rounding.
//
// The prior goes through steps 5–7 as well, so caps hold for it too. The
// error is for an unknown stage or an invalid policy, never for a bad
// proposal.
func SanitizeWeights(proposed map[string]float64, stage string, p WeightPolicy) (weights []float64, fellBack bool, err error) {
	s := slices.Index(Stages, stage)
	if s < 0 {
		return nil, false, fmt.Errorf("sotopia: stage %q: want one of %v", stage, Stages)
	}
	if err := p.Validate(); err != nil {
		return nil, false, err
	}
	w := make([]float64, len(ProcessDimensions))
	for d, dim := range ProcessDimensions {
		v, ok := proposed[dim.Key]
		if !ok {
			continue
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			clear(w)
			break
		}
		w[d] = min(max(v, 0), 1)
	}
	if sum(w) == 0 {
		copy(w, p.Prior[s][:])
		fellBack = true
	}
	normalize(w)
	capWeights(w, p.caps())
	normalize(w)
	return w, fellBack, nil
}

func sum(w []float64) float64 {
	s := 0.0
	for _, v := range w {
		s += v
	}
	return s
}

func normalize(w []float64) {
	s := sum(w)
	for d := range w {
		w[d] /= s
	}
}

// capWeights cuts every weight to its cap and redistributes the mass cut
// (step 6 of SanitizeWeights). Each round caps at least one more
// dimension, so len(w) rounds suffice.
func capWeights(w, caps []float64) {
	free := make([]bool, len(w))
	for d := range free {
		free[d] = true
	}
	for range len(w) + 1 {
		overflow := 0.0
		for d := range w {
			if free[d] && w[d] > caps[d] {
				overflow += w[d] - caps[d]
				w[d], free[d] = caps[d], false
			}
		}
		if overflow == 0 {
			return
		}
		mass, n := 0.0, 0
		for d := range w {
			if free[d] {
				mass += w[d]
				n++
			}
		}
		if n == 0 {
			// Σ caps ≥ 1 (Validate): nothing is left over but rounding.
			return
		}
		for d := range w {
			switch {
			case !free[d]:
			case mass > 0:
				// Share first: overflow·w_d underflows when w_d is subnormal,
				// and the mass would be lost.
				w[d] += overflow * (w[d] / mass)
			default:
				w[d] += overflow / float64(n)
			}
		}
	}
}
