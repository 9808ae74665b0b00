package arena

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/omar-selfplay/omar/seeds"
)

// Estimate is a mean with its bootstrap confidence interval (percentile
// interval of the resampled means, widened where needed to contain the
// point estimate).
type Estimate struct {
	Mean float64 `json:"mean"`
	Lo   float64 `json:"lo"`
	Hi   float64 `json:"hi"`
	// N is the number of episodes behind it.
	N int `json:"n"`
}

// Contains reports whether x lies in the interval.
func (e Estimate) Contains(x float64) bool { return e.Lo <= x && x <= e.Hi }

// Width is Hi − Lo.
func (e Estimate) Width() float64 { return e.Hi - e.Lo }

// bootstrap draws with a generator seeded from the run's seed and what is
// estimated (tag), so every interval is reproducible and independent of
// the order the report is built in.
type bootstrap struct {
	seed       uint64
	resamples  int
	confidence float64
}

func (b bootstrap) rng(tag string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(tag))
	return rand.New(rand.NewPCG(seeds.Derive(b.seed, h.Sum64()), 0x626f6f74)) // "boot"
}

// mean estimates the mean of xs: the percentile interval of the means of
// resamples drawn with replacement.
func (b bootstrap) mean(tag string, xs []float64) Estimate {
	return b.strata(tag, [][]float64{xs})
}

// strata estimates the mean of the strata's means (every pairing weighs
// the same, whatever its episode count), resampling episodes within each
// stratum. Empty strata are left out.
func (b bootstrap) strata(tag string, strata [][]float64) Estimate {
	return b.groups(tag, [][][]float64{strata})
}

// groups estimates the mean over groups of each group's mean of its
// strata's means (every environment weighs the same, whatever its number
// of slots), resampling episodes within each stratum. Empty strata, and
// groups left empty, are left out. One group is strata, draw for draw.
func (b bootstrap) groups(tag string, groups [][][]float64) Estimate {
	var gs [][][]float64
	n := 0
	for _, g := range groups {
		var ss [][]float64
		for _, s := range g {
			if len(s) > 0 {
				ss = append(ss, s)
				n += len(s)
			}
		}
		if len(ss) > 0 {
			gs = append(gs, ss)
		}
	}
	if len(gs) == 0 {
		return Estimate{} // N 0: nothing to estimate
	}
	point := 0.0
	for _, ss := range gs {
		sum := 0.0
		for _, s := range ss {
			sum += meanOf(s)
		}
		point += sum / float64(len(ss))
	}
	point /= float64(len(gs))
	rng := b.rng(tag)
	stats := make([]float64, b.resamples)
	for k := range stats {
		total := 0.0
		for _, ss := range gs {
			group := 0.0
			for _, s := range ss {
				sum := 0.0
				for range s {
					sum += s[rng.IntN(len(s))]
				}
				group += sum / float64(len(s))
			}
			total += group / float64(len(ss))
		}
		stats[k] = total / float64(len(gs))
	}
	lo, hi := percentiles(stats, (1-b.confidence)/2)
	return Estimate{Mean: point, Lo: min(lo, point), Hi: max(hi, point), N: n}
}

// percentiles returns the a and 1−a quantiles of xs (sorted in place),
// interpolating linearly between order statistics.
func percentiles(xs []float64, a float64) (lo, hi float64) {
	slices.Sort(xs)
	q := func(p float64) float64 {
		pos := p * float64(len(xs)-1)
		i := int(math.Floor(pos))
		if i >= len(xs)-1 {
			return xs[len(xs)-1]
		}
		f := pos - float64(i)
		return xs[i]*(1-f) + xs[i+1]*f
	}
	return q(a), q(1 - a)
}

func meanOf(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// btSlot is one deal of one pairing slot (environment, side, opponent,
// episode): the rewards of the players that played it, by player index
// (NaN where a player has no result).
type btSlot []float64

// btStratum is the slots of one (environment, side, opponent): the
// bootstrap resamples episodes within it.
type btStratum []btSlot

// bradleyTerry fits Bradley–Terry strengths to the players' paired
// comparisons: in every slot, each pair of players that played it scores
// a win for the higher reward and half a win each for a tie. The fit is
// Hunter's MM iteration with one virtual tie per pair of players (a weak
// prior that keeps a player who always wins finite). Ratings are on the
// Elo scale (400·log10 strength), centred on 0.
func bradleyTerry(n int, strata []btStratum) []float64 {
	wins := make([][]float64, n)
	for i := range wins {
		wins[i] = make([]float64, n)
	}
	for _, st := range strata {
		for _, slot := range st {
			addComparisons(wins, slot)
		}
	}
	return fitBT(wins)
}

func addComparisons(wins [][]float64, slot btSlot) {
	for i := range slot {
		for j := i + 1; j < len(slot); j++ {
			a, b := slot[i], slot[j]
			if math.IsNaN(a) || math.IsNaN(b) {
				continue
			}
			switch {
			case a > b:
				wins[i][j]++
			case b > a:
				wins[j][i]++
			default:
				wins[i][j] += 0.5
				wins[j][i] += 0.5
			}
		}
	}
}

// fitBT returns Elo-scale ratings from wins[i][j] (i's wins over j).
func fitBT(wins [][]float64) []float64 {
	n := len(wins)
	p := make([]float64, n)
	for i := range p {
		p[i] = 1
	}
	next := make([]float64, n)
	for range 10000 {
		change := 0.0
		for i := range n {
			w, d := 0.0, 0.0
			for j := range n {
				if j == i {
					continue
				}
				w += wins[i][j] + 0.5 // the virtual tie
				d += (wins[i][j] + wins[j][i] + 1) / (p[i] + p[j])
			}
			next[i] = w / d
		}
		// Fix the scale: geometric mean 1.
		lg := 0.0
		for i := range n {
			lg += math.Log(next[i])
		}
		g := math.Exp(lg / float64(n))
		for i := range n {
			v := next[i] / g
			change = max(change, math.Abs(math.Log(v)-math.Log(p[i])))
			p[i] = v
		}
		if change < 1e-10 {
			break
		}
	}
	out := make([]float64, n)
	for i := range n {
		out[i] = 400 * math.Log10(p[i])
	}
	return out
}

// ratings fits Bradley–Terry ratings with bootstrap intervals (episodes
// resampled within each stratum).
func (b bootstrap) ratings(n int, strata []btStratum) []Estimate {
	point := bradleyTerry(n, strata)
	rng := b.rng("ratings")
	draws := make([][]float64, n)
	wins := make([][]float64, n)
	for i := range wins {
		wins[i] = make([]float64, n)
	}
	for range b.resamples {
		for i := range wins {
			clear(wins[i])
		}
		for _, st := range strata {
			for range st {
				addComparisons(wins, st[rng.IntN(len(st))])
			}
		}
		for i, r := range fitBT(wins) {
			draws[i] = append(draws[i], r)
		}
	}
	out := make([]Estimate, n)
	for i := range out {
		lo, hi := percentiles(draws[i], (1-b.confidence)/2)
		out[i] = Estimate{Mean: point[i], Lo: min(lo, point[i]), Hi: max(hi, point[i])}
	}
	return out
}
