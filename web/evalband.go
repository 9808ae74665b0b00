package web

import (
	"encoding/json"
	"math"
)

// interval sets e's Lo and Hi from the held-out line's pairings (loop's
// Evaluation cells, each with its own 95% interval): the interval of
// their mean, the pairings taken as independent, so that the dashboard
// can shade how far the held-out reward is from noise. A line without
// cells, or with a cell without its interval, leaves them unset.
func (e *EvalPoint) interval(line []byte) {
	var ev struct {
		Cells []struct {
			Reward *struct {
				Lo, Hi *float64
			} `json:"reward"`
		} `json:"cells"`
	}
	if json.Unmarshal(line, &ev) != nil || len(ev.Cells) == 0 {
		return
	}
	var variance float64
	for _, c := range ev.Cells {
		if c.Reward == nil || c.Reward.Lo == nil || c.Reward.Hi == nil {
			return // a pairing without its interval: none for the mean
		}
		se := (*c.Reward.Hi - *c.Reward.Lo) / (2 * 1.96)
		variance += se * se
	}
	half := 1.96 * math.Sqrt(variance) / float64(len(ev.Cells))
	e.Lo, e.Hi = ptrOf(e.Mean-half), ptrOf(e.Mean+half)
}

func ptrOf(x float64) *float64 { return &x }
