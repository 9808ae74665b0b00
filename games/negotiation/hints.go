package negotiation

import (
	"fmt"
	"math"

	"github.com/omar-selfplay/omar/engine"
)

// Appraiser writes a seat's appraisal of terms for Params.Hints from the
// seat's own Valuation, the one the scripted policies decide by: the
// terms' utility above the floor as a percentage of the best candidate's
// (rounded, at least 1% when above the floor at all, at most 100%).
// Terms at or below the floor are "no better than no deal".
func Appraiser[T any](val Valuation[T]) func(T) string {
	best := math.Inf(-1)
	for _, c := range val.Candidates {
		best = max(best, val.Utility(c))
	}
	span := best - val.Floor
	return func(t T) string {
		u := val.Utility(t)
		if span <= 0 || val.NoBetterThanNoDeal(t) {
			return "Worth to you: no better than no deal."
		}
		pct := min(max(int(math.Round(100*(u-val.Floor)/span)), 1), 100)
		return fmt.Sprintf("Worth to you: %d%% of your best.", pct)
	}
}

// valuations builds both seats' Valuation from their briefings' private
// data, the way a scripted agent values its seat.
func valuations[T any](value ValuationFunc[T], seats []engine.Seat, briefings [2]Briefing) ([2]Valuation[T], error) {
	var vals [2]Valuation[T]
	for i := range vals {
		view := []engine.Event{{Kind: engine.KindBriefing, Seat: i, Text: briefings[i].Text, Data: briefings[i].Data}}
		val, err := value(seats[i], view)
		if err != nil {
			return vals, fmt.Errorf("valuation: %w", err)
		}
		vals[i] = val
	}
	return vals, nil
}

// appraisers are both seats' Appraiser.
func appraisers[T any](vals [2]Valuation[T]) func(seat int, t T) string {
	fs := [2]func(T) string{Appraiser(vals[0]), Appraiser(vals[1])}
	return func(seat int, t T) string { return fs[seat](t) }
}
