package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// This file recomputes every negotiation reward from `omar play` records
// with the formulas of the design (docs/mission.md §3, docs/negotiation.md),
// written afresh: no game package is imported, every reference m is
// derived here by brute force from the private values in the record
// (the recorded reference is not read), and the records are decoded as
// plain JSON. Agreement with the rewards the games wrote checks both the
// games and the records' completeness.

// playRecord is the part of an engine record the recomputation reads.
type playRecord struct {
	Env      string          `json:"env"`
	Seed     uint64          `json:"seed,string"` // records write seeds as decimal strings (exact in JavaScript)
	Scenario json.RawMessage `json:"scenario"`
	Outcome  struct {
		Rewards []float64       `json:"rewards"`
		Result  string          `json:"result"`
		Terms   json.RawMessage `json:"terms"`
	} `json:"outcome"`
}

// calibrated is r = [σ((z−m)/T) − σ(−m/T)] / [σ((1−m)/T) − σ(−m/T)], T = 0.2.
func calibrated(z, m float64) float64 {
	const temp = 0.2
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	lo := sig(-m / temp)
	return (sig((z-m)/temp) - lo) / (sig((1-m)/temp) - lo)
}

func clip01(x float64) float64 { return math.Max(0, math.Min(1, x)) }

// splitReference is m for DnD and CaSiNo: each player's largest score
// over Pareto-optimal, envy-free splits of the items; without any, each
// player's largest score over the Pareto-optimal splits that minimise the
// larger envy violation. scores[s][i] is player i's own-bundle score of
// split s and envy[s][i] how much player i prefers the other's bundle.
func splitReference(scores, envy [][2]float64) [2]float64 {
	pareto := func(s int) bool {
		for t := range scores {
			if scores[t][0] >= scores[s][0] && scores[t][1] >= scores[s][1] && (scores[t][0] > scores[s][0] || scores[t][1] > scores[s][1]) {
				return false
			}
		}
		return true
	}
	var m [2]float64
	found := false
	for s := range scores {
		if pareto(s) && envy[s][0] <= 0 && envy[s][1] <= 0 {
			found = true
			m[0], m[1] = math.Max(m[0], scores[s][0]), math.Max(m[1], scores[s][1])
		}
	}
	if found {
		return m
	}
	best := math.Inf(1)
	for s := range scores {
		if pareto(s) {
			best = math.Min(best, math.Max(envy[s][0], envy[s][1]))
		}
	}
	for s := range scores {
		if pareto(s) && math.Abs(math.Max(envy[s][0], envy[s][1])-best) < 1e-12 {
			m[0], m[1] = math.Max(m[0], scores[s][0]), math.Max(m[1], scores[s][1])
		}
	}
	return m
}

// splits enumerates every way to give player 0 x[k] ≤ counts[k] of each
// item type (player 1 gets the rest).
func splits(counts []int) [][]int {
	out := [][]int{{}}
	for _, c := range counts {
		var next [][]int
		for _, p := range out {
			for x := 0; x <= c; x++ {
				next = append(next, append(append([]int{}, p...), x))
			}
		}
		out = next
	}
	return out
}

// itemGame recomputes DnD and CaSiNo: values[i][k] is player i's value per
// unit of item k, max the normalising score.
func itemGame(counts []int, values [2][]float64, max float64, result string, mine [2][]int, walkOption float64) ([2]float64, error) {
	var scores, envy [][2]float64
	for _, x := range splits(counts) {
		var own, other [2]float64
		for k, c := range counts {
			own[0] += float64(x[k]) * values[0][k]
			other[0] += float64(c-x[k]) * values[0][k]
			own[1] += float64(c-x[k]) * values[1][k]
			other[1] += float64(x[k]) * values[1][k]
		}
		scores = append(scores, [2]float64{own[0] / max, own[1] / max})
		envy = append(envy, [2]float64{(other[0] - own[0]) / max, (other[1] - own[1]) / max})
	}
	m := splitReference(scores, envy)
	switch result {
	case "deal":
		var r [2]float64
		for i := range 2 {
			if len(mine[i]) != len(counts) {
				return r, fmt.Errorf("terms give player %d %v for %d item types", i, mine[i], len(counts))
			}
			z := 0.0
			for k := range counts {
				if mine[0][k]+mine[1][k] != counts[k] {
					return r, fmt.Errorf("terms split item %d as %d + %d of %d", k, mine[0][k], mine[1][k], counts[k])
				}
				z += float64(mine[i][k]) * values[i][k]
			}
			r[i] = calibrated(z/max, m[i])
		}
		return r, nil
	case "walk_away":
		return [2]float64{calibrated(walkOption/max, m[0]), calibrated(walkOption/max, m[1])}, nil
	}
	return [2]float64{}, nil
}

func recomputeDnD(rec playRecord) ([2]float64, error) {
	var s struct {
		Counts []int        `json:"counts"`
		Values [2][]float64 `json:"values"`
	}
	var t struct {
		Items map[string][]int `json:"items"`
	}
	if err := decodeBoth(rec, &s, &t); err != nil {
		return [2]float64{}, err
	}
	return itemGame(s.Counts, s.Values, 10, rec.Outcome.Result, [2][]int{t.Items["player_a"], t.Items["player_b"]}, 0)
}

func recomputeCaSiNo(rec playRecord) ([2]float64, error) {
	var s struct {
		Priorities [2][3]string `json:"priorities"`
	}
	var t struct {
		Packages map[string][]int `json:"packages"`
	}
	if err := decodeBoth(rec, &s, &t); err != nil {
		return [2]float64{}, err
	}
	points := map[string]float64{"high": 5, "medium": 4, "low": 3}
	var values [2][]float64
	for i, pr := range s.Priorities {
		for _, p := range pr {
			v, ok := points[p]
			if !ok {
				return [2]float64{}, fmt.Errorf("priority %q", p)
			}
			values[i] = append(values[i], v)
		}
	}
	// A walk-away gives each camper the original game's 5 points.
	return itemGame([]int{3, 3, 3}, values, 36, rec.Outcome.Result, [2][]int{t.Packages["camper_a"], t.Packages["camper_b"]}, 5)
}

// corridor is the price-bargaining reward with p_min ≤ p_max.
func corridor(result string, price, pmin, pmax float64) [2]float64 {
	if result != "deal" {
		return [2]float64{}
	}
	return [2]float64{clip01((pmax - price) / (pmax - pmin)), clip01((price - pmin) / (pmax - pmin))}
}

func recomputeCraigslist(rec playRecord) ([2]float64, error) {
	var s struct{ Listing, Target float64 }
	var t struct{ Price float64 }
	if err := decodeBoth(rec, &s, &t); err != nil {
		return [2]float64{}, err
	}
	return corridor(rec.Outcome.Result, t.Price, s.Target, s.Listing), nil
}

func recomputeMarketplace(rec playRecord) ([2]float64, error) {
	var s struct {
		BuyerMax  float64 `json:"buyer_max"`
		SellerMin float64 `json:"seller_min"`
	}
	var t struct{ Price float64 }
	if err := decodeBoth(rec, &s, &t); err != nil {
		return [2]float64{}, err
	}
	return corridor(rec.Outcome.Result, t.Price, s.SellerMin, s.BuyerMax), nil
}

// jobOptions are the default issues' option literals, in order.
var jobOptions = []struct {
	name    string
	options []string
}{
	{"salary", []string{"60000", "70000", "80000", "90000", "100000"}},
	{"days_off", []string{"10", "15", "20", "25", "30"}},
	{"position", []string{"analyst", "engineer", "senior", "lead"}},
	{"workplace", []string{"office", "hybrid", "remote"}},
	{"hours", []string{"35", "40", "45", "50"}},
}

func recomputeJobInterview(rec playRecord) ([2]float64, error) {
	var s struct {
		Points [2]map[string][]float64 `json:"points"`
	}
	var t struct {
		Contract map[string]string `json:"contract"`
	}
	if err := decodeBoth(rec, &s, &t); err != nil {
		return [2]float64{}, err
	}
	var counts []int
	for _, is := range jobOptions {
		counts = append(counts, len(is.options)-1)
	}
	points := func(i int, c []int) float64 {
		p := 0.0
		for j, is := range jobOptions {
			p += s.Points[i][is.name][c[j]]
		}
		return p / 100
	}
	// m: over contracts maximising min(z_w, z_r), then the total, each
	// role's largest z among those still tied.
	bestMin, bestSum := -1.0, -1.0
	contracts := splits(counts)
	for _, c := range contracts {
		a, b := points(0, c), points(1, c)
		if math.Min(a, b) > bestMin+1e-12 || math.Abs(math.Min(a, b)-bestMin) < 1e-12 && a+b > bestSum+1e-12 {
			bestMin, bestSum = math.Min(a, b), a+b
		}
	}
	var m [2]float64
	for _, c := range contracts {
		a, b := points(0, c), points(1, c)
		if math.Abs(math.Min(a, b)-bestMin) < 1e-12 && math.Abs(a+b-bestSum) < 1e-12 {
			m = [2]float64{math.Max(m[0], a), math.Max(m[1], b)}
		}
	}
	if rec.Outcome.Result != "deal" {
		return [2]float64{}, nil
	}
	var c []int
	for _, is := range jobOptions {
		k := -1
		for o, lit := range is.options {
			if lit == t.Contract[is.name] {
				k = o
			}
		}
		if k < 0 {
			return [2]float64{}, fmt.Errorf("contract %s = %q", is.name, t.Contract[is.name])
		}
		c = append(c, k)
	}
	return [2]float64{calibrated(points(0, c), m[0]), calibrated(points(1, c), m[1])}, nil
}

func recomputeCalendar(rec playRecord) ([2]float64, error) {
	var s struct {
		Calendars [2]struct {
			Free  []int     `json:"free"`
			Prefs []float64 `json:"prefs"`
		} `json:"calendars"`
	}
	var t struct{ Slot string }
	if err := decodeBoth(rec, &s, &t); err != nil {
		return [2]float64{}, err
	}
	if rec.Outcome.Result != "deal" {
		return [2]float64{}, nil
	}
	var hour int
	if _, err := fmt.Sscanf(t.Slot, "%d:00", &hour); err != nil {
		return [2]float64{}, fmt.Errorf("slot %q: %v", t.Slot, err)
	}
	pref := func(i, h int) (float64, bool) {
		for j, f := range s.Calendars[i].Free {
			if f == h {
				return s.Calendars[i].Prefs[j], true
			}
		}
		return 0, false
	}
	var r [2]float64
	for i := range 2 {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, h := range s.Calendars[0].Free {
			if _, both := pref(1, h); both {
				v, _ := pref(i, h)
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
		v, ok := pref(i, hour)
		if _, other := pref(1-i, hour); !ok || !other {
			return r, fmt.Errorf("agreed slot %s is not free for both", t.Slot)
		}
		if hi == lo {
			r[i] = 1 // flat on Z: the agreed slot is the best possible
		} else {
			r[i] = (v - lo) / (hi - lo)
		}
	}
	return r, nil
}

func decodeBoth(rec playRecord, scenario, terms any) error {
	if err := json.Unmarshal(rec.Scenario, scenario); err != nil {
		return fmt.Errorf("scenario: %w", err)
	}
	if rec.Outcome.Result == "deal" {
		if err := json.Unmarshal(rec.Outcome.Terms, terms); err != nil {
			return fmt.Errorf("terms: %w", err)
		}
	}
	return nil
}

// TestRecomputeRewards plays every negotiation game with each scripted
// policy through `omar play`, and recomputes every reward of the records
// independently.
func TestRecomputeRewards(t *testing.T) {
	games := []struct {
		env       string
		recompute func(playRecord) ([2]float64, error)
	}{
		{"dealornodeal", recomputeDnD},
		{"casino", recomputeCaSiNo},
		{"craigslist", recomputeCraigslist},
		{"jobinterview", recomputeJobInterview},
		{"calendar", recomputeCalendar},
		{"marketplace", recomputeMarketplace},
	}
	episodes := 40
	if testing.Short() {
		episodes = 10
	}
	dir := t.TempDir()
	for _, g := range games {
		t.Run(g.env, func(t *testing.T) {
			results := map[string]int{}
			for _, agents := range []string{"strategic", "naive", "random", "strategic,naive", "random,strategic"} {
				out := filepath.Join(dir, g.env+"-"+agents+".jsonl")
				var stdout, stderr bytes.Buffer
				args := []string{"play", "--env", g.env, "--agents", agents, "--episodes", strconv.Itoa(episodes), "--seed", "11", "--out", out}
				if code := runMain(context.Background(), &cliEnv{stdout: &stdout, stderr: &stderr}, args); code != 0 {
					t.Fatalf("omar %v: exit %d\n%s", args, code, stderr.String())
				}
				f, err := os.Open(out)
				if err != nil {
					t.Fatal(err)
				}
				sc := bufio.NewScanner(f)
				sc.Buffer(nil, 16<<20)
				n := 0
				for sc.Scan() {
					var rec playRecord
					if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
						t.Fatalf("%s line %d: %v", out, n+1, err)
					}
					n++
					results[rec.Outcome.Result]++
					want, err := g.recompute(rec)
					if err != nil {
						t.Errorf("%s seed %d: %v", agents, rec.Seed, err)
						continue
					}
					for i := range 2 {
						if math.Abs(rec.Outcome.Rewards[i]-want[i]) > 1e-9 {
							t.Errorf("%s seed %d (%s): reward[%d] recorded %v, recomputed %v", agents, rec.Seed, rec.Outcome.Result, i, rec.Outcome.Rewards[i], want[i])
						}
					}
				}
				f.Close()
				if err := sc.Err(); err != nil {
					t.Fatal(err)
				}
				if n != episodes {
					t.Errorf("%s: %d records, want %d", agents, n, episodes)
				}
			}
			if results["deal"] == 0 {
				t.Errorf("no deal in %v: the recomputation of deal rewards was not exercised", results)
			}
			t.Logf("%s: %v", g.env, results)
		})
	}
}

// TestCalibratedEnds pins the formula's ends: r(0) = 0 and r(1) = 1.
func TestCalibratedEnds(t *testing.T) {
	for _, m := range []float64{0, 0.3, 0.7, 1} {
		if got := calibrated(0, m); math.Abs(got) > 1e-12 {
			t.Errorf("calibrated(0, %v) = %v, want 0", m, got)
		}
		if got := calibrated(1, m); math.Abs(got-1) > 1e-12 {
			t.Errorf("calibrated(1, %v) = %v, want 1", m, got)
		}
	}
}
