// Package chart draws the line charts of omar's reports as standalone SVG
// (reward per role against iteration, a loss curve): no dependencies, the
// same input gives the same bytes.
package chart

import (
	"fmt"
	"strings"
)

// Point is one (x, y) of a series.
type Point struct{ X, Y float64 }

// Series is one line of a chart.
type Series struct {
	Name   string
	Points []Point
	// Dashed draws the line dashed (e.g. a held-out measure beside the
	// training one).
	Dashed bool
	// Marks draws a dot at each point (a series measured now and then).
	Marks bool
}

// Lines draws series against x in [xMin, xMax] and y in [lo, hi].
func Lines(title, xLabel string, series []Series, xMin, xMax, lo, hi float64) []byte {
	const W, H, L, R, T, B = 640.0, 400.0, 60.0, 150.0, 40.0, 50.0
	if xMax <= xMin {
		xMax = xMin + 1
	}
	if hi <= lo {
		hi = lo + 1
	}
	x := func(v float64) float64 { return L + (W-L-R)*(v-xMin)/(xMax-xMin) }
	y := func(v float64) float64 { return H - B - (H-T-B)*(v-lo)/(hi-lo) }
	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g" font-family="sans-serif" font-size="12">`+"\n", W, H, W, H)
	fmt.Fprintf(&s, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&s, `<text x="%g" y="20" font-size="14">%s</text>`+"\n", L, Escape(title))
	fmt.Fprintf(&s, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/>`+"\n", L, H-B, W-R, H-B)
	fmt.Fprintf(&s, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/>`+"\n", L, T, L, H-B)
	for k := 0; k <= 4; k++ {
		v := lo + (hi-lo)*float64(k)/4
		fmt.Fprintf(&s, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#ddd"/>`+"\n", L, y(v), W-R, y(v))
		fmt.Fprintf(&s, `<text x="%g" y="%.1f" text-anchor="end">%.2f</text>`+"\n", L-6, y(v)+4, v)
	}
	for _, v := range []float64{xMin, xMax} {
		fmt.Fprintf(&s, `<text x="%.1f" y="%g" text-anchor="middle">%g</text>`+"\n", x(v), H-B+16, v)
	}
	fmt.Fprintf(&s, `<text x="%g" y="%g" text-anchor="middle">%s</text>`+"\n", (L+W-R)/2, H-12, Escape(xLabel))
	for k, se := range series {
		c := colors[k%len(colors)]
		pts := make([]string, len(se.Points))
		for i, p := range se.Points {
			pts[i] = fmt.Sprintf("%.1f,%.1f", x(p.X), y(p.Y))
		}
		dash := ""
		if se.Dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(&s, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", c, dash, strings.Join(pts, " "))
		if se.Marks {
			for _, p := range se.Points {
				fmt.Fprintf(&s, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", x(p.X), y(p.Y), c)
			}
		}
		fmt.Fprintf(&s, `<line x1="%g" y1="%d" x2="%g" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", W-R+10, int(T)+18*k, W-R+30, int(T)+18*k, c, dash)
		fmt.Fprintf(&s, `<text x="%g" y="%d">%s</text>`+"\n", W-R+36, int(T)+18*k+4, Escape(se.Name))
	}
	s.WriteString("</svg>\n")
	return []byte(s.String())
}

var colors = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}

var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

// Escape makes text safe inside SVG (XML) text and attributes.
func Escape(text string) string { return escaper.Replace(text) }
