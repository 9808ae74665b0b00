package arena

import (
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/omar-selfplay/omar/players"
)

// Report is what an evaluation found: per pairing the rewards with their
// confidence intervals, outcome rates and the games' behaviour metrics;
// paired differences between players; Bradley–Terry ratings; a transfer
// matrix of players × environments. Built from results alone, so the same
// results give the same report whatever order they were played in.
type Report struct {
	Seed       uint64    `json:"seed"`
	Episodes   int       `json:"episodes"`
	Confidence float64   `json:"confidence"`
	Bootstrap  int       `json:"bootstrap"`
	Envs       []EnvInfo `json:"envs"`
	Players    []string  `json:"players"`
	Opponents  []string  `json:"opponents"`
	// Reference is the player the differences and the transfer matrix
	// compare with.
	Reference string `json:"reference"`
	Cells     []Cell `json:"cells"`
	// Differences are paired differences between players: per pairing
	// slot (environment, side, opponent) and over all of them (Env "").
	Differences []Difference `json:"differences,omitempty"`
	// Ratings are Bradley–Terry ratings of the players (two or more).
	Ratings  []Rating  `json:"ratings,omitempty"`
	Transfer *Transfer `json:"transfer,omitempty"`
	// Domains are the trained players' in-domain and off-domain changes
	// (Options.Trained).
	Domains []DomainTransfer `json:"domains,omitempty"`
}

// EnvInfo describes one environment of a report.
type EnvInfo struct {
	Name string `json:"name"`
	ID   string `json:"id"`
	// Curated reports whether its curated scenario set was played.
	Curated  bool     `json:"curated"`
	Sides    []string `json:"sides"`
	RewardLo float64  `json:"reward_lo"`
	RewardHi float64  `json:"reward_hi"`
}

// Cell is one pairing: a player in one side against an opponent.
type Cell struct {
	Env      string `json:"env"`
	Side     string `json:"side"`
	Player   string `json:"player"`
	Opponent string `json:"opponent"`
	// Reward is the player's mean reward, OpponentReward the opponent's.
	Reward         Estimate `json:"reward"`
	OpponentReward Estimate `json:"opponent_reward"`
	// Win is the rate of episodes whose result names the player's side
	// (Werewolf: the team won); absent where results never name a side.
	Win *Estimate `json:"win,omitempty"`
	// Results are the rates of the outcomes' verdicts (deal, no_deal,
	// walk_away, …).
	Results map[string]float64 `json:"results"`
	// InvalidRate and DefaultedRate are the player's rejected replies and
	// inert defaults per decision.
	InvalidRate   float64 `json:"invalid_rate"`
	DefaultedRate float64 `json:"defaulted_rate"`
	// Metrics are the means of the outcomes' metrics, as the game names
	// them (per-role ones carry the role: opening_buyer, agent_1/goal).
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// ToM are the means of the player's theory-of-mind trace scores.
	ToM *ToMCell `json:"tom,omitempty"`
}

// Difference is the paired difference Player − Than of mean rewards.
type Difference struct {
	Env      string   `json:"env,omitempty"`
	Side     string   `json:"side,omitempty"`
	Opponent string   `json:"opponent,omitempty"`
	Player   string   `json:"player"`
	Than     string   `json:"than"`
	Diff     Estimate `json:"diff"`
}

// Rating is a player's Bradley–Terry rating on the Elo scale.
type Rating struct {
	Player string   `json:"player"`
	Elo    Estimate `json:"elo"`
	// Wins, Ties and Losses count its paired comparisons.
	Wins   int `json:"wins"`
	Ties   int `json:"ties"`
	Losses int `json:"losses"`
}

// Transfer is players (rows) × environments (columns): the paired reward
// difference to the reference over an environment's sides and opponents
// (the mean reward where a row is the reference itself).
type Transfer struct {
	Envs []string      `json:"envs"`
	Rows []TransferRow `json:"rows"`
}

// TransferRow is one player's row.
type TransferRow struct {
	Player string `json:"player"`
	// Difference reports whether Cells are differences to the reference
	// (else mean rewards).
	Difference bool       `json:"difference"`
	Cells      []Estimate `json:"cells"`
}

// slotKey names a pairing slot: what every player is compared in.
type slotKey struct{ env, side, opponent string }

func newReport(o Options, es []*env, players, opponents []Player, results []Result) *Report {
	b := bootstrap{seed: o.Seed, resamples: o.Bootstrap, confidence: o.Confidence}
	rep := &Report{Seed: o.Seed, Episodes: o.Episodes, Confidence: o.Confidence, Bootstrap: o.Bootstrap}
	for _, p := range players {
		rep.Players = append(rep.Players, p.Name)
	}
	for _, p := range opponents {
		rep.Opponents = append(rep.Opponents, p.Name)
	}
	rep.Reference = reference(o.Reference, rep.Players)
	// byCell[slot][player][episode]
	type pk struct {
		slot   slotKey
		player string
	}
	byCell := map[pk]map[int]Result{}
	for _, r := range results {
		if r.Episode >= o.Episodes {
			continue
		}
		k := pk{slotKey{r.Env, r.Side, r.Opponent}, r.Player}
		if byCell[k] == nil {
			byCell[k] = map[int]Result{}
		}
		byCell[k][r.Episode] = r
	}
	episodes := func(slot slotKey, player string) []Result {
		m := byCell[pk{slot, player}]
		ks := make([]int, 0, len(m))
		for k := range m {
			ks = append(ks, k)
		}
		sort.Ints(ks)
		out := make([]Result, len(ks))
		for i, k := range ks {
			out[i] = m[k]
		}
		return out
	}
	var slots []slotKey
	for _, e := range es {
		lo, hi := e.game.RewardRange()
		rep.Envs = append(rep.Envs, EnvInfo{Name: e.Name, ID: e.game.ID(), Curated: e.curated, Sides: sideNames(e.sides), RewardLo: lo, RewardHi: hi})
		for _, s := range e.sides {
			for _, q := range rep.Opponents {
				slots = append(slots, slotKey{e.Name, s.Name, q})
			}
		}
	}
	sideSet := map[string]map[string]bool{}
	for _, e := range es {
		sideSet[e.Name] = map[string]bool{}
		for _, s := range e.sides {
			sideSet[e.Name][s.Name] = true
		}
	}
	for _, sl := range slots {
		for _, p := range rep.Players {
			rs := episodes(sl, p)
			tag := strings.Join([]string{sl.env, sl.side, p, sl.opponent}, "\x00")
			rep.Cells = append(rep.Cells, makeCell(b, tag, sl, p, rs, sideSet[sl.env]))
		}
	}
	// Paired differences: every pair of players, the reference second.
	var pairs [][2]string
	for i, a := range rep.Players {
		for _, c := range rep.Players[:i] {
			x, y := a, c
			if x == rep.Reference {
				x, y = y, x
			}
			pairs = append(pairs, [2]string{x, y})
		}
	}
	slices.SortStableFunc(pairs, func(p, q [2]string) int {
		return boolInt(p[1] != rep.Reference) - boolInt(q[1] != rep.Reference)
	})
	paired := func(sl slotKey, a, c string) []float64 {
		ma, mc := byCell[pk{sl, a}], byCell[pk{sl, c}]
		var ks []int
		for k := range ma {
			if _, ok := mc[k]; ok {
				ks = append(ks, k)
			}
		}
		sort.Ints(ks)
		d := make([]float64, len(ks))
		for i, k := range ks {
			d[i] = ma[k].Reward - mc[k].Reward
		}
		return d
	}
	for _, pr := range pairs {
		var all [][]float64
		for _, sl := range slots {
			d := paired(sl, pr[0], pr[1])
			all = append(all, d)
			if len(d) == 0 {
				continue
			}
			tag := strings.Join([]string{"diff", sl.env, sl.side, sl.opponent, pr[0], pr[1]}, "\x00")
			rep.Differences = append(rep.Differences, Difference{Env: sl.env, Side: sl.side, Opponent: sl.opponent,
				Player: pr[0], Than: pr[1], Diff: b.mean(tag, d)})
		}
		if est := b.strata("diff\x00all\x00"+pr[0]+"\x00"+pr[1], all); est.N > 0 {
			rep.Differences = append(rep.Differences, Difference{Player: pr[0], Than: pr[1], Diff: est})
		}
	}
	if len(rep.Players) >= 2 {
		rep.Ratings = ratings(b, rep.Players, slots, episodes)
	}
	rep.Transfer = transfer(b, rep, es, players, slots, paired, episodes)
	rep.Domains = domains(b, o.Trained, rep, es, slots, paired)
	return rep
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// reference resolves Options.Reference.
func reference(want string, names []string) string {
	switch {
	case want != "":
		return want
	case slices.Contains(names, players.KindBase):
		return players.KindBase
	case len(names) > 0:
		return names[0]
	}
	return ""
}

func makeCell(b bootstrap, tag string, sl slotKey, player string, rs []Result, sides map[string]bool) Cell {
	c := Cell{Env: sl.env, Side: sl.side, Player: player, Opponent: sl.opponent, Results: map[string]float64{}}
	own, other, win := make([]float64, len(rs)), make([]float64, len(rs)), make([]float64, len(rs))
	named := false
	var decisions, invalid, defaulted int
	sums, counts := map[string]float64{}, map[string]int{}
	for i, r := range rs {
		own[i], other[i] = r.Reward, r.OpponentReward
		if sides[r.Result] {
			named = true
		}
		if r.Result == sl.side {
			win[i] = 1
		}
		c.Results[r.Result]++
		decisions += r.Decisions
		invalid += r.Invalid
		defaulted += r.Defaulted
		for k, v := range r.Metrics {
			sums[k] += v
			counts[k]++
		}
	}
	for k := range c.Results {
		c.Results[k] /= float64(len(rs))
	}
	c.Reward = b.mean(tag+"\x00reward", own)
	c.OpponentReward = b.mean(tag+"\x00opponent", other)
	if named {
		w := b.mean(tag+"\x00win", win)
		c.Win = &w
	}
	if decisions > 0 {
		c.InvalidRate = float64(invalid) / float64(decisions)
		c.DefaultedRate = float64(defaulted) / float64(decisions)
	}
	c.ToM = tomCell(b, tag, rs)
	if len(sums) > 0 {
		c.Metrics = map[string]float64{}
		for k, s := range sums {
			c.Metrics[k] = s / float64(counts[k])
		}
	}
	return c
}

func ratings(b bootstrap, players []string, slots []slotKey, episodes func(slotKey, string) []Result) []Rating {
	var strata []btStratum
	out := make([]Rating, len(players))
	for _, sl := range slots {
		bySlot := map[int]btSlot{}
		for i, p := range players {
			for _, r := range episodes(sl, p) {
				s := bySlot[r.Episode]
				if s == nil {
					s = make(btSlot, len(players))
					for k := range s {
						s[k] = math.NaN()
					}
					bySlot[r.Episode] = s
				}
				s[i] = r.Reward
			}
		}
		ks := make([]int, 0, len(bySlot))
		for k := range bySlot {
			ks = append(ks, k)
		}
		sort.Ints(ks)
		var st btStratum
		for _, k := range ks {
			s := bySlot[k]
			st = append(st, s)
			for i := range s {
				for j := range s {
					if i == j || math.IsNaN(s[i]) || math.IsNaN(s[j]) {
						continue
					}
					switch {
					case s[i] > s[j]:
						out[i].Wins++
					case s[i] < s[j]:
						out[i].Losses++
					default:
						out[i].Ties++
					}
				}
			}
		}
		if len(st) > 0 {
			strata = append(strata, st)
		}
	}
	if len(strata) == 0 {
		return nil
	}
	for i, e := range b.ratings(len(players), strata) {
		out[i].Player, out[i].Elo = players[i], e
		out[i].Elo.N = out[i].Wins + out[i].Ties + out[i].Losses
	}
	return out
}

func transfer(b bootstrap, rep *Report, es []*env, ps []Player, slots []slotKey,
	paired func(slotKey, string, string) []float64, episodes func(slotKey, string) []Result) *Transfer {
	var rows []string
	for _, p := range ps {
		if p.KindOf() == players.KindAdapter {
			rows = append(rows, p.Name)
		}
	}
	if len(rows) == 0 {
		for _, p := range ps {
			if p.Name != rep.Reference {
				rows = append(rows, p.Name)
			}
		}
	}
	if len(rows) == 0 {
		return nil
	}
	t := &Transfer{Envs: envNames(es)}
	hasRef := slices.Contains(rep.Players, rep.Reference)
	for _, p := range rows {
		row := TransferRow{Player: p, Difference: hasRef && p != rep.Reference}
		for _, e := range es {
			var strata [][]float64
			for _, sl := range slots {
				if sl.env != e.Name {
					continue
				}
				if row.Difference {
					strata = append(strata, paired(sl, p, rep.Reference))
				} else {
					var xs []float64
					for _, r := range episodes(sl, p) {
						xs = append(xs, r.Reward)
					}
					strata = append(strata, xs)
				}
			}
			row.Cells = append(row.Cells, b.strata(strings.Join([]string{"transfer", e.Name, p}, "\x00"), strata))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}
