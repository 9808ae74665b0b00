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
		if span <= 0 || u <= val.Floor+1e-9 {
			return "Worth to you: no better than no deal."
		}
		pct := min(max(int(math.Round(100*(u-val.Floor)/span)), 1), 100)
		return fmt.Sprintf("Worth to you: %d%% of your best.", pct)
	}
}

// appraisers builds both seats' Appraiser from their briefings' private
// data, the way a scripted agent values its seat.
func appraisers[T any](value ValuationFunc[T], seats []engine.Seat, briefings [2]Briefing) (func(seat int, t T) string, error) {
	var fs [2]func(T) string
	for i := range fs {
		view := []engine.Event{{Kind: engine.KindBriefing, Seat: i, Text: briefings[i].Text, Data: briefings[i].Data}}
		val, err := value(seats[i], view)
		if err != nil {
			return nil, fmt.Errorf("hints: %w", err)
		}
		fs[i] = Appraiser(val)
	}
	return func(seat int, t T) string { return fs[seat](t) }, nil
}
