package loop

import (
	"errors"
	"os"

	"github.com/omar-selfplay/omar/chart"
	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/runfiles"
)

// PlotReward redraws the run's reward.svg from its metrics.jsonl and
// eval.jsonl (nothing before the first iteration).
func (r *Run) PlotReward() error {
	ms, err := runfiles.ReadMetrics(r.Path(runfiles.MetricsFile))
	if errors.Is(err, os.ErrNotExist) || err == nil && len(ms) == 0 {
		return nil
	}
	if err != nil {
		return err
	}
	evals, err := ReadEvaluations(r.Path(runfiles.EvalFile))
	if err != nil {
		return err
	}
	lo, hi := r.Game().RewardRange()
	return os.WriteFile(r.Path(runfiles.RewardPlot), RewardSVG(r.Game().ID(), ms, evals, lo, hi), 0o644)
}

// RewardSVG draws mean reward per role against iteration, with the
// held-out evaluations' reward per side dashed beside it, from the one
// before the first iteration (x = 0) on.
func RewardSVG(title string, ms []runfiles.Metrics, evals []Evaluation, lo, hi float64) []byte {
	roles, sides := map[string]bool{}, map[string]bool{}
	for _, m := range ms {
		for role := range m.Reward {
			roles[role] = true
		}
	}
	xMin, xMax := 1.0, float64(max(len(ms), 2))
	for _, e := range evals {
		for side := range e.Reward {
			sides[side] = true
		}
		xMin = min(xMin, float64(e.Iteration))
	}
	var series []chart.Series
	for _, role := range engine.SortedKeys(roles) {
		se := chart.Series{Name: role}
		for _, m := range ms {
			if v, ok := m.Reward[role]; ok {
				se.Points = append(se.Points, chart.Point{X: float64(m.Iteration), Y: v})
			}
		}
		series = append(series, se)
	}
	for _, side := range engine.SortedKeys(sides) {
		se := chart.Series{Name: "held-out " + side, Dashed: true, Marks: true}
		for _, e := range evals {
			if v, ok := e.Reward[side]; ok {
				se.Points = append(se.Points, chart.Point{X: float64(e.Iteration), Y: v})
			}
		}
		series = append(series, se)
	}
	return chart.Lines(title+": mean reward per role", "iteration", series, xMin, xMax, lo, hi)
}
