package negotiation

import (
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestCalibrated(t *testing.T) {
	// Wants computed independently (Python, float64) from
	// r = [σ((z−m)/T) − σ(−m/T)] / [σ((1−m)/T) − σ(−m/T)], T = 0.2.
	tests := []struct {
		name string
		z, m float64
		want float64
	}{
		{"z=0 gives 0", 0, 0.5, 0},
		{"z=1 gives 1", 1, 0.5, 1},
		{"z=m=0.5 is the midpoint", 0.5, 0.5, 0.5},
		{"above the reference", 0.7, 0.5, 0.7723836317786084},
		{"below the reference", 0.3, 0.6, 0.16199221889498439},
		{"well above", 0.9, 0.6, 0.9241363255412847},
		{"m=0", 0.5, 0, 0.8597925669097837},
		{"m=1", 0.5, 1, 0.1402074330902163},
		{"casino walk-away 5/36 at m=0.5", 5.0 / 36, 0.5, 0.07700013573748499},
		{"z=0 with m=0.8", 0, 0.8, 0},
		{"z=1 with m=0.8", 1, 0.8, 1},
		{"z clipped above 1", 1.3, 0.5, 1},
		{"z clipped below 0", -0.2, 0.5, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Calibrated(tt.z, tt.m); !near(got, tt.want) {
				t.Errorf("Calibrated(%v, %v): got %v, want %v", tt.z, tt.m, got, tt.want)
			}
		})
	}
}

func TestCorridor(t *testing.T) {
	tests := []struct {
		name                  string
		price, pMin, pMax     float64
		wantBuyer, wantSeller float64
	}{
		{"middle", 150, 100, 200, 0.5, 0.5},
		{"a quarter up", 125, 100, 200, 0.75, 0.25},
		{"at p_min", 100, 100, 200, 1, 0},
		{"at p_max", 200, 100, 200, 0, 1},
		{"below the corridor", 60, 100, 200, 1, 0},
		{"above the corridor", 260, 100, 200, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, s := Corridor(tt.price, tt.pMin, tt.pMax)
			if !near(b, tt.wantBuyer) || !near(s, tt.wantSeller) {
				t.Errorf("Corridor(%v, %v, %v): got %v, %v; want %v, %v", tt.price, tt.pMin, tt.pMax, b, s, tt.wantBuyer, tt.wantSeller)
			}
		})
	}
}

func TestSlotReward(t *testing.T) {
	tests := []struct {
		name string
		v    float64
		free []float64
		want float64
	}{
		{"best slot", 1, []float64{0, 0.5, 1}, 1},
		{"worst slot", 0.25, []float64{0.25, 0.5, 1}, 0},
		{"in between", 0.5, []float64{0, 0.5, 1}, 0.5},
		{"min-max over Z, not over [0,1]", 0.5, []float64{0.25, 0.5, 1}, 1.0 / 3},
		{"single mutually free slot", 0.25, []float64{0.25}, 1},
		{"flat preferences", 0.5, []float64{0.5, 0.5}, 1},
		{"no free slot", 0.5, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SlotReward(tt.v, tt.free); !near(got, tt.want) {
				t.Errorf("SlotReward(%v, %v): got %v, want %v", tt.v, tt.free, got, tt.want)
			}
		})
	}
}

func TestSplitReference(t *testing.T) {
	tests := []struct {
		name       string
		counts     []int
		va, vb     []int
		maxA, maxB float64
		want       Reference
	}{
		{
			// Pareto frontier: A keeps hat+ball and 0, 1 or 2 books
			// (.8/1, .9/.5, 1/0); the first two are envy-free.
			name: "envy-free frontier", counts: []int{2, 1, 1}, va: []int{1, 4, 4}, vb: []int{5, 0, 0}, maxA: 10, maxB: 10,
			want: Reference{M: [2]float64{0.9, 1.0}, EnvyFree: true},
		},
		{
			// Identical values: every split is Pareto-optimal and whoever
			// lacks the book envies; the least larger violation is .6 at
			// A={book} (.8/.2) and A={hat,ball} (.2/.8).
			name: "no envy-free allocation", counts: []int{1, 1, 1}, va: []int{8, 1, 1}, vb: []int{8, 1, 1}, maxA: 10, maxB: 10,
			want: Reference{M: [2]float64{0.8, 0.8}, EnvyFree: false, Violation: 0.6},
		},
		{
			// CaSiNo with identical priorities: envy-free needs exactly 18
			// of 36 points each, so m = .5 for both.
			name: "casino identical priorities", counts: []int{3, 3, 3}, va: []int{5, 4, 3}, vb: []int{5, 4, 3}, maxA: 36, maxB: 36,
			want: Reference{M: [2]float64{0.5, 0.5}, EnvyFree: true},
		},
		{
			// Opposed priorities (A: food 5 > water 4 > firewood 3, B the
			// reverse). The frontier gives A food first, then water, then
			// firewood. Envy-free needs 18+ points each: A = 3 food + k
			// water scores 15+4k vs B's 27−4k, so k = 1 (19/23) or
			// k = 2 (23/19): m = 23/36 for both.
			name: "casino opposed priorities", counts: []int{3, 3, 3}, va: []int{5, 4, 3}, vb: []int{3, 4, 5}, maxA: 36, maxB: 36,
			want: Reference{M: [2]float64{23.0 / 36, 23.0 / 36}, EnvyFree: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SplitReference(tt.counts, tt.va, tt.vb, tt.maxA, tt.maxB)
			if !near(got.M[0], tt.want.M[0]) || !near(got.M[1], tt.want.M[1]) || got.EnvyFree != tt.want.EnvyFree || !near(got.Violation, tt.want.Violation) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestRescorePrice(t *testing.T) {
	corridor := func(p float64) (float64, float64) { return Corridor(p, 150, 200) }
	deal := &PriceTerms{Price: 160, Proposer: "buyer"}
	tests := []struct {
		name    string
		result  string
		terms   *PriceTerms
		want    [2]float64
		wantErr bool
	}{
		{"deal", string(StatusDeal), deal, [2]float64{.8, .2}, false},
		{"walk-away pays 0 whatever the terms", string(StatusWalk), deal, [2]float64{0, 0}, false},
		{"no deal pays 0", string(StatusNoDeal), nil, [2]float64{0, 0}, false},
		{"a deal without terms", string(StatusDeal), nil, [2]float64{0, 0}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := RescorePrice(tt.result, tt.terms, corridor)
			if (err != nil) != tt.wantErr {
				t.Fatalf("got error %v, want error %v", err, tt.wantErr)
			}
			if !near(got[0], tt.want[0]) || !near(got[1], tt.want[1]) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
