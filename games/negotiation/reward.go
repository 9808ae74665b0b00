package negotiation

import (
	"fmt"
	"math"
)

// Temperature is T of the calibrated sigmoid reward (docs/mission.md §3).
const Temperature = 0.2

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// Calibrated maps a normalised utility z ∈ [0,1] to a reward in [0,1]
// around the reference m with temperature T:
//
//	r = [σ((z−m)/T) − σ(−m/T)] / [σ((1−m)/T) − σ(−m/T)]
//
// so r(0)=0, r(1)=1 and r rises fastest around m. z is clipped to [0,1].
func Calibrated(z, m float64) float64 {
	z = clip01(z)
	lo := sigmoid(-m / Temperature)
	hi := sigmoid((1 - m) / Temperature)
	return clip01((sigmoid((z-m)/Temperature) - lo) / (hi - lo))
}

// Corridor is the price-bargaining reward of both sides for a deal at
// price: the buyer gets clip((pMax−price)/(pMax−pMin)), the seller
// clip((price−pMin)/(pMax−pMin)). pMax must exceed pMin.
func Corridor(price, pMin, pMax float64) (buyer, seller float64) {
	w := pMax - pMin
	return clip01((pMax - price) / w), clip01((price - pMin) / w)
}

// SlotReward is the Calendar reward of a meeting at a slot the seat values
// v, given the seat's values of all mutually free slots:
// [v − min] / [max − min]. When every mutually free slot is worth the same
// (one free slot, or a flat preference) the agreed slot is as good as any
// possible one and the reward is 1.
func SlotReward(v float64, free []float64) float64 {
	if len(free) == 0 {
		return 0
	}
	lo, hi := free[0], free[0]
	for _, f := range free[1:] {
		lo, hi = min(lo, f), max(hi, f)
	}
	if hi-lo < 1e-12 {
		return 1
	}
	return clip01((v - lo) / (hi - lo))
}

func clip01(x float64) float64 { return min(1, max(0, x)) }

// RescoreDeal is what the games' Rescore functions share: a record
// without a deal pays both seats 0, and one with a deal must carry its
// terms, which rewards turns into the two rewards. (CaSiNo's walk-away
// pays points, so it does not use it.)
func RescoreDeal[T any](result string, t *T, rewards func(T) ([2]float64, error)) ([2]float64, error) {
	if result != string(StatusDeal) {
		return [2]float64{}, nil
	}
	if t == nil {
		return [2]float64{}, fmt.Errorf("a deal without terms")
	}
	return rewards(*t)
}
