package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

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

// rewardSVG draws mean reward per role against iteration.
func rewardSVG(title string, ms []loop.Metrics, lo, hi float64) []byte {
	roleSet := map[string]bool{}
	for _, m := range ms {
		for role := range m.Reward {
			roleSet[role] = true
		}
	}
	roles := make([]string, 0, len(roleSet))
	for role := range roleSet {
		roles = append(roles, role)
	}
	sort.Strings(roles)
	series := make([][]point, len(roles))
	for k, role := range roles {
		for _, m := range ms {
			if v, ok := m.Reward[role]; ok {
				series[k] = append(series[k], point{float64(m.Iteration), v})
			}
		}
	}
	// The held-out evaluation's reward per side, where the run has one.
	names := slices.Clone(roles)
	evalSides := map[string]bool{}
	for _, m := range ms {
		for side := range m.Eval {
			evalSides[side] = true
		}
	}
	for _, side := range engine.SortedKeys(evalSides) {
		var pts []point
		for _, m := range ms {
			if v, ok := m.Eval[side]; ok {
				pts = append(pts, point{float64(m.Iteration), v})
			}
		}
		names, series = append(names, "held-out "+side), append(series, pts)
	}
	return linesSVG(title+": mean reward per role", "iteration", names, series, float64(max(len(ms), 2)), lo, hi)
}

// lossSVG draws a loss against optimizer step.
func lossSVG(title string, losses []float64) []byte {
	hi := 0.0
	pts := make([]point, len(losses))
	for i, l := range losses {
		pts[i] = point{float64(i + 1), l}
		hi = max(hi, l)
	}
	if hi == 0 {
		hi = 1
	}
	return linesSVG(title, "optimizer step", []string{"loss"}, [][]point{pts}, float64(max(len(losses), 2)), 0, hi)
}

type point struct{ x, y float64 }

// linesSVG draws named series of points (x from 1 to xMax) in [lo, hi].
func linesSVG(title, xLabel string, names []string, series [][]point, xMax, lo, hi float64) []byte {
	const W, H, L, R, T, B = 640.0, 400.0, 60.0, 150.0, 40.0, 50.0
	x := func(v float64) float64 { return L + (W-L-R)*(v-1)/(xMax-1) }
	y := func(v float64) float64 { return H - B - (H-T-B)*(v-lo)/(hi-lo) }
	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g" font-family="sans-serif" font-size="12">`+"\n", W, H, W, H)
	fmt.Fprintf(&s, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&s, `<text x="%g" y="20" font-size="14">%s</text>`+"\n", L, xmlEscape(title))
	fmt.Fprintf(&s, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/>`+"\n", L, H-B, W-R, H-B)
	fmt.Fprintf(&s, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/>`+"\n", L, T, L, H-B)
	for k := 0; k <= 4; k++ {
		v := lo + (hi-lo)*float64(k)/4
		fmt.Fprintf(&s, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#ddd"/>`+"\n", L, y(v), W-R, y(v))
		fmt.Fprintf(&s, `<text x="%g" y="%.1f" text-anchor="end">%.2f</text>`+"\n", L-6, y(v)+4, v)
	}
	for _, v := range []float64{1, xMax} {
		fmt.Fprintf(&s, `<text x="%.1f" y="%g" text-anchor="middle">%g</text>`+"\n", x(v), H-B+16, v)
	}
	fmt.Fprintf(&s, `<text x="%g" y="%g" text-anchor="middle">%s</text>`+"\n", (L+W-R)/2, H-12, xmlEscape(xLabel))
	colors := []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}
	for k, name := range names {
		c := colors[k%len(colors)]
		pts := make([]string, len(series[k]))
		for i, p := range series[k] {
			pts[i] = fmt.Sprintf("%.1f,%.1f", x(p.x), y(p.y))
		}
		dash := ""
		if strings.HasPrefix(name, "held-out ") {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(&s, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", c, dash, strings.Join(pts, " "))
		fmt.Fprintf(&s, `<line x1="%g" y1="%d" x2="%g" y2="%d" stroke="%s" stroke-width="2"/>`+"\n", W-R+10, int(T)+18*k, W-R+30, int(T)+18*k, c)
		fmt.Fprintf(&s, `<text x="%g" y="%d">%s</text>`+"\n", W-R+36, int(T)+18*k+4, xmlEscape(name))
	}
	s.WriteString("</svg>\n")
	return []byte(s.String())
}

var xmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

func xmlEscape(s string) string { return xmlEscaper.Replace(s) }
