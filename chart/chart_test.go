package chart

import (
	"strings"
	"testing"
)

func TestLines(t *testing.T) {
	svg := string(Lines("a<b", "step", []Series{
		{Name: "buyer", Points: []Point{{1, .2}, {2, .4}}},
		{Name: "held-out buyer", Points: []Point{{1, .3}, {2, .5}}, Dashed: true},
	}, 2, 0, 1))
	for _, want := range []string{"<svg", "a&lt;b", "buyer", "stroke-dasharray", "</svg>"} {
		if !strings.Contains(svg, want) {
			t.Errorf("svg lacks %q", want)
		}
	}
	if n := strings.Count(svg, "<polyline"); n != 2 {
		t.Errorf("%d lines, want 2", n)
	}
	// Degenerate ranges draw, not divide by zero.
	if s := string(Lines("x", "y", []Series{{Name: "s", Points: []Point{{1, 0}}}}, 1, 0, 0)); strings.Contains(s, "NaN") || strings.Contains(s, "Inf") {
		t.Errorf("degenerate ranges gave %s", s)
	}
}
