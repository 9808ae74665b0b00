package chart

import (
	"math"
	"strings"
	"testing"
)

func TestLines(t *testing.T) {
	svg := string(Lines("a<b", "step", []Series{
		{Name: "buyer", Points: []Point{{1, .2}, {2, .4}}},
		{Name: "held-out buyer", Points: []Point{{0, .3}, {2, .5}}, Dashed: true, Marks: true},
	}, 0, 2, 0, 1))
	for _, want := range []string{"<svg", "a&lt;b", "buyer", "stroke-dasharray", "</svg>"} {
		if !strings.Contains(svg, want) {
			t.Errorf("svg lacks %q", want)
		}
	}
	if n := strings.Count(svg, "<polyline"); n != 2 {
		t.Errorf("%d lines, want 2", n)
	}
	if n := strings.Count(svg, "<circle"); n != 2 {
		t.Errorf("%d dots, want the marked series' 2", n)
	}
	if !strings.Contains(svg, `points="60.0,`) {
		t.Errorf("the held-out series' first point (x = 0) is not at the axis's left end:\n%s", svg)
	}
	// Degenerate ranges draw, not divide by zero.
	if s := string(Lines("x", "y", []Series{{Name: "s", Points: []Point{{1, 0}}}}, 1, 1, 0, 0)); strings.Contains(s, "NaN") || strings.Contains(s, "Inf") {
		t.Errorf("degenerate ranges gave %s", s)
	}
}

func TestLoss(t *testing.T) {
	svg := string(Loss("loss", []float64{3, math.NaN(), 1}))
	if !strings.Contains(svg, "optimizer step") || strings.Count(svg, "<polyline") != 1 {
		t.Errorf("got %s, want one loss line against optimizer step", svg)
	}
}
