package export

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/games/casino"
	"github.com/omar-selfplay/omar/games/sealedbid"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/scripted"
	"github.com/omar-selfplay/omar/seeds"
	"github.com/omar-selfplay/omar/selfplay"
	"github.com/omar-selfplay/omar/werewolf"
	"github.com/parquet-go/parquet-go"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// episode is one scripted episode of the test sets.
type episode struct {
	game   engine.Game
	params engine.Params
	agents []string
	seed   uint64
}

// goldenEpisodes is the small CaSiNo/Werewolf set of the golden files: a
// strategic and a random (invalid replies, retries) negotiation and a
// short Werewolf game (hidden roles, a werewolf-only channel).
var goldenEpisodes = []episode{
	{casino.New(), nil, []string{"strategic"}, 11},
	{casino.New(), nil, []string{"random", "naive"}, 12},
	{werewolf.New(), engine.Params{"players": 5, "max_cycles": 2}, []string{"heuristic"}, 13},
}

func play(t *testing.T, eps []episode) []engine.Record {
	t.Helper()
	var out []engine.Record
	for _, ep := range eps {
		cast, err := engine.ScriptedCast(ep.game, ep.agents, ep.seed)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := engine.Play(context.Background(), ep.game, ep.seed, ep.params, cast, engine.DefaultOptions(), nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, *rec)
	}
	return out
}

// jsonl encodes values one per line, as omar's writers do.
func jsonl[T any](t *testing.T, vs []T) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for i := range vs {
		if err := enc.Encode(&vs[i]); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// lines decodes every line of a JSONL input with decode (the reference the
// read-back is compared with).
func lines[T any](t *testing.T, in []byte, decode func([]byte) (T, error)) []T {
	t.Helper()
	var out []T
	for i, l := range bytes.Split(bytes.TrimSpace(in), []byte("\n")) {
		v, err := decode(l)
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		out = append(out, v)
	}
	return out
}

func export(t *testing.T, in []byte, opts Options) ([]byte, Stats) {
	t.Helper()
	var out bytes.Buffer
	st, err := Export(context.Background(), bytes.NewReader(in), &out, opts)
	if err != nil {
		t.Fatal(err)
	}
	return out.Bytes(), st
}

// readParquet reads every row of a Parquet file with parquet-go's reader.
func readParquet[T any](t *testing.T, file []byte) ([]T, *parquet.File) {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	r := parquet.NewGenericReader[T](bytes.NewReader(file))
	defer r.Close()
	rows := make([]T, r.NumRows())
	n, err := r.Read(rows)
	if n != len(rows) {
		t.Fatalf("read %d of %d rows: %v", n, len(rows), err)
	}
	return rows, f
}

// diffJSON reports the first differing field of two values by their JSON.
func diffJSON(got, want any) string {
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	var gm, wm map[string]any
	json.Unmarshal(g, &gm)
	json.Unmarshal(w, &wm)
	for k, wv := range wm {
		if !reflect.DeepEqual(gm[k], wv) {
			return fmt.Sprintf("field %s: got %v, want %v", k, gm[k], wv)
		}
	}
	for k := range gm {
		if _, ok := wm[k]; !ok {
			return fmt.Sprintf("field %s: got %v, want none", k, gm[k])
		}
	}
	return "same JSON, different Go values"
}

// syntheticTrajectories covers what a rollout writes and the edges of the
// schema: teams or none, segments, shaped turns, guard flags absent,
// empty and non-empty, seeds above 2^63, long streams.
func syntheticTrajectories(n int) []selfplay.Trajectory {
	rng := rand.New(rand.NewPCG(1, 2))
	var out []selfplay.Trajectory
	for i := range n {
		t := selfplay.Trajectory{
			Env: "werewolf_v1", Episode: i / 3, Seed: seeds.JSON(rng.Uint64()), Scenario: fmt.Sprintf("werewolf_v1#%d", i/3),
			Seat: i % 3, SeatName: fmt.Sprintf("p%d", i%3+1), Role: []string{"werewolf", "seer", "villager"}[i%3],
			Agent: "llama:tiny.gguf", Segment: i % 2, Reward: rng.Float64()*2 - 1, ShapedTurns: i%4 == 0,
		}
		if i%3 == 0 {
			t.Team = "werewolves"
		}
		if i%2 == 0 {
			acc, exact, ant, antExact := rng.Float64(), float64(i%4/2), rng.Float64(), float64(i%3%2)
			t.InferAccuracy, t.InferExact, t.AnticipateAccuracy, t.AnticipateExact = &acc, &exact, &ant, &antExact
		}
		turns := 1 + rng.IntN(4)
		for k := range turns {
			prompt := 1 + rng.IntN(200*(i%5+1))
			for range prompt {
				t.Tokens = append(t.Tokens, rng.Int32N(32000))
				t.Mask = append(t.Mask, false)
				t.Logprobs = append(t.Logprobs, 0)
				t.RawLogprobs = append(t.RawLogprobs, 0)
			}
			for range 1 + rng.IntN(40) {
				t.Tokens = append(t.Tokens, rng.Int32N(32000))
				t.Mask = append(t.Mask, true)
				t.Logprobs = append(t.Logprobs, -rng.Float32()*5)
				t.RawLogprobs = append(t.RawLogprobs, -rng.Float32()*6)
			}
			t.TurnEnds = append(t.TurnEnds, len(t.Tokens)-1)
			if i%3 == 1 {
				if t.Allowed == nil {
					t.Allowed = map[int]inference.AllowedTokens{}
				}
				last := t.Tokens[len(t.Tokens)-1]
				t.Allowed[len(t.Tokens)-1] = inference.AllowedTokens{IDs: []int32{last, last + 1}, LogMass: -rng.Float32()}
			}
			t.TurnRewards = append(t.TurnRewards, rng.NormFloat64())
			t.PolicyVersions = append(t.PolicyVersions, i/4+k)
		}
		if i%2 == 1 {
			t.TurnFlags = make([][]string, turns)
			for k := range t.TurnFlags {
				t.TurnFlags[k] = []string{}
				if (i+k)%3 == 0 {
					t.TurnFlags[k] = []string{"invalid", "defaulted"}
				}
			}
		}
		out = append(out, t)
	}
	return out
}

// rolloutTrajectories are trajectories as omar rollout writes them: a
// scripted backend with the tiny models' tokenizer plays sealed-bid.
func rolloutTrajectories(t *testing.T) []selfplay.Trajectory {
	t.Helper()
	b, err := scripted.New(scripted.Options{Rule: func(req inference.Request) string { return "BID 7" }, PolicyVersion: 3})
	if err != nil {
		t.Fatal(err)
	}
	opts := selfplay.Options{}.Defaults()
	opts.Seed, opts.Parallel, opts.MaxTokens, opts.Context = 5, 2, 16, 2048
	r, err := selfplay.NewRunner(sealedbid.New(), &selfplay.Player{Label: "scripted", Backend: b, Tokenizer: b}, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	var out []selfplay.Trajectory
	if _, err := r.Run(context.Background(), 0, 2, func(res *selfplay.EpisodeResult) error {
		out = append(out, res.Trajectories...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("the rollout wrote no trajectories")
	}
	return out
}

func TestParquetTrajectoriesRoundTrip(t *testing.T) {
	trajs := append(syntheticTrajectories(17), rolloutTrajectories(t)...)
	in := jsonl(t, trajs)
	want := lines(t, in, DecodeTrajectory)
	file, st := export(t, in, Options{Format: Parquet, RowGroupRows: 4})
	if st.Kind != Trajectories || st.Records != len(want) || st.Rows != len(want) {
		t.Errorf("stats: got %+v, want kind %s and %d records and rows", st, Trajectories, len(want))
	}
	rows, f := readParquet[TrajectoryRow](t, file)
	if got, wantGroups := len(f.RowGroups()), (len(want)+3)/4; got != wantGroups || st.RowGroups != wantGroups {
		t.Errorf("row groups: got %d in the file, %d counted, want %d", got, st.RowGroups, wantGroups)
	}
	if v, ok := f.Lookup("omar.kind"); !ok || v != "trajectories" {
		t.Errorf("metadata omar.kind: got %q, want trajectories", v)
	}
	if len(rows) != len(want) {
		t.Fatalf("rows: got %d, want %d", len(rows), len(want))
	}
	for i := range rows {
		got := rows[i].Trajectory()
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("row %d: %s", i, diffJSON(got, want[i]))
		}
		if err := got.Validate(); err != nil {
			t.Errorf("row %d: %v", i, err)
		}
	}
	// Null and empty guard flags stay apart.
	if rows[0].TurnFlags != nil || rows[1].TurnFlags == nil {
		t.Errorf("turn_flags: got %v and %v, want null (no guard) and lists", rows[0].TurnFlags, rows[1].TurnFlags)
	}
}

func TestParquetEpisodesRoundTrip(t *testing.T) {
	eps := append(append([]episode{}, goldenEpisodes...),
		episode{sealedbid.New(), engine.Params{"bidders": 2, "rounds": 2}, []string{"shading"}, 3},
		episode{werewolf.New(), engine.Params{"players": 7, "witch": true}, []string{"heuristic"}, 4},
	)
	recs := play(t, eps)
	in := jsonl(t, recs)
	want := lines(t, in, DecodeRecord)
	file, st := export(t, in, Options{Format: Parquet, RowGroupRows: 2})
	if st.Kind != Episodes || st.Rows != len(recs) || st.RowGroups != 3 {
		t.Errorf("stats: got %+v, want %d episode rows in 3 row groups", st, len(recs))
	}
	rows, f := readParquet[EpisodeRow](t, file)
	if v, _ := f.Lookup("omar.kind"); v != "episodes" {
		t.Errorf("metadata omar.kind: got %q, want episodes", v)
	}
	if len(rows) != len(want) {
		t.Fatalf("rows: got %d, want %d", len(rows), len(want))
	}
	for i := range rows {
		if rows[i].Index != int64(i) {
			t.Errorf("row %d: index %d", i, rows[i].Index)
		}
		got, err := rows[i].Record()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("row %d (%s): %s", i, want[i].Env, diffJSON(got, want[i]))
		}
	}
	if rows[0].Params != nil || rows[2].Params == nil || rows[0].Scenario == nil {
		t.Errorf("params/scenario: got %v, %v, %v; want null for defaults, JSON text otherwise", rows[0].Params, rows[2].Params, rows[0].Scenario)
	}
}

func TestParquetRowGroupBytes(t *testing.T) {
	in := jsonl(t, syntheticTrajectories(5))
	// Every trajectory is larger than 100 bytes of values: one per group.
	_, st := export(t, in, Options{Format: Parquet, RowGroupBytes: 100})
	if st.RowGroups != 5 {
		t.Errorf("row groups: got %d, want 5", st.RowGroups)
	}
}

func TestExportDeterministic(t *testing.T) {
	in := jsonl(t, play(t, goldenEpisodes[:1]))
	for _, f := range []Format{Parquet, Chat} {
		a, _ := export(t, in, Options{Format: f})
		b, _ := export(t, in, Options{Format: f})
		if !bytes.Equal(a, b) {
			t.Errorf("%s: two exports of one input differ", f)
		}
	}
}

func TestExportProgress(t *testing.T) {
	in := jsonl(t, syntheticTrajectories(7))
	var seen []int
	_, err := Export(context.Background(), bytes.NewReader(in), &bytes.Buffer{}, Options{
		Format: Parquet, ProgressEvery: 3, Progress: func(s Stats) { seen = append(seen, s.Records) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{3, 6, 7}; !reflect.DeepEqual(seen, want) {
		t.Errorf("progress: got %v, want %v", seen, want)
	}
}

func TestChatGolden(t *testing.T) {
	inPath := filepath.Join("testdata", "episodes.jsonl")
	goldPath := filepath.Join("testdata", "chat.golden.jsonl")
	if *update {
		if err := os.WriteFile(inPath, jsonl(t, play(t, goldenEpisodes)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in, err := os.ReadFile(inPath)
	if err != nil {
		t.Fatal(err)
	}
	got, st := export(t, in, Options{Format: Chat})
	if st.Records != len(goldenEpisodes) || st.Rows != 2+2+5 {
		t.Errorf("stats: got %+v, want %d records and 9 conversations", st, len(goldenEpisodes))
	}
	if *update {
		if err := os.WriteFile(goldPath, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range min(len(g), len(w)) {
			if g[i] != w[i] {
				t.Fatalf("line %d differs from %s (go test -update rewrites it):\n got %.300s\nwant %.300s", i+1, goldPath, g[i], w[i])
			}
		}
		t.Fatalf("got %d lines, want %d (go test -update rewrites %s)", len(g), len(w), goldPath)
	}
	// Every line is a conversation a chat template takes.
	for i, l := range bytes.Split(bytes.TrimSpace(got), []byte("\n")) {
		var row ChatRow
		if err := decodeStrict(l, &row); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if len(row.Messages) == 0 || row.Messages[0].Role != "system" {
			t.Errorf("line %d: first message %v, want the seat's briefing as system message", i+1, row.Messages[:min(1, len(row.Messages))])
		}
	}
}

// leaks returns the texts of events hidden from seat that a conversation
// contains although no event the seat may see contains them (in its text
// or its legal replies).
func leaks(rec *engine.Record, seat int, msgs []ChatMessage) []string {
	var visible []string
	for _, e := range rec.Events {
		if e.Audience.Includes(seat) {
			visible = append(visible, e.Text)
			visible = append(visible, e.Legal...)
		}
	}
	seen := func(text string) bool {
		for _, v := range visible {
			if strings.Contains(v, text) {
				return true
			}
		}
		return false
	}
	var out []string
	for _, e := range rec.Events {
		if e.Audience.Includes(seat) || e.Text == "" || seen(e.Text) {
			continue
		}
		for _, m := range msgs {
			if strings.Contains(m.Content, e.Text) {
				out = append(out, e.Text)
				break
			}
		}
	}
	return out
}

// TestChatNoLeak checks on freshly played games that no seat's
// conversation holds another seat's private text: briefings, hidden roles,
// private values, the werewolves' channel, other seats' replies.
func TestChatNoLeak(t *testing.T) {
	var eps []episode
	for s := range uint64(4) {
		eps = append(eps,
			episode{werewolf.New(), engine.Params{"players": 7, "witch": true, "guard": true}, []string{"heuristic"}, 100 + s},
			episode{casino.New(), nil, []string{"strategic", "random"}, 200 + s},
		)
	}
	private, omniscient := 0, 0
	for i, rec := range play(t, eps) {
		for _, row := range ChatRows(i, &rec, 0) {
			if l := leaks(&rec, row.Seat, row.Messages); len(l) > 0 {
				t.Errorf("%s seed %d seat %d: its conversation holds hidden text %q", rec.Env, rec.Seed, row.Seat, l[0])
			}
			if row.Reward != rec.Outcome.Rewards[row.Seat] || row.Role != rec.Seats[row.Seat].Role {
				t.Errorf("%s seat %d: reward %v role %q, want %v %q", rec.Env, row.Seat, row.Reward, row.Role, rec.Outcome.Rewards[row.Seat], rec.Seats[row.Seat].Role)
			}
			// The check can fail: the omniscient log leaks to every seat.
			var all []ChatMessage
			for _, m := range selfplay.RenderEvents(rec.Events, false, nil, 0) {
				all = append(all, ChatMessage{Role: m.Role, Content: m.Content})
			}
			private++
			if len(leaks(&rec, row.Seat, all)) > 0 {
				omniscient++
			}
		}
	}
	if private == 0 || omniscient != private {
		t.Errorf("the leak check caught the omniscient log for %d of %d seats, want all", omniscient, private)
	}
}

func TestExportErrors(t *testing.T) {
	traj := string(jsonl(t, syntheticTrajectories(1)))
	rec := string(jsonl(t, play(t, goldenEpisodes[:1])))
	tests := []struct {
		name string
		in   string
		opts Options
		line int    // the *LineError's line, 0 for none
		want string // in the error
	}{
		{"corrupt line", traj + traj + "{\"env\": \n", Options{Format: Parquet}, 3, "unexpected EOF"},
		{"blank lines count", "\n" + traj + "\n\n" + "not json\n", Options{Format: Parquet}, 5, "invalid character"},
		{"unknown field", strings.Replace(traj, `"env"`, `"environment"`, 1), Options{Format: Parquet, Kind: Trajectories}, 1, `unknown field "environment"`},
		{"broken invariant", strings.Replace(traj, `"mask":"0`, `"mask":"`, 1), Options{Format: Parquet}, 1, "tokens"},
		{"two objects on a line", strings.TrimSuffix(traj, "\n") + " {}\n", Options{Format: Parquet, Kind: Trajectories}, 1, "one record per line"},
		{"undetectable", `{"hello":1}` + "\n", Options{Format: Parquet}, 1, "neither an episode record"},
		{"kind mismatch", rec, Options{Format: Parquet, Kind: Trajectories}, 1, "the line holds episodes, not trajectories"},
		{"trajectory among episodes", rec + traj, Options{Format: Chat}, 2, "the line holds trajectories"},
		{"rewards per seat", replaceLast(rec, `"rewards":[`, `"rewards":[0.5,`), Options{Format: Chat}, 1, "3 rewards for 2 seats"},
		{"chat of trajectories", traj, Options{Format: Chat}, 0, "chat JSONL is made from episode records"},
		{"chat of trajectories named", traj, Options{Format: Chat, Kind: Trajectories}, 0, "chat JSONL is made from episode records"},
		{"empty input", "\n\n", Options{Format: Parquet}, 0, "the input is empty"},
		{"bad format", traj, Options{Format: "csv"}, 0, `unknown format "csv"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Export(context.Background(), strings.NewReader(tc.in), &bytes.Buffer{}, tc.opts)
			if err == nil {
				t.Fatalf("got no error, want one containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error: got %q, want it to contain %q", err, tc.want)
			}
			var le *LineError
			switch {
			case tc.line == 0 && errors.As(err, &le):
				t.Errorf("error %q names line %d, want no line", err, le.Line)
			case tc.line > 0 && !errors.As(err, &le):
				t.Errorf("error %q: want a *LineError", err)
			case tc.line > 0 && le.Line != tc.line:
				t.Errorf("error %q: got line %d, want %d", err, le.Line, tc.line)
			}
		})
	}
}

// replaceLast replaces the last old in s (a record's outcome comes after
// its events, whose outcome event holds the same fields).
func replaceLast(s, old, new string) string {
	i := strings.LastIndex(s, old)
	return s[:i] + new + s[i+len(old):]
}

func TestExportCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	in := jsonl(t, syntheticTrajectories(2))
	if _, err := Export(ctx, bytes.NewReader(in), &bytes.Buffer{}, Options{Format: Parquet}); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

// FuzzExport feeds arbitrary input to both formats: an export either
// fails with a clear error (a *LineError for a bad line) or writes a file
// whose rows read back, one per record.
func FuzzExport(f *testing.F) {
	traj, _ := json.Marshal(syntheticTrajectories(2)[1])
	f.Add(traj)
	f.Add(append(append(traj, '\n'), traj...))
	f.Add([]byte(`{"env":"x_v1","env_name":"x","env_version":1,"seed":1,"seats":[{"index":0,"name":"a","role":"r","agent":"s"}],` +
		`"scenario":null,"events":[{"seq":1,"kind":"briefing","audience":{"seats":[0]},"seat":0,"text":"hi"}],"outcome":{"rewards":[1],"result":"deal"}}`))
	f.Add([]byte(`{"tokens":[1],"mask":"1"}`))
	f.Add([]byte("\n\n{}\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, format := range []Format{Parquet, Chat} {
			var out bytes.Buffer
			st, err := Export(context.Background(), bytes.NewReader(in), &out, Options{Format: format})
			if err != nil {
				var le *LineError
				if !errors.As(err, &le) && !strings.Contains(err.Error(), "empty") && !errors.Is(err, errChatTrajectories) {
					t.Fatalf("%s: error %q names no line", format, err)
				}
				continue
			}
			if format != Parquet {
				continue
			}
			f, err := parquet.OpenFile(bytes.NewReader(out.Bytes()), int64(out.Len()))
			if err != nil {
				t.Fatalf("the written file does not open: %v", err)
			}
			if f.NumRows() != int64(st.Records) {
				t.Fatalf("rows: got %d, want %d records", f.NumRows(), st.Records)
			}
		}
	})
}

// TestExportTornLastLine: a file whose last line a full disk or a kill
// cut short exports every whole record before it, with a warning naming
// the torn line; a bad line anywhere else still stops the export.
func TestExportTornLastLine(t *testing.T) {
	traj := string(jsonl(t, syntheticTrajectories(2)))
	rec := string(jsonl(t, play(t, goldenEpisodes[:2])))
	for _, tc := range []struct {
		name     string
		in       string
		format   Format
		want     int // records exported
		wantTorn int
	}{
		{"trajectories", traj + traj[:40], Parquet, 2, 3},
		{"episodes to parquet", rec + rec[:100], Parquet, 2, 3},
		{"episodes to chat", rec + rec[:100], Chat, 2, 3},
		{"whole last line without newline", strings.TrimSuffix(traj, "\n"), Parquet, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var warned []error
			st, err := Export(context.Background(), strings.NewReader(tc.in), &bytes.Buffer{},
				Options{Format: tc.format, Warn: func(err error) { warned = append(warned, err) }})
			if err != nil {
				t.Fatalf("got %v, want the whole records exported", err)
			}
			if st.Records != tc.want || st.TornLine != tc.wantTorn {
				t.Errorf("got %d records, torn line %d; want %d, %d", st.Records, st.TornLine, tc.want, tc.wantTorn)
			}
			if tc.wantTorn > 0 && (len(warned) != 1 || !strings.Contains(warned[0].Error(), fmt.Sprintf("line %d: skipped a torn last line", tc.wantTorn))) {
				t.Errorf("got warnings %v, want one naming line %d", warned, tc.wantTorn)
			}
		})
	}
	// The same cut in the middle of the file is corruption, not a torn write.
	if _, err := Export(context.Background(), strings.NewReader(traj[:40]+"\n"+traj), &bytes.Buffer{}, Options{Format: Parquet}); err == nil {
		t.Error("a cut line in the middle: got no error, want one")
	}
}

// TestExportNegativeTokenID: a trajectory with a negative token id is
// refused, naming its line.
func TestExportNegativeTokenID(t *testing.T) {
	trs := syntheticTrajectories(2)
	trs[1].Tokens[0] = -5
	_, err := Export(context.Background(), bytes.NewReader(jsonl(t, trs)), &bytes.Buffer{}, Options{Format: Parquet})
	var le *LineError
	if !errors.As(err, &le) || le.Line != 2 || !strings.Contains(err.Error(), "id -5 < 0") {
		t.Errorf("got %v, want a line 2 error naming id -5", err)
	}
}

// TestParquetCoversEveryTrajectoryField guards the round trip against a
// field added to selfplay.Trajectory but not to TrajectoryRow: the
// synthetic trajectories must set every exported field somewhere (else
// the round trip could not notice it dropped), and every field set before
// the Parquet file must be set after it.
func TestParquetCoversEveryTrajectoryField(t *testing.T) {
	trajs := syntheticTrajectories(17)
	file, _ := export(t, jsonl(t, trajs), Options{Format: Parquet})
	rows, _ := readParquet[TrajectoryRow](t, file)
	if len(rows) != len(trajs) {
		t.Fatalf("rows: got %d, want %d", len(rows), len(trajs))
	}
	typ := reflect.TypeFor[selfplay.Trajectory]()
	for f := range typ.NumField() {
		field := typ.Field(f)
		if !field.IsExported() {
			continue
		}
		set, kept := false, true
		for i := range trajs {
			in := reflect.ValueOf(trajs[i]).Field(f)
			out := reflect.ValueOf(rows[i].Trajectory()).Field(f)
			if !in.IsZero() {
				set = true
				kept = kept && !out.IsZero()
			}
		}
		switch {
		case !set:
			t.Errorf("Trajectory.%s: no synthetic trajectory sets it, so the round trip cannot check it", field.Name)
		case !kept:
			t.Errorf("Trajectory.%s: set before the Parquet file, lost after it", field.Name)
		}
	}
}

// TestChatMaxLegal: a chat export writes the conversation a policy read,
// legal-replies line included or left out as it was trained.
func TestChatMaxLegal(t *testing.T) {
	recs := play(t, []episode{{werewolf.New(), engine.Params{"players": 7}, []string{"heuristic"}, 5}})
	count := func(maxLegal int) int {
		var out bytes.Buffer
		if _, err := Export(context.Background(), bytes.NewReader(jsonl(t, recs)), &out, Options{Format: Chat, MaxLegal: maxLegal}); err != nil {
			t.Fatal(err)
		}
		return strings.Count(out.String(), "Legal replies:")
	}
	if listed, never := count(0), count(-1); listed == 0 || never != 0 {
		t.Errorf("legal-replies lines: %d with max_legal 0, %d with -1; want some and none", listed, never)
	}
}

// TestChatSeedString: a chat export writes each row's seed as its exact
// decimal string, also above 2^53 (a dataset tool reading a number would
// round it), from records whose seed is a string (as records are written
// now) or a number (as older files hold it).
func TestChatSeedString(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("testdata", "episodes.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := bytes.Cut(in, []byte("\n"))
	for _, seed := range []string{`"18446744073709551315"`, `18446744073709551315`} {
		line := bytes.Replace(first, []byte(`"seed":11`), []byte(`"seed":`+seed), 1)
		got, _ := export(t, append(line, '\n'), Options{Format: Chat})
		rows := bytes.Split(bytes.TrimSpace(got), []byte("\n"))
		for i, l := range rows {
			if !bytes.Contains(l, []byte(`"seed":"18446744073709551315"`)) {
				t.Errorf("seed %s: row %d has no exact string seed: %.200s", seed, i, l)
			}
			var row ChatRow
			if err := decodeStrict(l, &row); err != nil || uint64(row.Seed) != 18446744073709551315 {
				t.Errorf("seed %s: row %d reads seed %d (%v)", seed, i, row.Seed, err)
			}
		}
	}
	var old ChatRow
	if err := json.Unmarshal([]byte(`{"messages":[],"seed":12}`), &old); err != nil || old.Seed != 12 {
		t.Errorf("an older row's numeric seed reads as %d (%v), want 12", old.Seed, err)
	}
}

func TestStatsSummary(t *testing.T) {
	st := Stats{Kind: Episodes, Records: 3, Rows: 6}
	if got, want := st.Summary(Chat), "3 episodes → 6 conversations"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := st.Summary(Parquet), "3 episodes → 6 rows"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
