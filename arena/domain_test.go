package arena

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/envs"
	"github.com/omar-selfplay/omar/players"
)

func TestGroupsMean(t *testing.T) {
	tests := []struct {
		name   string
		groups [][][]float64
		mean   float64
		n      int
	}{
		// Groups weigh the same whatever their number of strata: (0.5 + 1)/2.
		{"equal groups", [][][]float64{{{1, 1}, {0, 0}}, {{1}}}, 0.75, 5},
		// An empty stratum and an empty group are left out.
		{"empty parts", [][][]float64{{{0.25, 0.25}, nil}, {nil}, {{-0.5}}}, -0.125, 3},
		{"nothing", [][][]float64{{nil}}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := testBoot.groups(tt.name, tt.groups)
			if got.Mean != tt.mean || got.N != tt.n || (tt.n > 0 && (got.Lo != tt.mean || got.Hi != tt.mean)) {
				t.Errorf("got %+v, want %v [%v, %v] over %d episodes", got, tt.mean, tt.mean, tt.mean, tt.n)
			}
		})
	}
}

// TestGroupsOfOneAreStrata: one group is the stratified estimate, draw
// for draw, so the existing intervals are unchanged.
func TestGroupsOfOneAreStrata(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var ss [][]float64
	for range 3 {
		var s []float64
		for range 7 {
			s = append(s, rng.Float64())
		}
		ss = append(ss, s)
	}
	if a, b := testBoot.strata("x", ss), testBoot.groups("x", [][][]float64{ss}); a != b {
		t.Errorf("strata %+v, groups %+v: want equal", a, b)
	}
}

// domainReport builds a report from synthetic results: base and tuned,
// tuned trained on craigslist. Per-slot paired differences (constant over
// episodes, so every interval is its point):
//
//	craigslist a: 1 − 0 = 1; craigslist b: .5 − .5 = 0 → craigslist .5 (in-domain)
//	casino a: .5 − .25 = .25                              (off-domain)
//	dealornodeal a: .25 − .75 = −.5                       (off-domain)
//
// so in-domain +.5 and off-domain (.25 − .5)/2 = −.125.
func domainReport(t *testing.T, trained map[string][]string) *Report {
	t.Helper()
	o := Options{}.Defaults()
	o.Bootstrap, o.Episodes, o.Trained = 200, 2, trained
	var es []*env
	sides := map[string][]string{"craigslist": {"a", "b"}, "casino": {"a"}, "dealornodeal": {"a"}}
	for _, n := range []string{"craigslist", "casino", "dealornodeal"} {
		g, err := envs.Find(n)
		if err != nil {
			t.Fatal(err)
		}
		e := &env{Env: Env{Name: n}, game: g}
		for _, s := range sides[n] {
			e.sides = append(e.sides, Side{Name: s})
		}
		es = append(es, e)
	}
	rewards := map[string][2]float64{ // base, tuned
		"craigslist/a": {0, 1}, "craigslist/b": {.5, .5}, "casino/a": {.25, .5}, "dealornodeal/a": {.75, .25},
	}
	var results []Result
	for k, r := range rewards {
		env, side, _ := strings.Cut(k, "/")
		for ep := range 2 {
			for i, p := range []string{"base", "tuned"} {
				results = append(results, Result{Env: env, Side: side, Player: p, Opponent: "scripted:naive", Episode: ep, Reward: r[i]})
			}
		}
	}
	ps := []Player{{Name: "base", Kind: players.KindBase}, {Name: "tuned", Kind: players.KindAdapter}}
	return newReport(o, es, ps, []Player{scriptedPlayer("naive")}, results)
}

func TestDomains(t *testing.T) {
	tests := []struct {
		name     string
		trained  map[string][]string
		in, out  float64
		inN      int
		inEnvs   string
		offEnvs  string
		noDomain bool
	}{
		{name: "by name", trained: map[string][]string{"tuned": {"craigslist"}}, in: .5, out: -.125, inN: 4, inEnvs: "craigslist", offEnvs: "casino,dealornodeal"},
		{name: "by id", trained: map[string][]string{"tuned": {"craigslist_v1"}}, in: .5, out: -.125, inN: 4, inEnvs: "craigslist", offEnvs: "casino,dealornodeal"},
		// Trained elsewhere only: every evaluated environment is off-domain,
		// (.5 + .25 − .5)/3 = .25/3.
		{name: "elsewhere", trained: map[string][]string{"tuned": {"calendar"}}, in: 0, out: .25 / 3, inN: 0, offEnvs: "craigslist,casino,dealornodeal"},
		{name: "reference only", trained: map[string][]string{"base": {"casino"}}, noDomain: true},
		{name: "none", noDomain: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := domainReport(t, tt.trained)
			if tt.noDomain {
				if len(rep.Domains) != 0 {
					t.Errorf("got %+v, want no domains", rep.Domains)
				}
				return
			}
			if len(rep.Domains) != 1 {
				t.Fatalf("got %+v, want one player's domains", rep.Domains)
			}
			d := rep.Domains[0]
			if d.Player != "tuned" || d.Than != "base" || strings.Join(d.InDomain, ",") != tt.inEnvs || strings.Join(d.OffDomain, ",") != tt.offEnvs {
				t.Errorf("got %+v, want tuned − base, in %s, off %s", d, tt.inEnvs, tt.offEnvs)
			}
			if d.In.Mean != tt.in || d.In.N != tt.inN || d.In.Lo != tt.in || d.In.Hi != tt.in {
				t.Errorf("in-domain %+v, want %v over %d episodes", d.In, tt.in, tt.inN)
			}
			if d.Out.Mean != tt.out || d.Out.Lo != d.Out.Mean || d.Out.Hi != d.Out.Mean {
				t.Errorf("off-domain %+v, want %v", d.Out, tt.out)
			}
		})
	}
}

func TestDomainsRendered(t *testing.T) {
	rep := domainReport(t, map[string][]string{"tuned": {"craigslist"}})
	var md, sum strings.Builder
	if err := rep.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	if err := rep.Summary(&sum); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## In-domain and out-transfer",
		"| `tuned` | craigslist | +0.500 [+0.500, +0.500] | casino, dealornodeal | -0.125 [-0.125, -0.125] |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md.String())
		}
	}
	for _, want := range []string{"in-domain", "+0.500 [+0.500, +0.500]\n", "off-domain", "-0.125 [-0.125, -0.125]\n"} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("Summary lacks %q:\n%s", want, sum.String())
		}
	}
}

func TestTrainedValidate(t *testing.T) {
	tests := []struct {
		name    string
		trained map[string][]string
		count   int
		err     string
	}{
		{name: "catalogue env", trained: map[string][]string{"tuned": {"casino", "dealornodeal_v1"}}},
		{name: "evaluated env", trained: map[string][]string{"tuned": {"craigslist"}}},
		{name: "unknown env", trained: map[string][]string{"tuned": {"chess"}}, err: "trained_on tuned"},
		{name: "no player", trained: map[string][]string{"": {"casino"}}, err: "without a name"},
		{name: "negative count", count: -1, err: "scenario_count -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := scriptedOptions(4, Env{Name: "craigslist"})
			o.Trained, o.ScenarioCount = tt.trained, tt.count
			err := o.Validate()
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("got %v, want %q", err, tt.err)
			}
		})
	}
}
