package arena

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/internal/jsonl"
	"github.com/omar-selfplay/omar/seeds"
)

// Files an evaluation writes in its directory.
const (
	ResultsFile = "results.jsonl"  // one Result per finished episode (resume)
	ConfigFile  = "arena.json"     // the conditions the results were played under
	RecordsFile = "episodes.jsonl" // with Options.Records: every played episode's record
)

// Result is one finished episode of one pairing: a line of results.jsonl.
type Result struct {
	Env             string `json:"env"`
	Side            string `json:"side"`
	Player          string `json:"player"`
	PlayerVersion   string `json:"player_version,omitempty"`
	Opponent        string `json:"opponent"`
	OpponentVersion string `json:"opponent_version,omitempty"`
	// Episode counts from 0 within the pairing; every pairing of an
	// environment plays the same deal in its episode k.
	Episode int        `json:"episode"`
	Seed    seeds.JSON `json:"seed"` // a decimal string in JSON, exact in JavaScript; numbers still read
	// Scenario is the curated scenario's id, when the game names it.
	Scenario string `json:"scenario,omitempty"`
	// Reward is the mean terminal reward of the player's seats,
	// OpponentReward that of the other seats.
	Reward         float64 `json:"reward"`
	OpponentReward float64 `json:"opponent_reward"`
	// Result is the outcome's verdict ("deal", "no_deal", "walk_away",
	// "werewolves", …).
	Result string `json:"result"`
	// Decisions, Invalid and Defaulted count the player's seats'
	// notifications, rejected replies and inert defaults.
	Decisions int `json:"decisions"`
	Invalid   int `json:"invalid"`
	Defaulted int `json:"defaulted"`
	// Metrics are the outcome's metrics (behaviour, probes, judge scores).
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// ToM are the player's theory-of-mind trace scores (Options.Trace
	// "tom"; arena/tom.go), absent where not measured.
	ToM *ToMResult `json:"tom,omitempty"`
}

// key identifies the pairing episode a result belongs to.
func (r *Result) key() resultKey {
	return resultKey{r.Env, r.Side, r.Player, r.PlayerVersion, r.Opponent, r.OpponentVersion, r.Episode}
}

type resultKey struct {
	env, side, player, playerVersion, opponent, opponentVersion string
	episode                                                     int
}

// newResult reads a finished episode's record.
func newResult(rec *engine.Record, side Side, e *env, p, o Player, episode int) Result {
	r := Result{
		Env: e.Name, Side: side.Name, Player: p.Name, PlayerVersion: p.Version,
		Opponent: o.Name, OpponentVersion: o.Version, Episode: episode, Seed: seeds.JSON(rec.Seed),
		Result: rec.Outcome.Result, Metrics: rec.Outcome.Metrics,
	}
	var sc struct {
		ID string `json:"id"`
	}
	if b, err := json.Marshal(rec.Scenario); err == nil && json.Unmarshal(b, &sc) == nil {
		r.Scenario = sc.ID
	}
	mine := map[int]bool{}
	var own, other float64
	var nOwn, nOther int
	for i, s := range rec.Seats {
		if side.Has(s.Seat) {
			mine[i] = true
			own += rec.Outcome.Rewards[i]
			nOwn++
		} else {
			other += rec.Outcome.Rewards[i]
			nOther++
		}
	}
	r.Reward = own / float64(max(nOwn, 1))
	r.OpponentReward = other / float64(max(nOther, 1))
	for _, ev := range rec.Events {
		if !mine[ev.Seat] {
			continue
		}
		switch ev.Kind {
		case engine.KindNotification:
			r.Decisions++
		case engine.KindValidationError:
			r.Invalid++
		case engine.KindDefault:
			r.Defaulted++
		}
	}
	return r
}

// ReadResults reads a results file; a trailing partial line (an
// interrupted write) is ignored.
func ReadResults(r io.Reader) ([]Result, error) {
	var out []Result
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return out, nil // a line without its newline was cut short
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var res Result
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&res); err != nil {
			return nil, fmt.Errorf("arena: results line %d: %w", n, err)
		}
		if res.Env == "" || res.Side == "" || res.Player == "" || res.Opponent == "" || res.Episode < 0 {
			return nil, fmt.Errorf("arena: results line %d: missing env, side, player, opponent or episode", n)
		}
		out = append(out, res)
	}
}

// conditions are what every result of a directory was played under: a
// resumed evaluation with other conditions would mix incomparable
// episodes. Players, opponents and the episode count may change (new
// pairings are played, finished ones reused).
type conditions struct {
	Seed           uint64  `json:"seed"`
	Envs           []Env   `json:"envs"`
	MaxTokens      int     `json:"max_tokens"`
	Context        int     `json:"context"`
	MinReplyTokens int     `json:"min_reply_tokens"`
	Temperature    float32 `json:"temperature"`
	TopK           int     `json:"top_k"`
	TopP           float32 `json:"top_p"`
	MinP           float32 `json:"min_p"`
	Grammar        bool    `json:"grammar"`
	// MaxLegal is left out at its default, so the conditions of older
	// evaluations still match.
	MaxLegal   int    `json:"max_legal,omitempty"`
	Trace      string `json:"trace,omitempty"`
	MaxRetries int    `json:"max_retries"`
	// ScenarioCount is left out at 0, its default, for the same reason.
	ScenarioCount int `json:"scenario_count,omitempty"`
}

func (o Options) conditions() conditions {
	return conditions{
		Seed: o.Seed, Envs: o.Envs, MaxTokens: o.MaxTokens, Context: o.Context, MinReplyTokens: o.MinReplyTokens,
		Temperature: o.Sampling.Temperature, TopK: o.Sampling.TopK, TopP: o.Sampling.TopP, MinP: o.Sampling.MinP,
		Grammar: o.Grammar, MaxLegal: o.MaxLegal, Trace: o.Trace, MaxRetries: o.MaxRetries,
		ScenarioCount: o.ScenarioCount,
	}
}

// conditionsFile is the ConfigFile of an evaluation under o.
func (o Options) conditionsFile() ([]byte, error) {
	b, err := json.MarshalIndent(o.conditions(), "", "  ")
	return append(b, '\n'), err
}

// openDir checks (or records) the conditions in dir and returns the
// results already there.
func openDir(dir string, o Options) ([]Result, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	want, err := o.conditionsFile()
	if err != nil {
		return nil, err
	}
	cpath := filepath.Join(dir, ConfigFile)
	got, err := os.ReadFile(cpath)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if _, err := os.Stat(filepath.Join(dir, ResultsFile)); err == nil {
			return nil, fmt.Errorf("arena: %s has %s but no %s: not an evaluation directory of this version", dir, ResultsFile, ConfigFile)
		}
		if err := os.WriteFile(cpath, want, 0o644); err != nil {
			return nil, err
		}
		return nil, nil
	case err != nil:
		return nil, err
	case !bytes.Equal(got, want):
		return nil, fmt.Errorf("arena: %s holds results played under other conditions (%s differs: seed, environments, reply settings); use another directory or remove it", dir, ConfigFile)
	}
	return readResultsFile(dir)
}

// Import adds to the evaluation in dir the results that player from
// played in an earlier evaluation in src, recorded as player to's: an
// evaluation that would play the same weights on the same deals under the
// same conditions (a run's held-out evaluation of its last iteration and
// its before/after comparison) reads them instead of playing them again.
// Episode k of a pairing has the same seeds whoever plays it, so a replay
// differs only by the float rounding of other batch neighbours, which
// leaves the tokens the same (docs/results/2026-12-03-rollout-issue-14.md,
// KV slots). Import
// returns how many results it added: none when src holds none or was
// played under other conditions, or dir already has results of to (its
// name and version).
func Import(dir, src string, o Options, from string, to Player) (int, error) {
	want, err := o.conditionsFile()
	if err != nil {
		return 0, err
	}
	got, err := os.ReadFile(filepath.Join(src, ConfigFile))
	if errors.Is(err, os.ErrNotExist) || err == nil && !bytes.Equal(got, want) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	old, err := readResultsFile(src)
	if err != nil {
		return 0, err
	}
	have, err := openDir(dir, o)
	if err != nil {
		return 0, err
	}
	for i := range have {
		if have[i].Player == to.Name && have[i].PlayerVersion == to.Version {
			return 0, nil
		}
	}
	w, _, err := jsonl.Append(filepath.Join(dir, ResultsFile))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range old {
		if r.Player != from {
			continue
		}
		r.Player, r.PlayerVersion = to.Name, to.Version
		if err := w.Write(r); err != nil {
			w.Close()
			return n, err
		}
		n++
	}
	return n, w.Close()
}

// readResultsFile reads the results in dir (none: nil).
func readResultsFile(dir string) ([]Result, error) {
	f, err := os.Open(filepath.Join(dir, ResultsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadResults(f)
}
