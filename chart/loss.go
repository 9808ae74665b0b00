package chart

import "math"

// Loss draws a loss against optimizer step (NaN: a step without a
// recorded loss, left out).
func Loss(title string, losses []float64) []byte {
	hi := 0.0
	se := Series{Name: "loss"}
	for i, l := range losses {
		if math.IsNaN(l) {
			continue // not recorded
		}
		se.Points = append(se.Points, Point{X: float64(i + 1), Y: l})
		hi = max(hi, l)
	}
	return Lines(title, "optimizer step", []Series{se}, 1, float64(max(len(losses), 2)), 0, hi)
}
