package arena

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/engine/enginetest"
	"github.com/omar-selfplay/omar/envs"
	"github.com/omar-selfplay/omar/players"
	"github.com/omar-selfplay/omar/seeds"
	"github.com/omar-selfplay/omar/selfplay"
	"github.com/omar-selfplay/omar/sotopia"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func scriptedOptions(episodes int, envList ...Env) Options {
	o := Options{}.Defaults()
	o.Envs = envList
	o.Episodes = episodes
	o.Parallel = 8
	o.Bootstrap = 500
	return o
}

func evaluate(t *testing.T, o Options, dir string, players, opponents []Player) *Report {
	t.Helper()
	rep, err := Evaluate(context.Background(), o, dir, players, opponents, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func cellOf(t *testing.T, rep *Report, env, side, player, opponent string) Cell {
	t.Helper()
	for _, c := range rep.Cells {
		if c.Env == env && c.Side == side && c.Player == player && c.Opponent == opponent {
			return c
		}
	}
	t.Fatalf("no cell %s/%s/%s/%s", env, side, player, opponent)
	return Cell{}
}

// playMeans plays n episodes of g the way `omar play --agents a,b` does
// (seeds.Derive(seed, k), sampled scenarios) and returns each seat's mean
// reward.
func playMeans(t *testing.T, g engine.Game, agents []string, n int) []float64 {
	t.Helper()
	sum := make([]float64, len(agents))
	for k := range n {
		seed := seeds.Derive(1, uint64(k))
		rec := enginetest.PlayScripted(t, g, seed, nil, agents...)
		for i, r := range rec.Outcome.Rewards {
			sum[i] += r
		}
	}
	for i := range sum {
		sum[i] /= float64(n)
	}
	return sum
}

// TestReproducesPlay: strategic against naive on Craigslist at 200
// episodes gives what omar play gives (buyer 1.00 / seller 0.00, and
// 0.10 / 0.90 with the roles swapped): the play means lie in the arena's
// intervals. The arena's deals are other ones (held-out seeds), from the
// same sampler.
func TestReproducesPlay(t *testing.T) {
	g, err := envs.Find("craigslist")
	if err != nil {
		t.Fatal(err)
	}
	o := scriptedOptions(200, Env{Name: "craigslist", Scenarios: ScenariosSeeds})
	rep := evaluate(t, o, "", []Player{scriptedPlayer("strategic")}, []Player{scriptedPlayer("naive")})
	tests := []struct {
		side     string
		agents   []string // omar play's --agents, by seat (buyer, seller)
		own      int      // the strategic seat
		wantPlay [2]float64
	}{
		{"buyer", []string{"strategic", "naive"}, 0, [2]float64{1.00, 0.00}},
		{"seller", []string{"naive", "strategic"}, 1, [2]float64{0.10, 0.90}},
	}
	for _, tt := range tests {
		t.Run(tt.side, func(t *testing.T) {
			play := playMeans(t, g, tt.agents, 200)
			for i := range play {
				if d := play[i] - tt.wantPlay[i]; d > 0.005 || d < -0.005 {
					t.Fatalf("omar play seat %d: %.4f, want %.2f (the measurement the issue quotes)", i, play[i], tt.wantPlay[i])
				}
			}
			c := cellOf(t, rep, "craigslist", tt.side, "scripted:strategic", "scripted:naive")
			if !c.Reward.Contains(play[tt.own]) {
				t.Errorf("strategic %s: arena %v, omar play %.4f outside it", tt.side, c.Reward, play[tt.own])
			}
			if !c.OpponentReward.Contains(play[1-tt.own]) {
				t.Errorf("naive opponent: arena %v, omar play %.4f outside it", c.OpponentReward, play[1-tt.own])
			}
			t.Logf("%s: arena %v (opponent %v), omar play %.4f / %.4f", tt.side, c.Reward, c.OpponentReward, play[0], play[1])
			if c.Reward.N != 200 || c.Results["deal"] != 1 {
				t.Errorf("n %d, deal rate %v; want 200 episodes, all deals", c.Reward.N, c.Results["deal"])
			}
		})
	}
}

// TestSelfDifference: a scripted player against itself (listed twice under
// two names) gives a paired difference whose interval contains 0 — exactly
// 0 here, because both play the same deals with the same seeds.
func TestSelfDifference(t *testing.T) {
	o := scriptedOptions(60, Env{Name: "casino"}, Env{Name: "dealornodeal"})
	a, b := scriptedPlayer("random"), scriptedPlayer("random")
	b.Name = "random-again"
	rep := evaluate(t, o, "", []Player{a, b}, []Player{scriptedPlayer("strategic")})
	if len(rep.Differences) == 0 {
		t.Fatal("no differences")
	}
	for _, d := range rep.Differences {
		if !d.Diff.Contains(0) || d.Diff.Mean != 0 {
			t.Errorf("%s/%s/%s: %s − %s = %v, want 0 inside", d.Env, d.Side, d.Opponent, d.Player, d.Than, d.Diff)
		}
	}
	// And a real difference is found: strategic against random.
	rep = evaluate(t, o, "", []Player{a, scriptedPlayer("strategic")}, []Player{scriptedPlayer("naive")})
	for _, d := range rep.Differences {
		if d.Env == "" && d.Diff.Contains(0) {
			t.Errorf("strategic − random over all pairings %v: want an interval without 0", d.Diff)
		}
	}
}

// TestCIWidthShrinksArena: the pairing intervals of a noisy pairing shrink
// like 1/√n.
func TestCIWidthShrinksArena(t *testing.T) {
	width := func(n int) float64 {
		rep := evaluate(t, scriptedOptions(n, Env{Name: "craigslist", Scenarios: ScenariosSeeds}),
			"", []Player{scriptedPlayer("random")}, []Player{scriptedPlayer("random")})
		w := 0.0
		for _, c := range rep.Cells {
			w += c.Reward.Width() / float64(len(rep.Cells))
		}
		return w
	}
	w50, w200 := width(50), width(200)
	if r := w200 / w50; r < 0.38 || r > 0.62 {
		t.Errorf("width at 200 / width at 50 = %.3f / %.3f = %.3f, want about 0.5", w200, w50, r)
	}
}

// TestDeterministic: the same seed gives the same report whatever the
// parallelism, and another seed another one.
func TestDeterministic(t *testing.T) {
	run := func(parallel int, seed uint64) []byte {
		o := scriptedOptions(24, Env{Name: "craigslist"}, Env{Name: "werewolf"})
		o.Parallel, o.Seed = parallel, seed
		rep := evaluate(t, o, "", []Player{scriptedPlayer("random"), scriptedPlayer("scripted")}, []Player{scriptedPlayer("random")})
		b, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b := run(1, 3), run(16, 3)
	if !bytes.Equal(a, b) {
		t.Errorf("parallel 1 and 16 gave different reports")
	}
	if bytes.Equal(a, run(4, 4)) {
		t.Errorf("seeds 3 and 4 gave the same report")
	}
}

// TestResume: an interrupted evaluation resumes without replaying the
// episodes it finished, and ends with the report of an uninterrupted one.
func TestResume(t *testing.T) {
	o := scriptedOptions(20, Env{Name: "craigslist"})
	players, opponents := []Player{scriptedPlayer("random"), scriptedPlayer("strategic")}, []Player{scriptedPlayer("naive")}
	want := evaluate(t, o, "", players, opponents)

	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	first := 0
	_, err := Evaluate(ctx, o, dir, players, opponents, Hooks{Episode: func(Result) {
		if first++; first == 30 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted: err %v, want context.Canceled", err)
	}
	saved := readResults(t, dir)
	if len(saved) < 30 || len(saved) >= 80 {
		t.Fatalf("%d results saved after the interrupt, want at least the 30 reported and fewer than all 80", len(saved))
	}
	// A torn last line (a crash mid-write) is ignored.
	f, err := os.OpenFile(filepath.Join(dir, ResultsFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"env":"craigsl`)
	f.Close()

	var startDone, replayed int
	got, err := Evaluate(context.Background(), o, dir, players, opponents, Hooks{
		Start:   func(total, done int) { startDone = done },
		Episode: func(Result) { replayed++ },
	})
	if err != nil {
		t.Fatal(err)
	}
	if startDone != len(saved) || replayed != 80-len(saved) {
		t.Errorf("resume: %d reused and %d played, want %d and %d", startDone, replayed, len(saved), 80-len(saved))
	}
	if a, b := mustJSON(t, got), mustJSON(t, want); !bytes.Equal(a, b) {
		t.Errorf("resumed report differs from an uninterrupted one")
	}
	if n := len(readResults(t, dir)); n != 80 {
		t.Errorf("%d results in the file, want 80", n)
	}
	// Other conditions are refused; more episodes extend the evaluation.
	o2 := o
	o2.Seed = 9
	if _, err := Evaluate(context.Background(), o2, dir, players, opponents, Hooks{}); err == nil || !strings.Contains(err.Error(), "other conditions") {
		t.Errorf("another seed in the same directory: err %v", err)
	}
	o3 := o
	o3.Episodes = 25
	replayed = 0
	if _, err := Evaluate(context.Background(), o3, dir, players, opponents, Hooks{Episode: func(Result) { replayed++ }}); err != nil || replayed != 20 {
		t.Errorf("5 more episodes per pairing: played %d, err %v; want 20", replayed, err)
	}
}

func readResults(t *testing.T, dir string) []Result {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rs, err := ReadResults(f)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHeldOutSeeds: the arena deals episode k from what a selfplay runner
// deals its episode FirstEpisode+k from, and none of those seeds is a
// training seed of the same run seed.
func TestHeldOutSeeds(t *testing.T) {
	g, _ := envs.Find("craigslist")
	r, err := selfplay.NewRunner(g, nil, nil, func() selfplay.Options {
		o := selfplay.Options{}.Defaults()
		o.Agents = map[string]string{"*": "scripted"}
		return o
	}())
	if err != nil {
		t.Fatal(err)
	}
	train := map[uint64]bool{}
	for i := range 200000 {
		train[r.EpisodeSeed(i)] = true
	}
	for k := range 5000 {
		s := seedOf(1, k)
		if s != r.EpisodeSeed(FirstEpisode+k) {
			t.Fatalf("episode %d: seed %#x, the runner deals %#x", k, s, r.EpisodeSeed(FirstEpisode+k))
		}
		if train[s] {
			t.Fatalf("held-out episode %d has the seed of a training episode", k)
		}
	}
}

func TestCuratedByDefault(t *testing.T) {
	tests := []struct {
		env       Env
		wantSet   bool
		wantSides string
	}{
		{Env{Name: "craigslist"}, true, "buyer,seller"},
		{Env{Name: "dealornodeal"}, true, "player_a,player_b"},
		{Env{Name: "craigslist", Scenarios: ScenariosSeeds}, false, "buyer,seller"},
		{Env{Name: "craigslist", Params: engine.Params{"scenario_set": "sampled"}}, false, "buyer,seller"},
		{Env{Name: "werewolf"}, false, "werewolves,villagers"},
		{Env{Name: "sealedbid"}, false, "bidder1,bidder2,bidder3"},
		{Env{Name: "sotopia"}, false, "agent_1,agent_2"},
		{Env{Name: "marketplace", Sides: []string{"seller"}}, true, "seller"},
	}
	for _, tt := range tests {
		t.Run(tt.env.Name, func(t *testing.T) {
			o := scriptedOptions(1, tt.env)
			es, err := o.resolve()
			if err != nil {
				t.Fatal(err)
			}
			if es[0].curated != tt.wantSet {
				t.Errorf("curated %v, want %v", es[0].curated, tt.wantSet)
			}
			if got := strings.Join(sideNames(es[0].sides), ","); got != tt.wantSides {
				t.Errorf("sides %s, want %s", got, tt.wantSides)
			}
		})
	}
	o := scriptedOptions(1, Env{Name: "craigslist", Sides: []string{"landlord"}})
	if _, err := o.resolve(); err == nil || !strings.Contains(err.Error(), "buyer, seller") {
		t.Errorf("unknown side: err %v", err)
	}
}

// TestWerewolfTeams: a player takes a whole team; the win rate is its
// team's, and the two compositions add up.
func TestWerewolfTeams(t *testing.T) {
	rep := evaluate(t, scriptedOptions(40, Env{Name: "werewolf"}), "", []Player{scriptedPlayer("heuristic")}, []Player{scriptedPlayer("random")})
	wolves := cellOf(t, rep, "werewolf", "werewolves", "scripted:heuristic", "scripted:random")
	village := cellOf(t, rep, "werewolf", "villagers", "scripted:heuristic", "scripted:random")
	for _, c := range []Cell{wolves, village} {
		if c.Win == nil {
			t.Fatalf("%s: no win rate", c.Side)
		}
		if got := c.Results[c.Side]; got != c.Win.Mean {
			t.Errorf("%s: win %v but result rate %v", c.Side, c.Win.Mean, got)
		}
		if _, ok := c.Metrics["villager_vote_accuracy"]; !ok {
			t.Errorf("%s: the game's probes are missing from %v", c.Side, c.Metrics)
		}
	}
	if wolves.Win.Mean <= 0.5 {
		t.Errorf("heuristic werewolves against random villagers win %.2f, want most games", wolves.Win.Mean)
	}
}

func TestOptionsValidate(t *testing.T) {
	ok := scriptedOptions(4, Env{Name: "craigslist"})
	tests := []struct {
		name string
		mod  func(*Options)
		want string
	}{
		{"ok", func(*Options) {}, ""},
		{"no env", func(o *Options) { o.Envs = nil }, "no environment"},
		{"unknown env", func(o *Options) { o.Envs = []Env{{Name: "chess"}} }, "unknown environment"},
		{"twice", func(o *Options) { o.Envs = append(o.Envs, o.Envs[0]) }, "twice"},
		{"scenarios", func(o *Options) { o.Envs[0].Scenarios = "all" }, "curated or seeds"},
		{"episodes", func(o *Options) { o.Episodes = 0 }, "episodes 0"},
		{"parallel", func(o *Options) { o.Parallel = 0 }, "parallel 0"},
		{"bootstrap", func(o *Options) { o.Bootstrap = 10 }, "bootstrap 10"},
		{"bootstrap huge", func(o *Options) { o.Bootstrap = 1e12 }, "bootstrap 1000000000000: want 100..1000000"},
		{"parallel huge", func(o *Options) { o.Parallel = 1 << 40 }, "parallel 1099511627776: want 1..4096"},
		{"confidence", func(o *Options) { o.Confidence = 1 }, "confidence"},
		{"reply", func(o *Options) { o.MaxTokens = 0 }, "max_tokens"},
		{"trace", func(o *Options) { o.Trace = "cot" }, "trace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := ok
			o.Envs = append([]Env(nil), ok.Envs...)
			tt.mod(&o)
			err := o.Validate()
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("err %v, want %q", err, tt.want)
			}
		})
	}
	// Players are checked by Evaluate.
	o := scriptedOptions(1, Env{Name: "werewolf"})
	for _, tc := range []struct {
		players, opponents []Player
		want               string
	}{
		{nil, []Player{scriptedPlayer("random")}, "at least one player"},
		{[]Player{scriptedPlayer("random"), scriptedPlayer("random")}, []Player{scriptedPlayer("random")}, "twice"},
		{[]Player{scriptedPlayer("naive")}, []Player{scriptedPlayer("random")}, `no scripted policy "naive"`},
		{[]Player{{Name: "x"}}, []Player{scriptedPlayer("random")}, "exactly one"},
	} {
		if _, err := Evaluate(context.Background(), o, "", tc.players, tc.opponents, Hooks{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("players %v: err %v, want %q", tc.players, err, tc.want)
		}
	}
	o.Reference = "nobody"
	if _, err := Evaluate(context.Background(), o, "", []Player{scriptedPlayer("random")}, []Player{scriptedPlayer("random")}, Hooks{}); err == nil || !strings.Contains(err.Error(), "reference") {
		t.Errorf("unknown reference: err %v", err)
	}
}

// TestReportGolden pins the Markdown report and the SVG of a small
// scripted evaluation (regenerate with go test ./arena -run Golden
// -update).
func TestReportGolden(t *testing.T) {
	o := scriptedOptions(12, Env{Name: "craigslist"}, Env{Name: "werewolf", Params: engine.Params{"players": 5}})
	o.Bootstrap = 200
	rep := evaluate(t, o, "", []Player{scriptedPlayer("scripted"), scriptedPlayer("random")}, []Player{scriptedPlayer("random")})
	var md bytes.Buffer
	if err := rep.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := rep.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{MarkdownFile, JSONFile, SVGFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("WriteFiles: %v", err)
		}
	}
	golden(t, "report.md", md.Bytes())
	golden(t, "reward.svg", rep.SVG())
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run with -update after checking the change):\n%s", name, got)
	}
}

// FuzzReadResults: any input is read or rejected, never a panic; what is
// read writes back and reads the same.
func FuzzReadResults(f *testing.F) {
	f.Add([]byte(`{"env":"craigslist","side":"buyer","player":"base","opponent":"scripted:naive","episode":3,"seed":7,"reward":0.5,"opponent_reward":0.2,"result":"deal","decisions":4,"invalid":1,"defaulted":0}` + "\n"))
	f.Add([]byte("{\"env\":\"a\"}\n{"))
	f.Add([]byte("\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, err := ReadResults(bytes.NewReader(data))
		if err != nil {
			return
		}
		var buf bytes.Buffer
		for _, r := range rs {
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			buf.Write(append(b, '\n'))
		}
		again, err := ReadResults(&buf)
		if err != nil || len(again) != len(rs) {
			t.Fatalf("round trip: %d results → %d, %v", len(rs), len(again), err)
		}
	})
}

// TestSotopiaJudged: with a judge attached (Env.Game), the judge's scores
// are the players' rewards and their own behaviour metrics.
func TestSotopiaJudged(t *testing.T) {
	// Agent 1 scores the top of every dimension, agent 2 the bottom.
	reply := func() string {
		var b strings.Builder
		b.WriteString("{")
		for a := range 2 {
			if a > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"agent_%d":{`, a+1)
			for i, d := range sotopia.EvalDimensions {
				if i > 0 {
					b.WriteString(",")
				}
				s := d.Hi
				if a == 1 {
					s = d.Lo
				}
				fmt.Fprintf(&b, `"%s":{"reasoning":"r","score":%d}`, d.Key, s)
			}
			b.WriteString("}")
		}
		return b.String() + "}"
	}()
	j, err := sotopia.NewJudge(sotopia.CompleterFunc(func(context.Context, sotopia.Completion) (string, error) { return reply, nil }), sotopia.JudgeOptions{}.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	o := scriptedOptions(4, Env{Name: "sotopia", Game: sotopia.New().WithJudge(j)})
	rep := evaluate(t, o, "", []Player{scriptedPlayer("scripted")}, []Player{scriptedPlayer("random")})
	first := cellOf(t, rep, "sotopia", "agent_1", "scripted", "scripted:random")
	second := cellOf(t, rep, "sotopia", "agent_2", "scripted", "scripted:random")
	if first.Results["judged"] != 1 || first.Metrics["agent_1/goal"] != 10 || second.Metrics["agent_2/goal"] != 0 {
		t.Fatalf("judge scores missing: %v / %v", first.Metrics, second.Metrics)
	}
	if !(first.Reward.Mean > second.Reward.Mean) {
		t.Errorf("agent_1 (top scores) reward %v, agent_2 (bottom) %v", first.Reward, second.Reward)
	}
	var md bytes.Buffer
	rep.Markdown(&md)
	if !strings.Contains(md.String(), "## Behaviour: sotopia") || !strings.Contains(md.String(), "| goal |") {
		t.Errorf("the judge's goal score is not a behaviour column:\n%s", md.String())
	}
}

// TestRecords: with Records, every played episode's record lands in
// RecordsFile, and each agrees with its result line (seed, agents,
// rewards).
func TestRecords(t *testing.T) {
	o := scriptedOptions(6, Env{Name: "craigslist"})
	o.Records = true
	dir := t.TempDir()
	rep := evaluate(t, o, dir, []Player{scriptedPlayer("strategic")}, []Player{scriptedPlayer("naive")})
	if len(rep.Cells) != 2 {
		t.Fatalf("%d cells, want 2", len(rep.Cells))
	}
	checkRecords(t, dir, 12)
}

// TestRecordsResume: an evaluation interrupted after a record was written
// and before its result (the last result line lost, a torn record after
// it) resumes to one record per result, in the results' order.
func TestRecordsResume(t *testing.T) {
	o := scriptedOptions(6, Env{Name: "craigslist"})
	o.Records = true
	dir := t.TempDir()
	players, opponents := []Player{scriptedPlayer("strategic")}, []Player{scriptedPlayer("naive")}
	evaluate(t, o, dir, players, opponents)
	results := filepath.Join(dir, ResultsFile)
	b, err := os.ReadFile(results)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	if err := os.WriteFile(results, bytes.Join(lines[:len(lines)-3], nil), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, RecordsFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"env":"craigslist_v1","se`); err != nil {
		t.Fatal(err)
	}
	f.Close()
	evaluate(t, o, dir, players, opponents)
	checkRecords(t, dir, 12)
}

// checkRecords checks that dir holds want results and one record per
// result, in the same order, agreeing on seed, agent and reward.
func checkRecords(t *testing.T, dir string, want int) {
	t.Helper()
	results := readResults(t, dir)
	f, err := os.Open(filepath.Join(dir, RecordsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []engine.Record
	dec := json.NewDecoder(f)
	for dec.More() {
		var r engine.Record
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	if len(recs) != len(results) || len(recs) != want {
		t.Fatalf("%d records, %d results; want %d of each", len(recs), len(results), want)
	}
	for i, r := range recs {
		res := results[i]
		seat := -1
		for j, s := range r.Seats {
			if s.Role == res.Side {
				seat = j
			}
		}
		if r.Seed != uint64(res.Seed) || seat < 0 || r.Seats[seat].Agent != res.Player || r.Outcome.Rewards[seat] != res.Reward {
			t.Errorf("record %d (seed %d, seats %+v, rewards %v) does not match result %+v", i, r.Seed, r.Seats, r.Outcome.Rewards, res)
		}
	}
}

// TestKeepLines: the file keeps its first n lines, whatever their length;
// a file with n lines or fewer (a torn last line included) is left as it is.
func TestKeepLines(t *testing.T) {
	long := strings.Repeat("x", 10000) // longer than the reader's buffer
	lines := "a\n" + long + "\nb\n"
	for _, c := range []struct {
		name, in string
		n        int
		want     string
	}{
		{"none kept", lines, 0, ""},
		{"one", lines, 1, "a\n"},
		{"past a long line", lines, 2, "a\n" + long + "\n"},
		{"all", lines, 3, lines},
		{"more than there are", lines, 5, lines},
		{"a torn line after n", lines + `{"se`, 3, lines},
		{"a torn line within n", lines + `{"se`, 4, lines + `{"se`},
		{"empty", "", 2, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f.jsonl")
			if err := os.WriteFile(path, []byte(c.in), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := keepLines(path, c.n); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Errorf("kept %d bytes, want %d", len(got), len(c.want))
			}
		})
	}
	if err := keepLines(filepath.Join(t.TempDir(), "missing"), 1); err != nil {
		t.Errorf("a missing file: %v", err)
	}
}

// TestImport: results a player played in one evaluation count as another
// player's in a second one under the same conditions, which then plays only
// the rest; other conditions, a missing source or results already there
// import nothing.
func TestImport(t *testing.T) {
	o := scriptedOptions(6, Env{Name: "craigslist"})
	opponents := []Player{scriptedPlayer("naive")}
	policy := scriptedPlayer("random")
	policy.Name = "policy"
	src := t.TempDir()
	evaluate(t, o, src, []Player{policy}, opponents)

	trained := scriptedPlayer("random")
	trained.Name, trained.Version = "trained", "iteration 3"
	dst := t.TempDir()
	n, err := Import(dst, src, o, "policy", trained)
	if err != nil || n != 12 {
		t.Fatalf("imported %d, err %v; want 12 (2 sides × 6 episodes)", n, err)
	}
	if n, err := Import(dst, src, o, "policy", trained); err != nil || n != 0 {
		t.Errorf("a second import added %d, err %v; want 0", n, err)
	}
	later := trained
	later.Version = "iteration 4"
	if n, err := Import(t.TempDir(), src, o, "policy", later); err != nil || n != 12 {
		t.Errorf("another version imported %d, err %v; want 12", n, err)
	}
	players := []Player{trained, scriptedPlayer("strategic")}
	var reused, played int
	got, err := Evaluate(context.Background(), o, dst, players, opponents, Hooks{
		Start:   func(total, done int) { reused = done },
		Episode: func(Result) { played++ },
	})
	if err != nil {
		t.Fatal(err)
	}
	if reused != 12 || played != 12 {
		t.Errorf("%d reused and %d played, want 12 and 12", reused, played)
	}
	if a, b := mustJSON(t, got), mustJSON(t, evaluate(t, o, "", players, opponents)); !bytes.Equal(a, b) {
		t.Errorf("the report with imported results differs from one played in full")
	}

	o2 := o
	o2.Seed = 9
	for _, tc := range []struct {
		name, src string
		o         Options
	}{
		{"other conditions", src, o2},
		{"no source", filepath.Join(t.TempDir(), "none"), o},
	} {
		if n, err := Import(t.TempDir(), tc.src, tc.o, "policy", trained); err != nil || n != 0 {
			t.Errorf("%s: imported %d, err %v; want 0", tc.name, n, err)
		}
	}
}

// TestFileOrder: results.jsonl and episodes.jsonl hold the same lines in
// the same order whatever the parallelism (episodes of Werewolf and
// Craigslist finish in a different order than they start).
func TestFileOrder(t *testing.T) {
	files := func(parallel int) (results, records []byte) {
		o := scriptedOptions(6, Env{Name: "craigslist"}, Env{Name: "werewolf"})
		o.Parallel, o.Records = parallel, true
		dir := t.TempDir()
		evaluate(t, o, dir, []Player{scriptedPlayer("random"), scriptedPlayer("scripted")}, []Player{scriptedPlayer("random")})
		var err error
		if results, err = os.ReadFile(filepath.Join(dir, ResultsFile)); err != nil {
			t.Fatal(err)
		}
		if records, err = os.ReadFile(filepath.Join(dir, RecordsFile)); err != nil {
			t.Fatal(err)
		}
		return results, records
	}
	res1, rec1 := files(1)
	for _, parallel := range []int{16, 16} {
		res, rec := files(parallel)
		if !bytes.Equal(res, res1) {
			t.Errorf("parallel %d: %s differs from parallel 1's (%d and %d bytes)", parallel, ResultsFile, len(res), len(res1))
		}
		if !bytes.Equal(rec, rec1) {
			t.Errorf("parallel %d: %s differs from parallel 1's (%d and %d bytes)", parallel, RecordsFile, len(rec), len(rec1))
		}
	}
}

// scriptedPlayer is the player of the games' scripted policy name.
func scriptedPlayer(name string) Player { return players.Scripted(name) }
