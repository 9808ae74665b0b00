package recipes

import "math"

// minGain is the smallest specialist gain a closure divides by even with
// sampling.delta 0: below it the ratio is rounding over rounding.
const minGain = 1e-9

// gapClosure is (student − base) / (specialist − base), nil where the
// specialist gained less than delta (or nothing): its gain is not told
// from noise, and a share of a loss means nothing.
func gapClosure(base, specialist, student, delta float64) *float64 {
	gain := specialist - base
	if gain < delta || gain <= minGain || !finite(gain) {
		return nil
	}
	c := (student - base) / gain
	return &c
}

// DistillReport is distill-report.json: the environments and the mean gap
// closure over those with a closure, plain and with each environment's
// closure clipped to [0, 1] first (a student past its specialist in one
// environment does not make up for one behind in another). Both are nil
// where no environment has a closure; Closed counts those that do.
type DistillReport struct {
	Envs              []DistillEnvResult `json:"envs"`
	GapClosure        *float64           `json:"gap_closure"`
	ClippedGapClosure *float64           `json:"clipped_gap_closure"`
	Closed            int                `json:"closed"`
}

// NewDistillReport averages rs's closures.
func NewDistillReport(rs []DistillEnvResult) DistillReport {
	r := DistillReport{Envs: rs}
	var plain, clipped []float64
	for _, e := range rs {
		if e.Recovered != nil {
			plain = append(plain, *e.Recovered)
			clipped = append(clipped, *e.Clipped)
		}
	}
	if r.Closed = len(plain); r.Closed > 0 {
		p, c := mean(plain), mean(clipped)
		r.GapClosure, r.ClippedGapClosure = &p, &c
	}
	return r
}

// clip01 is c clipped to [0, 1]; nil stays nil.
func clip01(c *float64) *float64 {
	if c == nil {
		return nil
	}
	v := math.Min(1, math.Max(0, *c))
	return &v
}
