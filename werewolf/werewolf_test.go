package werewolf

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/engine/enginetest"
	"github.com/omar-selfplay/omar/seeds"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func TestConformance(t *testing.T) {
	t.Run("default", func(t *testing.T) { enginetest.Conformance(t, New()) })
	t.Run("witch_guard_9", func(t *testing.T) {
		enginetest.Conformance(t, New(), enginetest.Options{Seeds: 20, Params: engine.Params{"players": 9, "witch": true, "guard": true}})
	})
}

// cast plays werewolves with wolf and the others with village (policy
// names).
func cast(wolf, village string, seed uint64) engine.Cast {
	g := New()
	return func(s engine.Seat) (engine.Agent, string, error) {
		name := village
		if s.Team == TeamWerewolves {
			name = wolf
		}
		pol, err := engine.FindPolicy(g, name)
		if err != nil {
			return nil, "", err
		}
		return pol.New(s, seeds.Derive(seed, uint64(s.Index))), "scripted:" + name, nil
	}
}

func playGame(t testing.TB, seed uint64, p engine.Params, wolf, village string) (*engine.Record, *engine.Runtime) {
	t.Helper()
	var rt *engine.Runtime
	rec, err := engine.Play(context.Background(), New(), seed, p, cast(wolf, village, seed), engine.DefaultOptions(), func(r *engine.Runtime) { rt = r })
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	return rec, rt
}

// move is an accepted (or defaulted) move read back from a record.
type move struct {
	seat int
	info AskInfo
	text string
}

// moves reconstructs every applied move from the log: the action text
// that was acknowledged, or the default that was applied.
func moves(rec *engine.Record) []move {
	asked := map[string]AskInfo{}
	said := map[string]string{}
	var out []move
	for _, e := range rec.Events {
		switch e.Kind {
		case engine.KindNotification:
			asked[e.NotificationID] = e.Data.(AskInfo)
		case engine.KindAction:
			said[e.NotificationID] = e.Text
		case engine.KindAck:
			out = append(out, move{e.Seat, asked[e.NotificationID], said[e.NotificationID]})
		case engine.KindDefault:
			out = append(out, move{e.Seat, asked[e.NotificationID], e.Data.(map[string]string)["action"]})
		}
	}
	return out
}

// checkGame checks one finished game against the rules; it recomputes
// everything from the record with code independent of the episode's.
func checkGame(t *testing.T, rec *engine.Record, rt *engine.Runtime) {
	t.Helper()
	sc := rec.Scenario.(Scenario)
	terms := rec.Outcome.Terms.(Terms)
	n := len(sc.Roles)
	wolf := func(s int) bool { return sc.Roles[s] == Werewolf }
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d: %s", rec.Seed, fmt.Sprintf(format, args...))
	}

	// Privacy: what each seat may see.
	for s := range n {
		for _, e := range rt.Log().View(s) {
			if e.Kind == engine.KindOutcome {
				continue // the end of the game reveals the terms
			}
			if e.Audience.Team != "" && !wolf(s) {
				fail("%s %s (%s) saw team event %d %q", SeatName(s), sc.Roles[s], e.Kind, e.Seq, e.Text)
			}
			switch d := e.Data.(type) {
			case WolfChat, WolfChoices:
				if !wolf(s) {
					fail("%s (%s) saw werewolf event %d %q", SeatName(s), sc.Roles[s], e.Seq, e.Text)
				}
			case InspectResult:
				if d.Seer != s || sc.Roles[s] != Seer {
					fail("%s (%s) saw the seer's result %d %q", SeatName(s), sc.Roles[s], e.Seq, e.Text)
				}
			case WitchInfo:
				if d.Witch != s || sc.Roles[s] != Witch {
					fail("%s (%s) saw the witch's news %d %q", SeatName(s), sc.Roles[s], e.Seq, e.Text)
				}
			case Briefing:
				if d.Seat != s {
					fail("%s saw %s's briefing", SeatName(s), SeatName(d.Seat))
				}
				if wolf(s) != (len(d.Werewolves) > 0) {
					fail("%s (%s) briefing lists werewolves %v", SeatName(s), sc.Roles[s], d.Werewolves)
				}
			}
			if e.Kind == engine.KindNotification || e.Kind == engine.KindAction || e.Kind == engine.KindAck ||
				e.Kind == engine.KindValidationError || e.Kind == engine.KindDefault || e.Kind == engine.KindBriefing {
				if e.Seat != s {
					fail("%s saw %s event %d of %s", SeatName(s), e.Kind, e.Seq, SeatName(e.Seat))
				}
			}
		}
	}
	// No public event text names a role, apart from the move formats and
	// the end of the game.
	for _, e := range rec.Events {
		if !e.Audience.All || e.Kind == engine.KindOutcome {
			continue
		}
		if _, ok := e.Data.(SpeechEvent); ok {
			continue // players may claim whatever they like
		}
		for _, r := range []string{"werewolf.", "seer", "doctor", "witch", "guard", "villager."} {
			if strings.Contains(strings.ToLower(e.Text), " was a "+r) || strings.Contains(strings.ToLower(e.Text), "role: "+r) {
				fail("public event %d reveals a role: %q", e.Seq, e.Text)
			}
		}
	}

	// Replay deaths and votes.
	alive := make([]bool, n)
	for i := range alive {
		alive[i] = true
	}
	var order []int
	for _, e := range rec.Events {
		switch d := e.Data.(type) {
		case Deaths:
			for _, s := range d.Seats {
				if !alive[s] {
					fail("dead %s dies again", SeatName(s))
				}
				alive[s] = false
				order = append(order, s)
			}
		case VoteResult:
			count := make([]int, n)
			for _, v := range d.Votes {
				if v.Choice.Target >= 0 {
					if !alive[v.Choice.Target] || v.Choice.Target == v.Seat {
						fail("day %d: %s voted for %s", d.Cycle, SeatName(v.Seat), SeatName(v.Choice.Target))
					}
					count[v.Choice.Target]++
				}
			}
			top := slices.Max(count)
			atTop := 0
			for _, c := range count {
				if c == top {
					atTop++
				}
			}
			want := -1
			if top > 0 && atTop == 1 {
				want = slices.Index(count, top)
			}
			if d.Eliminated != want {
				fail("day %d: votes %v eliminate %d, want %d", d.Cycle, count, d.Eliminated, want)
			}
			if d.Tie != (top > 0 && atTop > 1) {
				fail("day %d: votes %v: tie flag %v", d.Cycle, count, d.Tie)
			}
			if want >= 0 {
				alive[want] = false
				order = append(order, want)
			}
		}
	}
	var gotOrder []int
	for _, el := range terms.Eliminations {
		gotOrder = append(gotOrder, el.Seat)
		if el.Role != sc.Roles[el.Seat] {
			fail("elimination of %s records role %s, dealt %s", el.Name, el.Role, sc.Roles[el.Seat])
		}
	}
	// Deaths of one night are announced in seat order, so compare as sets
	// per announcement by sorting both only within equal cycles.
	if len(gotOrder) != len(order) {
		fail("eliminations %v, announced %v", gotOrder, order)
	}
	wolves, others := 0, 0
	var living []int
	for s, a := range alive {
		if a {
			living = append(living, s)
			if wolf(s) {
				wolves++
			} else {
				others++
			}
		}
	}
	var termLiving []int
	for _, l := range terms.Living {
		termLiving = append(termLiving, l.Seat)
		if l.Role != sc.Roles[l.Seat] {
			fail("living %s recorded as %s, dealt %s", l.Name, l.Role, sc.Roles[l.Seat])
		}
	}
	if !slices.Equal(termLiving, living) {
		fail("terms list living %v, the log leaves %v", termLiving, living)
	}

	// The winner matches the final living roles.
	p := sc.Params
	switch w := terms.Winner; {
	case w == TeamVillagers && wolves != 0:
		fail("villagers win with %d werewolves alive", wolves)
	case w == TeamWerewolves && (wolves == 0 || wolves < others):
		fail("werewolves win with %d werewolves and %d others alive", wolves, others)
	case w == "draw" && (wolves == 0 || wolves >= others || terms.Cycles != p.MaxCycles):
		fail("draw with %d werewolves, %d others after %d cycles", wolves, others, terms.Cycles)
	case w != TeamVillagers && w != TeamWerewolves && w != "draw":
		fail("unknown winner %q", w)
	}
	if rec.Outcome.Result != terms.Winner {
		fail("result %q, winner %q", rec.Outcome.Result, terms.Winner)
	}

	// Rewards follow the documented rule.
	elim := map[int]int{}
	for _, el := range terms.Eliminations {
		elim[el.Seat] = el.Cycle
	}
	shaping := make([]float64, n)
	if p.Shaping.Enabled {
		shaping = recomputeShaping(rec)
	}
	for s := range n {
		want := 0.0
		if terms.Winner != "draw" {
			want = -1
			if sc.Teams[s] == terms.Winner {
				want = 1
			}
			if c, dead := elim[s]; dead {
				want *= math.Pow(p.Gamma, float64(terms.Cycles-c))
			}
		}
		if p.Shaping.Enabled {
			want = math.Max(-1, math.Min(1, want+shaping[s]))
		}
		if got := rec.Outcome.Rewards[s]; math.Abs(got-want) > 1e-12 {
			fail("%s (%s) reward %v, want %v (winner %s, eliminated %v)", SeatName(s), sc.Roles[s], got, want, terms.Winner, elim)
		}
	}
}

// recomputeShaping rebuilds the shaping bonuses from the log alone.
func recomputeShaping(rec *engine.Record) []float64 {
	sc := rec.Scenario.(Scenario)
	sh := sc.Params.Shaping
	n := len(sc.Roles)
	out := make([]float64, n)
	victim := map[int]int{}
	died := map[int][]int{}
	protected := map[int][]int{}
	witchSaved := map[int]int{}
	wolvesAt := map[int][]int{}
	for _, e := range rec.Events {
		switch d := e.Data.(type) {
		case WolfChoices:
			if d.Final {
				victim[d.Cycle] = d.Victim
				for _, c := range d.Choices {
					wolvesAt[d.Cycle] = append(wolvesAt[d.Cycle], c.Seat)
				}
			}
		case Deaths:
			died[d.Cycle] = d.Seats
		case InspectResult:
			if d.Werewolf {
				out[d.Seer] += sh.SeerFind
			}
		case VoteResult:
			for _, v := range d.Votes {
				if sc.Roles[v.Seat] != Werewolf && v.Choice.Target >= 0 && sc.Roles[v.Choice.Target] == Werewolf {
					out[v.Seat] += sh.CorrectVote
				}
			}
		}
	}
	for _, m := range moves(rec) {
		c := normaliseMove(m.text)
		switch {
		case m.info.Kind == AskProtect && strings.HasPrefix(c, VerbProtect):
			protected[m.info.Cycle] = append(protected[m.info.Cycle], m.seat, seatIndex(strings.TrimPrefix(c, VerbProtect+" "), n))
		case m.info.Kind == AskWitch && c == VerbSave:
			witchSaved[m.info.Cycle] = m.seat + 1
		}
	}
	for c, v := range victim {
		if v < 0 {
			continue
		}
		if slices.Contains(died[c], v) {
			for _, w := range wolvesAt[c] {
				out[w] += sh.Kill
			}
			continue
		}
		pr := protected[c]
		for i := 0; i < len(pr); i += 2 {
			if pr[i+1] == v {
				out[pr[i]] += sh.Save
			}
		}
		if w := witchSaved[c]; w > 0 {
			out[w-1] += sh.Save
		}
	}
	return out
}

var configs = []struct {
	name   string
	params engine.Params
}{
	{"default", nil},
	{"witch_guard_9", engine.Params{"players": 9, "witch": true, "guard": true}},
	{"witch_5_list", engine.Params{"roles": []any{"werewolf", "seer", "witch", "villager", "villager"}, "kill_rounds": 1}},
	{"shaping_8", engine.Params{"players": 8, "guard": true, "shaping": map[string]any{"enabled": true, "kill": 0.3, "correct_vote": 0.2, "save": 0.5, "seer_find": 0.25}}},
	{"short_cap", engine.Params{"players": 6, "max_cycles": 2, "gamma": 0.5}},
}

var matchups = [][2]string{{"heuristic", "heuristic"}, {"heuristic", "random"}, {"random", "heuristic"}, {"random", "random"}}

// TestScriptedGames plays 1,000 scripted games over every configuration
// and matchup and checks each against the rules.
func TestScriptedGames(t *testing.T) {
	games := 0
	// seen sums metrics and outcomes over all games, to show that every
	// rule path the checks cover was exercised.
	seen := map[string]float64{}
	for ci, cfg := range configs {
		t.Run(cfg.name, func(t *testing.T) {
			for seed := uint64(0); seed < 200; seed++ {
				m := matchups[seed%uint64(len(matchups))]
				s := seeds.Derive(seed, uint64(ci))
				rec, rt := playGame(t, s, cfg.params, m[0], m[1])
				checkGame(t, rec, rt)
				games++
				for k, v := range rec.Outcome.Metrics {
					seen[k] += v
				}
				for _, el := range rec.Outcome.Terms.(Terms).Eliminations {
					seen["cause_"+el.Cause]++
				}
				if rec.Outcome.Metrics["invalid_replies"] != 0 {
					t.Fatalf("seed %d: scripted play made %v invalid replies", s, rec.Outcome.Metrics["invalid_replies"])
				}
				if seed%20 == 0 {
					again, _ := playGame(t, s, cfg.params, m[0], m[1])
					a, _ := json.Marshal(rec)
					b, _ := json.Marshal(again)
					if string(a) != string(b) {
						t.Fatalf("seed %d: the same seed gave two different games", s)
					}
				}
			}
		})
	}
	if games != 1000 {
		t.Errorf("played %d games, want 1000", games)
	}
	for _, k := range []string{"werewolves_win", "villagers_win", "draw", "tied_votes", "saves", "wolf_kills",
		"no_consensus_nights", "seer_finds", "wolf_role_claims", "cause_poison", "cause_vote", "cause_werewolves"} {
		if seen[k] == 0 {
			t.Errorf("%s never happened in %d games", k, games)
		}
	}
	t.Logf("over %d games: %v", games, seen)
}

// TestWinRates measures heuristic against random villagers (and the other
// matchups) with the probes of docs/mission.md §4; the tables in docs/werewolf.md
// come from go test ./werewolf -run TestWinRates -v.
func TestWinRates(t *testing.T) {
	const games = 300
	for _, cfg := range []struct {
		name   string
		params engine.Params
	}{{"default 7 players (2 werewolves, seer, doctor, 3 villagers)", nil}, {"9 players with witch and guard", engine.Params{"players": 9, "witch": true, "guard": true}}} {
		var sum [4]map[string]float64
		for i, m := range matchups {
			sum[i] = map[string]float64{}
			for seed := uint64(0); seed < games; seed++ {
				rec, _ := playGame(t, seeds.Derive(seed, 99), cfg.params, m[0], m[1])
				for k, v := range rec.Outcome.Metrics {
					sum[i][k] += v
				}
			}
		}
		t.Logf("%s, %d games per row (seeds.Derive(0..%d, 99)):", cfg.name, games, games-1)
		t.Logf("| werewolves | villagers | werewolves win | villagers win | draw | mean cycles | villager vote accuracy | werewolf role claims / game | seer survival | saves / game |")
		t.Logf("|---|---|---|---|---|---|---|---|---|---|")
		for i, m := range matchups {
			r := sum[i]
			t.Logf("| %s | %s | %.3f | %.3f | %.3f | %.2f | %.3f | %.2f | %.3f | %.2f |", m[0], m[1],
				r["werewolves_win"]/games, r["villagers_win"]/games, r["draw"]/games, r["cycles"]/games,
				r["villager_correct_votes"]/r["villager_votes"], r["wolf_role_claims"]/games, r["seer_survived"]/games, r["saves"]/games)
		}
		hh, hr := sum[0]["villagers_win"]/games, sum[1]["villagers_win"]/games
		if hh <= hr+0.1 {
			t.Errorf("%s: heuristic villagers win %.3f, random villagers %.3f against heuristic werewolves; want heuristic ahead by more than 0.1", cfg.name, hh, hr)
		}
	}
}

func TestBriefingGolden(t *testing.T) {
	g := New()
	ep, err := g.NewEpisode(7, engine.Params{"players": 9, "witch": true, "guard": true})
	if err != nil {
		t.Fatal(err)
	}
	e := ep.(*episode)
	for _, role := range roleOrder {
		t.Run(role, func(t *testing.T) {
			seat := slices.Index(e.roles, role)
			if seat < 0 {
				t.Fatalf("no %s dealt", role)
			}
			got := e.briefing(seat)
			path := filepath.Join("testdata", "briefing_"+role+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if got != string(want) {
				t.Errorf("briefing of the %s: got\n%s\nwant\n%s", role, got, want)
			}
		})
	}
}

func BenchmarkEpisode(b *testing.B) {
	for _, m := range matchups {
		b.Run(m[0]+"_vs_"+m[1], func(b *testing.B) {
			b.ReportAllocs()
			seed := uint64(0)
			for b.Loop() {
				seed++
				playGame(b, seed, nil, m[0], m[1])
			}
		})
	}
}
