package arena

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Report files WriteFiles writes.
const (
	MarkdownFile = "report.md"
	JSONFile     = "report.json"
	SVGFile      = "reward.svg"
)

// WriteFiles writes the report as Markdown, JSON and an SVG bar chart into
// dir.
func (r *Report) WriteFiles(dir string) error {
	var md strings.Builder
	if err := r.Markdown(&md); err != nil {
		return err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{
		MarkdownFile: []byte(md.String()), JSONFile: append(js, '\n'), SVGFile: r.SVG(),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (e Estimate) String() string {
	if e.N == 0 {
		return "—"
	}
	return fmt.Sprintf("%.3f [%.3f, %.3f]", e.Mean, e.Lo, e.Hi)
}

// signed formats a difference.
func (e Estimate) signed() string {
	if e.N == 0 {
		return "—"
	}
	return fmt.Sprintf("%+.3f [%+.3f, %+.3f]", e.Mean, e.Lo, e.Hi)
}

// Markdown writes the report's tables.
func (r *Report) Markdown(w io.Writer) error {
	m := &markdown{r: r, pct: int(math.Round(r.Confidence * 100)), cells: map[[4]string]Cell{}, slots: r.slots()}
	for _, c := range r.Cells {
		m.cells[[4]string{c.Env, c.Side, c.Opponent, c.Player}] = c
	}
	for _, section := range []func(*strings.Builder){m.header, m.means, m.differences, m.ratings, m.transfer, m.domains, m.outcomes, m.tom, m.behaviour} {
		section(&m.b)
	}
	_, err := io.WriteString(w, m.b.String())
	return err
}

// markdown renders a report's sections.
type markdown struct {
	r     *Report
	b     strings.Builder
	pct   int
	cells map[[4]string]Cell
	slots []slotKey
}

// header writes the title, the conditions and the environments.
func (m *markdown) header(b *strings.Builder) {
	fmt.Fprintf(b, "# Evaluation\n\n")
	fmt.Fprintf(b, "Seed %d, %d held-out episodes per pairing, %d%% bootstrap intervals (%d resamples), reference player `%s`.\n\n",
		m.r.Seed, m.r.Episodes, m.pct, m.r.Bootstrap, m.r.Reference)
	for _, e := range m.r.Envs {
		set := "held-out seeds"
		if e.Curated {
			set = "curated scenarios"
		}
		fmt.Fprintf(b, "- %s (`%s`, %s; sides %s; reward range [%g, %g])\n", e.Name, e.ID, set, strings.Join(e.Sides, ", "), e.RewardLo, e.RewardHi)
	}
}

// means writes every cell's mean reward.
func (m *markdown) means(b *strings.Builder) {
	fmt.Fprintf(b, "\n## Mean reward (%d%% CI)\n\n", m.pct)
	b.WriteString("| env | side | opponent | " + strings.Join(code(m.r.Players), " | ") + " |\n")
	b.WriteString("|---|---|---|" + strings.Repeat("---|", len(m.r.Players)) + "\n")
	for _, s := range m.slots {
		fmt.Fprintf(b, "| %s | %s | `%s` |", s.env, s.side, s.opponent)
		for _, p := range m.r.Players {
			fmt.Fprintf(b, " %s |", m.cells[[4]string{s.env, s.side, s.opponent, p}].Reward)
		}
		b.WriteString("\n")
	}
}

// differences writes the paired differences, per slot and over all.
func (m *markdown) differences(b *strings.Builder) {
	if len(m.r.Differences) > 0 {
		var pairs [][2]string
		for _, d := range m.r.Differences {
			if p := [2]string{d.Player, d.Than}; !slices.Contains(pairs, p) {
				pairs = append(pairs, p)
			}
		}
		diffs := map[[5]string]Estimate{}
		for _, d := range m.r.Differences {
			diffs[[5]string{d.Env, d.Side, d.Opponent, d.Player, d.Than}] = d.Diff
		}
		fmt.Fprintf(b, "\n## Paired differences (%d%% CI)\n\n", m.pct)
		b.WriteString("| env | side | opponent |")
		for _, p := range pairs {
			fmt.Fprintf(b, " `%s` − `%s` |", p[0], p[1])
		}
		b.WriteString("\n|---|---|---|" + strings.Repeat("---|", len(pairs)) + "\n")
		rows := append(slices.Clone(m.slots), slotKey{})
		for _, s := range rows {
			if s.env == "" {
				b.WriteString("| **all** | | |")
			} else {
				fmt.Fprintf(b, "| %s | %s | `%s` |", s.env, s.side, s.opponent)
			}
			for _, p := range pairs {
				fmt.Fprintf(b, " %s |", diffs[[5]string{s.env, s.side, s.opponent, p[0], p[1]}].signed())
			}
			b.WriteString("\n")
		}
	}
}

// ratings writes the Bradley–Terry ratings.
func (m *markdown) ratings(b *strings.Builder) {
	if len(m.r.Ratings) > 0 {
		fmt.Fprintf(b, "\n## Ratings (Bradley–Terry on paired episodes, Elo scale, %d%% CI)\n\n", m.pct)
		b.WriteString("| player | rating | wins | ties | losses |\n|---|---|---|---|---|\n")
		for _, rt := range m.r.Ratings {
			fmt.Fprintf(b, "| `%s` | %.0f [%.0f, %.0f] | %d | %d | %d |\n", rt.Player, rt.Elo.Mean, rt.Elo.Lo, rt.Elo.Hi, rt.Wins, rt.Ties, rt.Losses)
		}
	}
}

// transfer writes the transfer matrix.
func (m *markdown) transfer(b *strings.Builder) {
	if t := m.r.Transfer; t != nil {
		fmt.Fprintf(b, "\n## Transfer (paired difference to `%s` per environment, over its sides and opponents)\n\n", m.r.Reference)
		b.WriteString("| player | " + strings.Join(t.Envs, " | ") + " |\n|---|" + strings.Repeat("---|", len(t.Envs)) + "\n")
		for _, row := range t.Rows {
			label := "`" + row.Player + "`"
			if !row.Difference {
				label += " (mean reward)"
			}
			fmt.Fprintf(b, "| %s |", label)
			for _, c := range row.Cells {
				if row.Difference {
					fmt.Fprintf(b, " %s |", c.signed())
				} else {
					fmt.Fprintf(b, " %s |", c)
				}
			}
			b.WriteString("\n")
		}
	}
}

// outcomes writes each cell's outcome, win, invalid and defaulted rates.
func (m *markdown) outcomes(b *strings.Builder) {
	b.WriteString("\n## Outcomes\n\nRates per episode; invalid and defaulted per decision of the player's seats.\n\n")
	b.WriteString("| env | side | opponent | player | outcomes | win | invalid | defaulted |\n|---|---|---|---|---|---|---|---|\n")
	for _, s := range m.slots {
		for _, p := range m.r.Players {
			c := m.cells[[4]string{s.env, s.side, s.opponent, p}]
			win := "—"
			if c.Win != nil {
				win = c.Win.String()
			}
			fmt.Fprintf(b, "| %s | %s | `%s` | `%s` | %s | %s | %.3f | %.3f |\n", s.env, s.side, s.opponent, p, rates(c.Results), win, c.InvalidRate, c.DefaultedRate)
		}
	}
}

// behaviour writes each environment's behaviour metrics.
func (m *markdown) behaviour(b *strings.Builder) {
	for _, e := range m.r.Envs {
		names := map[string]bool{}
		for _, c := range m.r.Cells {
			if c.Env == e.Name {
				for k := range ownMetrics(c.Metrics, c.Side, e.Sides) {
					names[k] = true
				}
			}
		}
		if len(names) == 0 {
			continue
		}
		cols := make([]string, 0, len(names))
		for k := range names {
			cols = append(cols, k)
		}
		sort.Strings(cols)
		fmt.Fprintf(b, "\n## Behaviour: %s\n\nMeans of the game's metrics; per-side metrics are the player's own side's.\n\n", e.Name)
		b.WriteString("| side | opponent | player | " + strings.Join(cols, " | ") + " |\n|---|---|---|" + strings.Repeat("---|", len(cols)) + "\n")
		for _, s := range m.slots {
			if s.env != e.Name {
				continue
			}
			for _, p := range m.r.Players {
				c := m.cells[[4]string{s.env, s.side, s.opponent, p}]
				m := ownMetrics(c.Metrics, c.Side, e.Sides)
				fmt.Fprintf(b, "| %s | `%s` | `%s` |", s.side, s.opponent, p)
				for _, k := range cols {
					if v, ok := m[k]; ok {
						fmt.Fprintf(b, " %.3f |", v)
					} else {
						b.WriteString(" — |")
					}
				}
				b.WriteString("\n")
			}
		}
	}
}

func code(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "`" + n + "`"
	}
	return out
}

// slots lists the report's (environment, side, opponent) in order.
func (r *Report) slots() []slotKey {
	var out []slotKey
	for _, e := range r.Envs {
		for _, s := range e.Sides {
			for _, q := range r.Opponents {
				out = append(out, slotKey{e.Name, s, q})
			}
		}
	}
	return out
}

func rates(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// ownMetrics returns the metrics of side's player: those naming side
// ("opening_buyer", "agent_1/goal") by their bare name, and those naming
// no side of the game. The player's reward is its own column already.
func ownMetrics(m map[string]float64, side string, sides []string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		bare, named := k, ""
		for _, s := range sides {
			switch {
			case strings.HasSuffix(k, "_"+s):
				bare, named = strings.TrimSuffix(k, "_"+s), s
			case strings.HasPrefix(k, s+"/"):
				bare, named = strings.TrimPrefix(k, s+"/"), s
			}
		}
		if named != "" && named != side || bare == "reward" {
			continue
		}
		out[bare] = v
	}
	return out
}

// SVG draws every pairing's mean reward as a horizontal bar per player,
// with its confidence interval as a whisker.
func (r *Report) SVG() []byte {
	const W, L, R, T, barH, gap = 800.0, 340.0, 30.0, 60.0, 12.0, 10.0
	lo, hi := 0.0, 1.0
	for i, e := range r.Envs {
		if i == 0 {
			lo, hi = e.RewardLo, e.RewardHi
		}
		lo, hi = min(lo, e.RewardLo), max(hi, e.RewardHi)
	}
	if hi <= lo {
		hi = lo + 1
	}
	slots := r.slots()
	groupH := barH*float64(len(r.Players)) + gap
	H := T + groupH*float64(len(slots)) + 40
	x := func(v float64) float64 { return L + (W-L-R)*(math.Max(lo, math.Min(hi, v))-lo)/(hi-lo) }
	cells := map[[4]string]Cell{}
	for _, c := range r.Cells {
		cells[[4]string{c.Env, c.Side, c.Opponent, c.Player}] = c
	}
	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g" font-family="sans-serif" font-size="12">`+"\n", W, H, W, H)
	fmt.Fprintf(&s, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&s, `<text x="10" y="20" font-size="14">mean reward per pairing, %d%% CI (%d episodes each)</text>`+"\n", int(math.Round(r.Confidence*100)), r.Episodes)
	colors := []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}
	lx := 10.0
	for k, p := range r.Players {
		c := colors[k%len(colors)]
		fmt.Fprintf(&s, `<rect x="%.1f" y="30" width="12" height="12" fill="%s"/>`+"\n", lx, c)
		fmt.Fprintf(&s, `<text x="%.1f" y="40">%s</text>`+"\n", lx+16, xmlEscape(p))
		lx += 16 + 7*float64(len(p)) + 20
	}
	bottom := H - 40
	for k := 0; k <= 4; k++ {
		v := lo + (hi-lo)*float64(k)/4
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="#ddd"/>`+"\n", x(v), T-4, x(v), bottom)
		fmt.Fprintf(&s, `<text x="%.1f" y="%g" text-anchor="middle">%.2f</text>`+"\n", x(v), bottom+16, v)
	}
	if lo < 0 && hi > 0 {
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="black"/>`+"\n", x(0), T-4, x(0), bottom)
	} else {
		fmt.Fprintf(&s, `<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="black"/>`+"\n", L, T-4, L, bottom)
	}
	base := math.Max(lo, math.Min(hi, 0))
	for g, sl := range slots {
		y0 := T + groupH*float64(g)
		fmt.Fprintf(&s, `<text x="%g" y="%.1f" text-anchor="end">%s</text>`+"\n", L-8, y0+groupH/2, xmlEscape(sl.env+" · "+sl.side+" · vs "+sl.opponent))
		for k, p := range r.Players {
			c := cells[[4]string{sl.env, sl.side, sl.opponent, p}]
			if c.Reward.N == 0 {
				continue
			}
			y := y0 + barH*float64(k)
			x0, x1 := x(math.Min(base, c.Reward.Mean)), x(math.Max(base, c.Reward.Mean))
			fmt.Fprintf(&s, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %s</title></rect>`+"\n",
				x0, y+1, math.Max(x1-x0, 0.5), barH-2, colors[k%len(colors)], xmlEscape(p), c.Reward)
			ym := y + barH/2
			fmt.Fprintf(&s, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x(c.Reward.Lo), ym, x(c.Reward.Hi), ym)
			for _, v := range []float64{c.Reward.Lo, c.Reward.Hi} {
				fmt.Fprintf(&s, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x(v), ym-3, x(v), ym+3)
			}
		}
	}
	s.WriteString("</svg>\n")
	return []byte(s.String())
}

var xmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

func xmlEscape(s string) string { return xmlEscaper.Replace(s) }
