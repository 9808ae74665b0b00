package arena

import (
	"fmt"
	"strings"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/selfplay"
)

// ToMResult is a player's theory-of-mind trace scores in one episode
// (selfplay.ToMScores), the mean over its seats that measured each; a nil
// score was not measured (no trace, or nothing to score it against).
type ToMResult struct {
	// InferAccuracy is the pairwise order agreement of the INFER line
	// (selfplay.InferAccuracy), InferExact its exact-order companion
	// (selfplay.InferExact).
	InferAccuracy *float64 `json:"infer_accuracy,omitempty"`
	InferExact    *float64 `json:"infer_exact,omitempty"`
	// AnticipateAccuracy and AnticipateExact are the ANTICIPATE line's
	// graded and exact next-action accuracy (selfplay.AnticipateScore)
	// over AnticipateTurns scored turns, AnticipateUnparsed of which read
	// as no move.
	AnticipateAccuracy *float64 `json:"anticipate_accuracy,omitempty"`
	AnticipateExact    *float64 `json:"anticipate_exact,omitempty"`
	AnticipateTurns    int      `json:"anticipate_turns,omitempty"`
	AnticipateUnparsed int      `json:"anticipate_unparsed,omitempty"`
}

// newToMResult reads the scores of side's seats; nil when none has any.
func newToMResult(rec *engine.Record, side Side, scores map[int]selfplay.ToMScores) *ToMResult {
	var infer, exact, ant, antExact []float64
	var r ToMResult
	for i, s := range rec.Seats {
		sc, ok := scores[i]
		if !ok || !side.Has(s.Seat) {
			continue
		}
		infer, exact = appendScore(infer, sc.Infer), appendScore(exact, sc.InferExact)
		ant, antExact = appendScore(ant, sc.Anticipate), appendScore(antExact, sc.AnticipateExact)
		r.AnticipateTurns += sc.AnticipateTurns
		r.AnticipateUnparsed += sc.AnticipateUnparsed
	}
	r.InferAccuracy, r.InferExact = meanScore(infer), meanScore(exact)
	r.AnticipateAccuracy, r.AnticipateExact = meanScore(ant), meanScore(antExact)
	if r == (ToMResult{}) {
		return nil
	}
	return &r
}

func appendScore(xs []float64, p *float64) []float64 {
	if p == nil {
		return xs
	}
	return append(xs, *p)
}

func meanScore(xs []float64) *float64 {
	if len(xs) == 0 {
		return nil
	}
	m := meanOf(xs)
	return &m
}

// ToMCell is a pairing's theory-of-mind trace scores: per score the mean
// over the episodes that measured it, with its bootstrap interval.
type ToMCell struct {
	InferAccuracy      *Estimate `json:"infer_accuracy,omitempty"`
	InferExact         *Estimate `json:"infer_exact,omitempty"`
	AnticipateAccuracy *Estimate `json:"anticipate_accuracy,omitempty"`
	AnticipateExact    *Estimate `json:"anticipate_exact,omitempty"`
	// AnticipateTurns and AnticipateUnparsed are summed over episodes.
	AnticipateTurns    int `json:"anticipate_turns,omitempty"`
	AnticipateUnparsed int `json:"anticipate_unparsed,omitempty"`
}

// tomCell summarises rs' scores; nil when no episode has any.
func tomCell(b bootstrap, tag string, rs []Result) *ToMCell {
	var c ToMCell
	var infer, exact, ant, antExact []float64
	seen := false
	for _, r := range rs {
		if r.ToM == nil {
			continue
		}
		seen = true
		infer, exact = appendScore(infer, r.ToM.InferAccuracy), appendScore(exact, r.ToM.InferExact)
		ant, antExact = appendScore(ant, r.ToM.AnticipateAccuracy), appendScore(antExact, r.ToM.AnticipateExact)
		c.AnticipateTurns += r.ToM.AnticipateTurns
		c.AnticipateUnparsed += r.ToM.AnticipateUnparsed
	}
	if !seen {
		return nil
	}
	est := func(name string, xs []float64) *Estimate {
		if len(xs) == 0 {
			return nil
		}
		e := b.mean(tag+"\x00tom\x00"+name, xs)
		return &e
	}
	c.InferAccuracy, c.InferExact = est("infer", infer), est("infer_exact", exact)
	c.AnticipateAccuracy, c.AnticipateExact = est("anticipate", ant), est("anticipate_exact", antExact)
	return &c
}

// tom writes the theory-of-mind trace scores, where any pairing has them.
func (m *markdown) tom(b *strings.Builder) {
	var rows []string
	for _, s := range m.slots {
		for _, p := range m.r.Players {
			t := m.cells[[4]string{s.env, s.side, s.opponent, p}].ToM
			if t == nil {
				continue
			}
			rows = append(rows, fmt.Sprintf("| %s | %s | `%s` | `%s` | %s | %s | %s | %s | %d | %d |\n", s.env, s.side, s.opponent, p,
				estOrDash(t.InferAccuracy), estOrDash(t.InferExact), estOrDash(t.AnticipateAccuracy), estOrDash(t.AnticipateExact),
				t.AnticipateTurns, t.AnticipateUnparsed))
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Theory of mind (%d%% CI)\n\n", m.pct)
	b.WriteString("INFER: pairwise order agreement with the counterpart's preferences, and exact order; ANTICIPATE: next-action accuracy, graded and exact, over the turns the counterpart answered (unparsed: lines that read as no move, scored 0). See docs/negotiation.md.\n\n")
	b.WriteString("| env | side | opponent | player | infer | infer exact | anticipate | anticipate exact | turns | unparsed |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		b.WriteString(r)
	}
}

func estOrDash(e *Estimate) string {
	if e == nil {
		return "—"
	}
	return e.String()
}
