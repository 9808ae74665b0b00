package loop

import (
	"strings"
	"testing"
)

func TestRewardSVG(t *testing.T) {
	ms := []Metrics{
		{Iteration: 1, Reward: map[string]float64{"buyer": .2, "seller": .5}},
		{Iteration: 2, Reward: map[string]float64{"buyer": .4, "seller": .45}, Eval: map[string]float64{"buyer": .3}},
	}
	svg := string(RewardSVG("a<b", ms, 0, 1))
	for _, want := range []string{"<svg", "buyer", "seller", "held-out buyer", "a&lt;b", "polyline"} {
		if !strings.Contains(svg, want) {
			t.Errorf("svg lacks %q", want)
		}
	}
	if got := strings.Count(svg, "<polyline"); got != 3 {
		t.Errorf("got %d lines, want 2 roles and 1 held-out side", got)
	}
}

func TestLossSVG(t *testing.T) {
	svg := string(LossSVG("loss", []float64{3, 2, 1}))
	if !strings.Contains(svg, "optimizer step") || strings.Count(svg, "<polyline") != 1 {
		t.Errorf("got %s, want one loss line against optimizer step", svg)
	}
}
