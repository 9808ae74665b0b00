package loop

import (
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/runfiles"
)

func TestRewardSVG(t *testing.T) {
	ms := []runfiles.Metrics{
		{Iteration: 1, Reward: map[string]float64{"buyer": .2, "seller": .5}},
		{Iteration: 2, Reward: map[string]float64{"buyer": .4, "seller": .45}, Eval: map[string]float64{"buyer": .3}},
	}
	evals := []Evaluation{{Iteration: 0, Reward: map[string]float64{"buyer": .25}}, {Iteration: 2, Reward: map[string]float64{"buyer": .3}}}
	svg := string(RewardSVG("a<b", ms, evals, 0, 1))
	for _, want := range []string{"<svg", "buyer", "seller", "held-out buyer", "a&lt;b", "polyline"} {
		if !strings.Contains(svg, want) {
			t.Errorf("svg lacks %q", want)
		}
	}
	if got := strings.Count(svg, "<polyline"); got != 3 {
		t.Errorf("got %d lines, want 2 roles and 1 held-out side", got)
	}
	// The held-out line starts at the evaluation before the first
	// iteration, at the axis's left end, one dot per evaluation.
	if got := strings.Count(svg, "<circle"); got != 2 || !strings.Contains(svg, `>0</text>`) {
		t.Errorf("%d held-out dots, want 2 and the x axis from 0:\n%s", got, svg)
	}
}
