package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/omar-selfplay/omar/arena"
	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/internal/atomicfile"
	"github.com/omar-selfplay/omar/internal/jsonl"
	"github.com/omar-selfplay/omar/players"
	"github.com/omar-selfplay/omar/runfiles"
	"github.com/omar-selfplay/omar/selfplay"
)

// EvalOptions configure the held-out evaluation inside a run (the eval
// section): the current policy plays the opponents on the arena's
// held-out scenarios before the first iteration and after every Every-th.
type EvalOptions struct {
	// Every evaluates after every Every-th iteration (0: never).
	Every int `yaml:"every"`
	// Episodes per pairing (player × opponent × side × environment).
	Episodes int `yaml:"episodes"`
	// Opponents are arena player specs of scripted policies.
	Opponents []string `yaml:"opponents"`
	// Envs default to the run's environment with its parameters.
	Envs []arena.Env `yaml:"envs"`
	// Temperature samples the policy's replies in the evaluations and the
	// before/after comparison (0: greedy, the policy's most likely move);
	// unset, they are sampled as the rollouts sample (rollout.temperature),
	// which measures the policy that is trained.
	Temperature *float32 `yaml:"temperature,omitempty"`
}

// DefaultEval is a run's eval section when it has none: off; when on, 32
// episodes per pairing against the naive and the strategic scripts.
func DefaultEval() EvalOptions {
	return EvalOptions{Episodes: 32, Opponents: []string{"scripted:naive", "scripted:strategic"}}
}

// Validate reports the first invalid field.
func (e EvalOptions) Validate() error {
	switch {
	case e.Temperature != nil && (!finite(float64(*e.Temperature)) || *e.Temperature < 0):
		return fmt.Errorf("eval.temperature %v: want a finite number ≥ 0", *e.Temperature)
	case e.Every < 0:
		return fmt.Errorf("eval.every %d < 0", e.Every)
	case e.Every == 0:
		return nil
	case e.Episodes < 1 || e.Episodes > 1<<20:
		return fmt.Errorf("eval.episodes %d: want 1..%d", e.Episodes, 1<<20)
	case len(e.Opponents) == 0:
		return errors.New("eval.opponents: none")
	}
	if _, err := ScriptedOpponents(e.Opponents); err != nil {
		return fmt.Errorf("eval.opponents: %w", err)
	}
	return nil
}

// ScriptedOpponents are the arena players of specs, which must name
// scripted policies (a run, and a recipe built on runs, evaluates its
// policy against fixed scripts).
func ScriptedOpponents(specs []string) ([]arena.Player, error) {
	opps := make([]arena.Player, len(specs))
	for i, s := range specs {
		spec, err := players.Parse(s)
		if err != nil {
			return nil, err
		}
		if spec.Kind != players.KindScripted {
			return nil, fmt.Errorf("%s: a run evaluates against scripted policies", s)
		}
		opps[i] = players.Scripted(spec.Arg)
	}
	return opps, nil
}

// MeanRewardBy averages the cells' mean rewards by key (a side, an
// environment, a player) and over all cells.
func MeanRewardBy(cells []arena.Cell, key func(arena.Cell) string) (map[string]float64, float64) {
	sums, counts, all := map[string]float64{}, map[string]int{}, 0.0
	for _, c := range cells {
		sums[key(c)] += c.Reward.Mean
		counts[key(c)]++
		all += c.Reward.Mean
	}
	for k := range sums {
		sums[k] /= float64(counts[k])
	}
	if len(cells) > 0 {
		all /= float64(len(cells))
	}
	return sums, all
}

// Evaluation is one held-out evaluation of a run's policy: one line of
// eval.jsonl.
type Evaluation struct {
	// Iteration is the number of completed iterations (0: the starting
	// policy).
	Iteration int `json:"iteration"`
	// Reward is the policy's mean held-out reward per side over
	// opponents and environments; Mean over every pairing.
	Reward map[string]float64 `json:"reward"`
	Mean   float64            `json:"mean"`
	// Cells are the arena's pairings with their confidence intervals.
	Cells []arena.Cell `json:"cells"`
}

// ReadEvaluations reads a run's eval.jsonl (none: nil). A torn last line
// (a kill mid-write; resume cuts it) is left out.
func ReadEvaluations(path string) ([]Evaluation, error) {
	var out []Evaluation
	_, err := jsonl.ReadFile(path, 0, func(l jsonl.Line) error {
		var e Evaluation
		if err := json.Unmarshal(l.Bytes, &e); err != nil {
			return err
		}
		out = append(out, e)
		return nil
	})
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// evalDue reports whether an evaluation is due after it completed
// iterations.
func (r *Run) evalDue(it int) bool {
	e := r.opts.Eval
	if e.Every == 0 || r.player == nil {
		return false
	}
	return it == 0 || it%e.Every == 0 || it == r.opts.Iterations
}

// EvalsAfter is the number of held-out evaluations the run plays after
// iteration it: those of the later iterations, and with it = 0 the
// starting policy's when it is due and not yet played.
func (r *Run) EvalsAfter(it int) int {
	n := 0
	if it == 0 && r.state.Evals == 0 && r.evalDue(0) {
		n++
	}
	for k := it + 1; k <= r.opts.Iterations; k++ {
		if r.evalDue(k) {
			n++
		}
	}
	return n
}

// ArenaOptions are the evaluation's arena options: the run's reply
// settings, so the policy is measured as it plays, at eval.temperature
// where the section sets one.
func (r *Run) ArenaOptions() arena.Options {
	e, ro := r.opts.Eval, r.opts.Rollout
	a := ro.ArenaOptions(r.runnerContext)
	a.Envs = e.Envs
	if len(a.Envs) == 0 {
		a.Envs = []arena.Env{{Name: ro.Env, Params: engine.Params(ro.Params), Game: r.game}}
	}
	a.Episodes = e.Episodes
	if e.Temperature != nil {
		a.Sampling.Temperature = *e.Temperature
	}
	return a
}

// ArenaOptions are arena options that play model seats as ro's rollouts
// do (seed, parallelism, retries and the whole selfplay.Reply: budget,
// sampling, grammar, legal-replies line, trace), with seat streams of
// ctxLen tokens.
func (ro *RolloutOptions) ArenaOptions(ctxLen int) arena.Options {
	a := arena.Options{}.Defaults()
	a.Seed, a.Parallel = ro.Seed, ro.Parallel
	a.Reply = ro.Reply
	a.Context, a.MinReplyTokens = ctxLen, min(ro.MinReplyTokens, ro.MaxTokens)
	if ro.MaxRetries != nil {
		a.MaxRetries = *ro.MaxRetries
	}
	return a
}

// evalPlayer names the policy in the held-out evaluations' results.
const evalPlayer = "policy"

// evaluate plays the held-out evaluation after it completed iterations,
// appends it to eval.jsonl and keeps the best policy so far in best/.
func (r *Run) evaluate(ctx context.Context, it int) (*Evaluation, error) {
	opps, err := ScriptedOpponents(r.opts.Eval.Opponents)
	if err != nil {
		return nil, err
	}
	cur := arena.Player{Name: evalPlayer, Version: "iteration " + strconv.Itoa(it), Kind: players.KindAdapter,
		Model: &selfplay.Player{Label: r.player.Label, Backend: r.player.Backend, Tokenizer: r.player.Tokenizer}}
	dir := r.Path(filepath.Join(runfiles.EvalDir, "iter-"+strconv.Itoa(it)))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	rep, err := arena.Evaluate(ctx, r.ArenaOptions(), dir, []arena.Player{cur}, opps, arena.Hooks{})
	if err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	if err := rep.WriteFiles(dir); err != nil {
		return nil, err
	}
	ev := &Evaluation{Iteration: it, Cells: rep.Cells}
	ev.Reward, ev.Mean = MeanRewardBy(rep.Cells, func(c arena.Cell) string { return c.Side })
	b, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	if err := appendFile(r.Path(runfiles.EvalFile), append(b, '\n')); err != nil {
		return nil, err
	}
	if it > 0 && (r.state.BestIteration == 0 || ev.Mean > r.state.BestEval) {
		if err := r.keepBest(it, ev); err != nil {
			return nil, err
		}
	}
	return ev, nil
}

// keepBest copies the current adapter to best/ with its evaluation.
func (r *Run) keepBest(it int, ev *Evaluation) error {
	if err := os.MkdirAll(r.Path(runfiles.BestDir), 0o755); err != nil {
		return err
	}
	b, err := os.ReadFile(r.Path(runfiles.AdapterFile))
	if err != nil {
		return err
	}
	if err := writeFileAtomic(r.Path(filepath.Join(runfiles.BestDir, runfiles.AdapterFile)), b); err != nil {
		return err
	}
	js, err := json.MarshalIndent(ev, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(r.Path(filepath.Join(runfiles.BestDir, "eval.json")), append(js, '\n')); err != nil {
		return err
	}
	r.state.BestIteration, r.state.BestEval = it, ev.Mean
	return nil
}

// writeFileAtomic writes path so that a crash leaves the old file or the
// new one (package atomicfile).
func writeFileAtomic(path string, b []byte) error { return atomicfile.Write(path, b, 0o644) }

// Compare plays the starting model (the base weights) and the trained
// policy side by side against the eval section's opponents on the same
// held-out scenarios, so the report's paired differences are the run's
// held-out gain with its confidence intervals. The report is also written
// to compare/ in the run directory.
func (r *Run) Compare(ctx context.Context, h arena.Hooks) (*arena.Report, error) {
	e := r.opts.Eval
	if e.Every == 0 {
		return nil, errors.New("compare: the run has no eval section (eval.every = 0)")
	}
	opps, err := ScriptedOpponents(e.Opponents)
	if err != nil {
		return nil, err
	}
	model := func(adapter string) *selfplay.Player {
		return &selfplay.Player{Label: r.player.Label, Backend: r.player.Backend, Tokenizer: r.player.Tokenizer, Adapter: adapter}
	}
	players := []arena.Player{
		{Name: "base", Version: "start", Kind: players.KindBase, Model: model(inference.AdapterBase)},
		{Name: "trained", Version: "iteration " + strconv.Itoa(r.state.Iteration), Kind: players.KindAdapter, Model: model("")},
	}
	o := r.ArenaOptions()
	o.Reference = "base"
	dir := r.Path(runfiles.CompareDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// The evaluations after the last iteration and before the first
	// played these players on these deals already; the first's policy is
	// the base weights unless the run started from an adapter (LoRA's B
	// starts at zero).
	if err := r.importEval(dir, o, r.state.Iteration, players[1]); err != nil {
		return nil, err
	}
	if r.opts.Rollout.Adapter == "" && !r.opts.Train.Full {
		if err := r.importEval(dir, o, 0, players[0]); err != nil {
			return nil, err
		}
	}
	rep, err := arena.Evaluate(ctx, o, dir, players, opps, h)
	if err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	return rep, rep.WriteFiles(dir)
}

// importEval adds to the evaluation in dir what the policy played in the
// held-out evaluation after it iterations, as p's results.
func (r *Run) importEval(dir string, o arena.Options, it int, p arena.Player) error {
	src := r.Path(filepath.Join(runfiles.EvalDir, "iter-"+strconv.Itoa(it)))
	if _, err := arena.Import(dir, src, o, evalPlayer, p); err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	return nil
}
