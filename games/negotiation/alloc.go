package negotiation

// Allocations enumerates every split of counts[k] items of each type k:
// x[k] ∈ 0..counts[k] is what the first player gets, the second gets the
// rest. The order is lexicographic (last item type fastest), so results
// built on it are deterministic.
func Allocations(counts []int) [][]int {
	out := [][]int{{}}
	for _, c := range counts {
		var next [][]int
		for _, prefix := range out {
			for n := 0; n <= c; n++ {
				x := append(append([]int(nil), prefix...), n)
				next = append(next, x)
			}
		}
		out = next
	}
	return out
}

// Score is Σ x[k]·v[k].
func Score(x, v []int) int {
	s := 0
	for k := range x {
		s += x[k] * v[k]
	}
	return s
}

// Complement is counts − x: what the second player gets.
func Complement(counts, x []int) []int {
	y := make([]int, len(x))
	for k := range x {
		y[k] = counts[k] - x[k]
	}
	return y
}

// Reference is the calibration point m of each role of a split game.
type Reference struct {
	// M holds each player's reference normalised score.
	M [2]float64 `json:"m"`
	// EnvyFree reports whether a Pareto-optimal envy-free allocation exists;
	// when false M comes from the fallback (least larger envy violation).
	EnvyFree bool `json:"envy_free"`
	// Violation is the larger envy violation of the fallback allocations
	// (0 when EnvyFree).
	Violation float64 `json:"violation"`
}

// SplitReference computes m for a two-player split of counts with integer
// per-item values va, vb and normalisers maxA, maxB (the largest raw
// score): m of a role is its largest normalised score over allocations that
// are Pareto-optimal and envy-free (each player values its own bundle at
// least as much as the other's). If no such allocation exists, it is the
// role's largest score over the Pareto-optimal allocations that minimise
// the larger of the two normalised envy violations.
func SplitReference(counts, va, vb []int, maxA, maxB float64) Reference {
	type cand struct{ za, zb, envy float64 }
	var all []cand
	for _, x := range Allocations(counts) {
		y := Complement(counts, x)
		sa, sb := float64(Score(x, va)), float64(Score(y, vb))
		ea := (float64(Score(y, va)) - sa) / maxA // a envies b's bundle
		eb := (float64(Score(x, vb)) - sb) / maxB
		all = append(all, cand{sa / maxA, sb / maxB, max(0, ea, eb)})
	}
	var pareto []cand
	for i, c := range all {
		dominated := false
		for j, d := range all {
			if i != j && d.za >= c.za && d.zb >= c.zb && (d.za > c.za || d.zb > c.zb) {
				dominated = true
				break
			}
		}
		if !dominated {
			pareto = append(pareto, c)
		}
	}
	least := pareto[0].envy
	for _, c := range pareto {
		least = min(least, c.envy)
	}
	ref := Reference{EnvyFree: least == 0, Violation: least}
	for _, c := range pareto {
		if c.envy <= least+1e-12 {
			ref.M[0] = max(ref.M[0], c.za)
			ref.M[1] = max(ref.M[1], c.zb)
		}
	}
	return ref
}
