package arena

import (
	"math"
	"math/rand/v2"
	"testing"
)

var testBoot = bootstrap{seed: 1, resamples: 1000, confidence: 0.95}

func TestBootstrapMean(t *testing.T) {
	tests := []struct {
		name           string
		xs             []float64
		mean, lo, hi   float64
		tolLo, tolHigh float64
	}{
		{"constant", []float64{0.5, 0.5, 0.5, 0.5}, 0.5, 0.5, 0.5, 0, 0},
		{"one episode", []float64{0.3}, 0.3, 0.3, 0.3, 0, 0},
		// 0/1 half and half, n = 100: the normal interval is 0.5 ± 0.098.
		{"coin", coin(100), 0.5, 0.402, 0.598, 0.02, 0.02},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := testBoot.mean(tt.name, tt.xs)
			if math.Abs(got.Mean-tt.mean) > 1e-12 || math.Abs(got.Lo-tt.lo) > tt.tolLo+1e-12 || math.Abs(got.Hi-tt.hi) > tt.tolHigh+1e-12 {
				t.Errorf("got %v, want %.3f [%.3f, %.3f]", got, tt.mean, tt.lo, tt.hi)
			}
			if got.N != len(tt.xs) {
				t.Errorf("got n %d, want %d", got.N, len(tt.xs))
			}
			if again := testBoot.mean(tt.name, tt.xs); again != got {
				t.Errorf("same tag twice: %v, then %v", got, again)
			}
		})
	}
	if got := testBoot.mean("empty", nil); got.N != 0 {
		t.Errorf("no data: got %v, want N 0", got)
	}
}

func coin(n int) []float64 {
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = float64(i % 2)
	}
	return xs
}

// TestBootstrapCoverage: over many synthetic samples of a known mean, the
// 95% interval covers it about 95% of the time.
func TestBootstrapCoverage(t *testing.T) {
	b := bootstrap{seed: 3, resamples: 400, confidence: 0.95}
	rng := rand.New(rand.NewPCG(5, 6))
	const trials, n, p = 400, 80, 0.3
	covered := 0
	for k := range trials {
		xs := make([]float64, n)
		for i := range xs {
			if rng.Float64() < p {
				xs[i] = 1
			}
		}
		if b.mean(string(rune(k)), xs).Contains(p) {
			covered++
		}
	}
	// Binomial(400, 0.95) lies in [360, 395] with probability > 0.999;
	// the percentile interval undercovers a little at n = 80.
	if rate := float64(covered) / trials; rate < 0.90 || rate > 0.99 {
		t.Errorf("coverage %.3f of %d intervals, want about 0.95", rate, trials)
	}
}

// TestCIWidthShrinks: the interval's width falls like 1/√n.
func TestCIWidthShrinks(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	draw := func(n int) []float64 {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = rng.Float64() // uniform: sd 0.289
		}
		return xs
	}
	widths := map[int]float64{}
	for _, n := range []int{64, 256, 1024} {
		// Averaged over a few samples: one sample's width is itself noisy.
		for k := range 8 {
			widths[n] += testBoot.mean(string(rune(n+k)), draw(n)).Width() / 8
		}
	}
	for _, n := range []int{64, 256, 1024} {
		// The normal interval: 2 · 1.96 · 0.289 / √n.
		want := 2 * 1.96 * math.Sqrt(1.0/12) / math.Sqrt(float64(n))
		if r := widths[n] / want; r < 0.9 || r > 1.1 {
			t.Errorf("n %d: width %.4f, want %.4f (ratio %.3f)", n, widths[n], want, r)
		}
	}
	for _, pair := range [][2]int{{64, 256}, {256, 1024}} {
		if r := widths[pair[1]] / widths[pair[0]]; r < 0.45 || r > 0.55 {
			t.Errorf("width ratio n=%d/n=%d: %.3f, want 0.5 (1/√4)", pair[1], pair[0], r)
		}
	}
}

func TestStrataMean(t *testing.T) {
	// Strata weigh the same whatever their size.
	got := testBoot.strata("s", [][]float64{{1, 1, 1, 1, 1, 1}, {0, 0}, nil})
	if got.Mean != 0.5 || got.N != 8 || !got.Contains(0.5) || got.Lo != 0.5 || got.Hi != 0.5 {
		t.Errorf("got %v, want 0.5 [0.5, 0.5] over 8 episodes", got)
	}
}

// TestBradleyTerry: comparisons drawn from known strengths are fitted back.
func TestBradleyTerry(t *testing.T) {
	want := []float64{200, 0, -200} // Elo scale
	rng := rand.New(rand.NewPCG(9, 10))
	var st btStratum
	for range 3000 {
		slot := make(btSlot, 3)
		// Each player's "reward" is a draw whose pairwise order follows
		// the Bradley–Terry model: Gumbel noise on the log-strength.
		for i, r := range want {
			slot[i] = r*math.Ln10/400 - math.Log(-math.Log(rng.Float64()))
		}
		st = append(st, slot)
	}
	got := bradleyTerry(3, []btStratum{st})
	for i := range want {
		if math.Abs(got[i]-want[i]) > 25 {
			t.Errorf("player %d: rating %.1f, want %.0f ± 25", i, got[i], want[i])
		}
	}
	est := bootstrap{seed: 2, resamples: 200, confidence: 0.95}.ratings(3, []btStratum{st})
	for i := range want {
		if !est[i].Contains(got[i]) || est[i].Width() > 60 || est[i].Width() <= 0 {
			t.Errorf("player %d: interval %v around %.1f", i, est[i], got[i])
		}
	}
	// Someone who always wins stays finite (the virtual ties).
	always := btStratum{{1, 0}, {1, 0}, {1, 0}}
	r := bradleyTerry(2, []btStratum{always})
	if math.IsInf(r[0], 0) || math.IsNaN(r[0]) || r[0] <= r[1] {
		t.Errorf("always-winner ratings %v, want finite with the winner first", r)
	}
	// Players that never meet (NaN) add nothing.
	if r := bradleyTerry(2, []btStratum{{{1, math.NaN()}}}); r[0] != 0 || r[1] != 0 {
		t.Errorf("no comparisons: ratings %v, want 0 0", r)
	}
}
