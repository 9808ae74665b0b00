package negotiation

import (
	"math"
	"testing"
)

// TestMetricsBehaviour checks the behaviour metrics Metrics adds from a
// hand-made result: the first CurveLen offers only, shares of messages,
// nothing for a side without proposals or messages, no fabricated_ when
// the claims were not read, and the game's extra metrics.
func TestMetricsBehaviour(t *testing.T) {
	res := Result[float64]{
		Walker: -1, Status: StatusDeal,
		Said:       [2][]string{{"final offer", "hello", "take it or leave it", "ok"}, nil},
		Fabricated: [2]int{1, 0}, ClaimsRead: true,
	}
	rep := Report{
		Roles:     [2]string{"buyer", "seller"},
		Disclosed: [2]float64{-1, -1},
		Offers:    [2][]float64{{.1, .2, .3, .4, .5}, nil},
		Extra:     map[string]float64{"price_norm": .25},
	}
	m := Metrics(res, rep)
	want := map[string]float64{
		"offer_1_buyer": .1, "offer_2_buyer": .2, "offer_3_buyer": .3, "offer_4_buyer": .4,
		"commitment_buyer": .5, "fabricated_buyer": .25, "price_norm": .25,
	}
	for k, v := range want {
		if got, ok := m[k]; !ok || math.Abs(got-v) > 1e-12 {
			t.Errorf("%s: got %v (present %v), want %v", k, got, ok, v)
		}
	}
	for _, k := range []string{"offer_5_buyer", "offer_1_seller", "commitment_seller", "fabricated_seller"} {
		if v, ok := m[k]; ok {
			t.Errorf("%s: got %v, want none", k, v)
		}
	}
	res.ClaimsRead = false
	if v, ok := Metrics(res, rep)["fabricated_buyer"]; ok {
		t.Errorf("fabricated_buyer without the claims read: got %v, want none", v)
	}
}

func TestNormPrice(t *testing.T) {
	for _, tt := range []struct{ p, lo, hi, want float64 }{
		{260, 260, 350, 0}, {350, 260, 350, 1}, {305, 260, 350, .5}, {200, 260, 350, -60.0 / 90},
		{1e12, 260, 350, MaxOpening}, {-1e12, 260, 350, -MaxOpening}, {300, 350, 350, 0}, {math.NaN(), 1, 2, 0},
	} {
		if got := NormPrice(tt.p, tt.lo, tt.hi); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("NormPrice(%v, %v, %v) = %v, want %v", tt.p, tt.lo, tt.hi, got, tt.want)
		}
	}
}
