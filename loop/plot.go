package loop

import (
	"errors"
	"math"
	"os"

	"github.com/omar-selfplay/omar/chart"
	"github.com/omar-selfplay/omar/engine"
)

// RewardPlot is the picture of a run's reward per role in its directory.
const RewardPlot = "reward.svg"

// PlotReward redraws the run's reward.svg from its metrics.jsonl (nothing
// before the first iteration).
func (r *Run) PlotReward() error {
	ms, err := ReadMetrics(r.Path(MetricsFile))
	if errors.Is(err, os.ErrNotExist) || err == nil && len(ms) == 0 {
		return nil
	}
	if err != nil {
		return err
	}
	lo, hi := r.Game().RewardRange()
	return os.WriteFile(r.Path(RewardPlot), RewardSVG(r.Game().ID(), ms, lo, hi), 0o644)
}

// RewardSVG draws mean reward per role against iteration, with the
// held-out evaluation's reward per side dashed beside it.
func RewardSVG(title string, ms []Metrics, lo, hi float64) []byte {
	roles, sides := map[string]bool{}, map[string]bool{}
	for _, m := range ms {
		for role := range m.Reward {
			roles[role] = true
		}
		for side := range m.Eval {
			sides[side] = true
		}
	}
	var series []chart.Series
	add := func(name string, values func(Metrics) map[string]float64, key string, dashed bool) {
		se := chart.Series{Name: name, Dashed: dashed}
		for _, m := range ms {
			if v, ok := values(m)[key]; ok {
				se.Points = append(se.Points, chart.Point{X: float64(m.Iteration), Y: v})
			}
		}
		series = append(series, se)
	}
	for _, role := range engine.SortedKeys(roles) {
		add(role, func(m Metrics) map[string]float64 { return m.Reward }, role, false)
	}
	for _, side := range engine.SortedKeys(sides) {
		add("held-out "+side, func(m Metrics) map[string]float64 { return m.Eval }, side, true)
	}
	return chart.Lines(title+": mean reward per role", "iteration", series, float64(max(len(ms), 2)), lo, hi)
}

// LossSVG draws a loss against optimizer step (NaN: a step without a
// recorded loss, left out).
func LossSVG(title string, losses []float64) []byte {
	hi := 0.0
	se := chart.Series{Name: "loss"}
	for i, l := range losses {
		if math.IsNaN(l) {
			continue // not recorded
		}
		se.Points = append(se.Points, chart.Point{X: float64(i + 1), Y: l})
		hi = max(hi, l)
	}
	return chart.Lines(title, "optimizer step", []chart.Series{se}, float64(max(len(losses), 2)), 0, hi)
}
