package selfplay

import (
	"sort"
	"strings"

	"github.com/omar-selfplay/omar/engine"
)

// ToMScores are one seat's theory-of-mind trace scores in one episode
// (two-seat games under Options.Trace "tom"); a nil score was not
// measured.
type ToMScores struct {
	// Infer is the mean InferAccuracy over the seat's traced turns (a
	// turn without an INFER line scores 0), InferExact the mean
	// InferExact; both need a scenario that knows the counterpart's
	// preferences, InferExact one with an order of issues to name.
	Infer      *float64
	InferExact *float64
	// Anticipate and AnticipateExact are the seat's next-action accuracy
	// (AnticipateScore's graded and exact scores) over AnticipateTurns,
	// its turns the counterpart answered with an accepted move; turns
	// whose ANTICIPATE line is missing or reads as no move score 0 and
	// are counted in AnticipateUnparsed.
	Anticipate         *float64
	AnticipateExact    *float64
	AnticipateTurns    int
	AnticipateUnparsed int
}

// tomScores scores seat ms's traced replies against rec. They are
// measured with the INFER reward off too, so runs with and without it
// compare.
func (r *Runner) tomScores(rec *engine.Record, ms *modelSeat) (ToMScores, bool) {
	if r.opts.Trace != TraceToM || len(rec.Seats) != 2 {
		return ToMScores{}, false
	}
	turns := ms.stream.traced
	other := 1 - ms.seat.Index
	var s ToMScores
	scale := 0.0
	if sc, ok := rec.Scenario.(engine.PreferenceScenario); ok {
		if p, ok := sc.Preferences(other); ok {
			texts := make([]string, len(turns))
			for i, t := range turns {
				texts[i] = t.text
			}
			acc := inferAccuracy(texts, p)
			s.Infer = &acc
			if exact, ok := inferExact(texts, p); ok {
				s.InferExact = &exact
			}
			scale = p.Scale
		}
		if p, ok := sc.Preferences(ms.seat.Index); ok && scale <= 0 {
			scale = p.Scale
		}
	}
	anticipate(&s, turns, nextMoves(rec.Events, ms.seat.Index, other), scale)
	return s, true
}

// inferExact is a seat's mean InferExact over its traced turns (texts); ok
// is false where p has no order of issues to name.
func inferExact(texts []string, p engine.Preferences) (float64, bool) {
	if _, ok := InferExact("", p); !ok || len(texts) == 0 {
		return 0, false
	}
	sum := 0.0
	for _, t := range texts {
		if line, ok := inferLine(t); ok {
			v, _ := InferExact(line, p)
			sum += v
		}
	}
	return sum / float64(len(texts)), true
}

// anticipate fills s's next-action scores: each turn is scored against
// the counterpart's move that next[its notification] names.
func anticipate(s *ToMScores, turns []turnMeta, next map[string]string, scale float64) {
	var exact, graded float64
	for _, t := range turns {
		actual, ok := next[t.notification.ID]
		if !ok {
			continue
		}
		s.AnticipateTurns++
		line, has := traceField(t.text, "ANTICIPATE:")
		e, g, parsed := AnticipateScore(line, actual, scale)
		if !has || !parsed {
			s.AnticipateUnparsed++
			continue
		}
		exact += e
		graded += g
	}
	if s.AnticipateTurns > 0 {
		n := float64(s.AnticipateTurns)
		exact, graded = exact/n, graded/n
		s.AnticipateExact, s.Anticipate = &exact, &graded
	}
}

// nextMoves maps each of seat's notifications to the text of the first
// move other made after it was settled (its last event: the accepted
// reply, or the default after the retries), a move being an action the
// engine accepted. A default of other's is not a move it chose and is
// skipped.
func nextMoves(events []engine.Event, seat, other int) map[string]string {
	last := map[string]int{}
	var order []string
	for i, e := range events {
		if e.Seat == seat && e.NotificationID != "" {
			if _, seen := last[e.NotificationID]; !seen {
				order = append(order, e.NotificationID)
			}
			last[e.NotificationID] = i
		}
	}
	type move struct {
		at   int
		text string
	}
	var moves []move
	acted := map[string]string{}
	for i, e := range events {
		if e.Seat != other {
			continue
		}
		switch e.Kind {
		case engine.KindAction:
			acted[e.NotificationID] = e.Text
		case engine.KindAck:
			moves = append(moves, move{i, acted[e.NotificationID]})
		}
	}
	out := map[string]string{}
	for _, id := range order {
		if k := sort.Search(len(moves), func(k int) bool { return moves[k].at > last[id] }); k < len(moves) {
			out[id] = moves[k].text
		}
	}
	return out
}

// traceField returns the text after key on a traced reply's first line
// that starts with it.
func traceField(reply, key string) (string, bool) {
	for line := range strings.SplitSeq(reply, "\n") {
		if s, ok := strings.CutPrefix(strings.TrimSpace(line), key); ok {
			return strings.TrimSpace(s), true
		}
	}
	return "", false
}
