package main

import (
	"errors"
	"os"

	"github.com/omar-selfplay/omar/chart"
	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/loop"
)

// rewardPlot is the picture of a run's reward per role.
const rewardPlot = "reward.svg"

// plotRun redraws reward.svg from the run's metrics.jsonl (nothing before
// the first iteration).
func plotRun(run *loop.Run) error {
	ms, err := loop.ReadMetrics(run.Path(loop.MetricsFile))
	if errors.Is(err, os.ErrNotExist) || err == nil && len(ms) == 0 {
		return nil
	}
	if err != nil {
		return err
	}
	lo, hi := run.Game().RewardRange()
	return os.WriteFile(run.Path(rewardPlot), rewardSVG(run.Game().ID(), ms, lo, hi), 0o644)
}

// rewardSVG draws mean reward per role against iteration, with the
// held-out evaluation's reward per side dashed beside it.
func rewardSVG(title string, ms []loop.Metrics, lo, hi float64) []byte {
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
	add := func(name string, values func(loop.Metrics) map[string]float64, key string, dashed bool) {
		se := chart.Series{Name: name, Dashed: dashed}
		for _, m := range ms {
			if v, ok := values(m)[key]; ok {
				se.Points = append(se.Points, chart.Point{X: float64(m.Iteration), Y: v})
			}
		}
		series = append(series, se)
	}
	for _, role := range engine.SortedKeys(roles) {
		add(role, func(m loop.Metrics) map[string]float64 { return m.Reward }, role, false)
	}
	for _, side := range engine.SortedKeys(sides) {
		add("held-out "+side, func(m loop.Metrics) map[string]float64 { return m.Eval }, side, true)
	}
	return chart.Lines(title+": mean reward per role", "iteration", series, float64(max(len(ms), 2)), lo, hi)
}

// lossSVG draws a loss against optimizer step.
func lossSVG(title string, losses []float64) []byte {
	hi := 0.0
	se := chart.Series{Name: "loss", Points: make([]chart.Point, len(losses))}
	for i, l := range losses {
		se.Points[i] = chart.Point{X: float64(i + 1), Y: l}
		hi = max(hi, l)
	}
	return chart.Lines(title, "optimizer step", []chart.Series{se}, float64(max(len(losses), 2)), 0, hi)
}
