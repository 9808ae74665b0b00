package recipes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/omar-selfplay/omar/arena"
	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/envs"
	"github.com/omar-selfplay/omar/internal/atomicfile"
	"github.com/omar-selfplay/omar/internal/jsonl"
	"github.com/omar-selfplay/omar/loop"
	"github.com/omar-selfplay/omar/players"
	"github.com/omar-selfplay/omar/runfiles"
)

// CascadeOptions are Cascade RL (SocialRL-Neg): one policy trained on one
// environment after another, each stage starting from the best adapter so
// far, with every environment of the cascade evaluated after each stage,
// so forgetting shows.
type CascadeOptions struct {
	// Run is the template of every stage's run; a stage sets its
	// environment (with its parameters) and iterations, and starts from
	// the best adapter so far.
	Run loop.Options `yaml:"run"`
	// Stages in order.
	Stages []CascadeStage `yaml:"stages"`
	// Episodes per pairing of the evaluation after each stage, against
	// Opponents (arena specs of scripted policies).
	Episodes  int      `yaml:"episodes"`
	Opponents []string `yaml:"opponents"`
	// EvalEvery evaluates every n iterations inside a stage as well as at
	// its end (0: at the end of each stage only); the best adapter of all
	// the evaluations so far is what the next stage starts from.
	EvalEvery int `yaml:"eval_every"`
}

// CascadeStage is one environment of a cascade.
type CascadeStage struct {
	Env        string         `yaml:"env"`
	Params     map[string]any `yaml:"params"`
	Iterations int            `yaml:"iterations"`
}

// DefaultCascade is the order of the SocialRL-Neg paper (Calendar →
// CaSiNo → DnD → Craigslist → Marketplace → Job Interview) on the built-in
// model's parameters, 5 iterations a stage.
func DefaultCascade() CascadeOptions {
	o := CascadeOptions{Run: loop.Options{}.Defaults(), Episodes: 16, Opponents: []string{"scripted:naive", "scripted:strategic"}}
	o.Run.Eval.Every, o.Run.League.Enabled = 0, false
	for _, env := range []string{"calendar", "casino", "dealornodeal", "craigslist", "marketplace", "jobinterview"} {
		o.Stages = append(o.Stages, CascadeStage{Env: env, Params: loop.BuiltinParams(), Iterations: 5})
	}
	return o
}

// Validate reports the first invalid field.
func (o CascadeOptions) Validate() error {
	switch {
	case len(o.Stages) == 0:
		return errors.New("cascade: no stages")
	case o.Episodes < 1:
		return fmt.Errorf("cascade: episodes %d < 1", o.Episodes)
	case len(o.Opponents) == 0:
		return errors.New("cascade: no opponents")
	case o.EvalEvery < 0:
		return fmt.Errorf("cascade: eval_every %d < 0", o.EvalEvery)
	}
	for i, s := range o.Stages {
		if _, err := envs.Find(s.Env); err != nil {
			return fmt.Errorf("cascade: stage %d: %w", i+1, err)
		}
		if s.Iterations < 1 {
			return fmt.Errorf("cascade: stage %d (%s): iterations %d < 1", i+1, s.Env, s.Iterations)
		}
	}
	return nil
}

// CascadeStageResult is an evaluation of a stage's policy, after the
// stage or (Partial) after Iteration of its iterations: the mean held-out
// reward per environment of the cascade, and their mean.
type CascadeStageResult struct {
	Stage     int                `json:"stage"`
	Env       string             `json:"env"`
	Iteration int                `json:"iteration,omitempty"`
	Partial   bool               `json:"partial,omitempty"`
	Reward    map[string]float64 `json:"reward"`
	Mean      float64            `json:"mean"`
	// Best reports whether the evaluated adapter is the best so far (the
	// next stage starts from the best); Adapter is then its file.
	Best    bool   `json:"best"`
	Adapter string `json:"adapter,omitempty"`
}

// CascadeBestFile is, in a stage's directory, the copy of the adapter of
// its best evaluation inside the stage (the stage's adapter.gguf moves on).
const CascadeBestFile = "cascade-best.gguf"

// CascadeFile is the cascade's progress in its directory: one line per
// finished stage.
const CascadeFile = "cascade.jsonl"

// Cascade runs o's stages in dir (dir/stage-N for each stage's run) and
// returns every evaluation, in order. It resumes: finished stages and the
// evaluations done are read back from cascade.jsonl, a stage interrupted
// in the middle continues from its own checkpoint.
func Cascade(ctx context.Context, o CascadeOptions, dir string, stage func(r *loop.Run)) ([]CascadeStageResult, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	done, err := readCascade(filepath.Join(dir, CascadeFile))
	if err != nil {
		return nil, err
	}
	best, bestMean, finished := "", -1.0, 0
	evaluated := map[[2]int]bool{}
	for _, r := range done {
		if r.Best {
			best, bestMean = r.Adapter, r.Mean
			if best == "" { // a line from before Adapter was recorded
				best = filepath.Join(dir, "stage-"+strconv.Itoa(r.Stage), runfiles.AdapterFile)
			}
		}
		if !r.Partial {
			finished++
		}
		evaluated[[2]int{r.Stage, r.Iteration}] = true
	}
	for k := finished; k < len(o.Stages); k++ {
		s := o.Stages[k]
		ro := o.Run
		ro.Rollout.Env, ro.Rollout.Params, ro.Iterations = s.Env, s.Params, s.Iterations
		if best != "" {
			ro.Rollout.Adapter = best
		}
		sdir := filepath.Join(dir, "stage-"+strconv.Itoa(k+1))
		mode := loop.Fresh
		if _, err := os.Stat(filepath.Join(sdir, runfiles.ConfigFile)); err == nil {
			if ro, err = loop.ReadConfig(sdir); err != nil {
				return nil, err
			}
			mode = loop.Resume
		}
		run, err := loop.Open(sdir, ro, mode, nil)
		if err != nil {
			return nil, fmt.Errorf("cascade: stage %d (%s): %w", k+1, s.Env, err)
		}
		if stage != nil {
			stage(run)
		}
		evaluate := func(partial bool) error {
			res, err := evaluateStage(ctx, o, run, k+1, partial)
			if err != nil {
				return err
			}
			if res.Best = res.Mean > bestMean; res.Best {
				res.Adapter = run.Path(runfiles.AdapterFile)
				if partial {
					// Later iterations of the stage overwrite adapter.gguf.
					b, err := os.ReadFile(res.Adapter)
					if err != nil {
						return err
					}
					res.Adapter = run.Path(CascadeBestFile)
					if err := atomicfile.Write(res.Adapter, b, 0o644); err != nil {
						return err
					}
				}
				best, bestMean = res.Adapter, res.Mean
			}
			done = append(done, res)
			evaluated[[2]int{res.Stage, res.Iteration}] = true
			return appendJSONLine(filepath.Join(dir, CascadeFile), res)
		}
		err = nil
		for !run.Done() && err == nil {
			// An evaluation due before an interrupt comes first.
			if it := run.State().Iteration; o.EvalEvery > 0 && it > 0 && it%o.EvalEvery == 0 && !evaluated[[2]int{k + 1, it}] {
				if err = evaluate(true); err != nil {
					break
				}
			}
			_, err = run.Step(ctx)
		}
		if err == nil || errors.Is(err, loop.ErrStopped) {
			err = evaluate(false)
		}
		run.Close()
		if err != nil {
			return done, fmt.Errorf("cascade: stage %d (%s): %w", k+1, s.Env, err)
		}
	}
	return done, nil
}

// evaluateStage plays the stage's policy as it is on every environment of
// the cascade.
func evaluateStage(ctx context.Context, o CascadeOptions, run *loop.Run, k int, partial bool) (CascadeStageResult, error) {
	res := CascadeStageResult{Stage: k, Env: o.Stages[k-1].Env, Iteration: run.State().Iteration, Partial: partial}
	a := run.ArenaOptions()
	a.Envs = nil
	seen := map[string]bool{}
	for _, s := range o.Stages {
		if !seen[s.Env] {
			seen[s.Env] = true
			a.Envs = append(a.Envs, arena.Env{Name: s.Env, Params: engine.Params(s.Params)})
		}
	}
	a.Episodes = o.Episodes
	opps, err := loop.ScriptedOpponents(o.Opponents)
	if err != nil {
		return res, err
	}
	cur := arena.Player{Name: "policy", Version: "stage " + strconv.Itoa(k) + ", iteration " + strconv.Itoa(res.Iteration), Kind: players.KindAdapter, Model: run.Policy()}
	dir := run.Path(runfiles.EvalDir + "/cascade")
	if partial {
		dir += "-" + strconv.Itoa(res.Iteration)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	rep, err := arena.Evaluate(context.WithoutCancel(ctx), a, dir, []arena.Player{cur}, opps, arena.Hooks{})
	if err != nil {
		return res, err
	}
	// The mean over environments, each weighing the same whatever its
	// number of sides.
	res.Reward, _ = loop.MeanRewardBy(rep.Cells, func(c arena.Cell) string { return c.Env })
	for _, env := range engine.SortedKeys(res.Reward) { // sorted: the same sum every time
		res.Mean += res.Reward[env] / float64(len(res.Reward))
	}
	return res, rep.WriteFiles(dir)
}

// CascadeTable writes the stage-by-stage table: held-out reward per
// environment at each evaluation (after each stage, and inside stages
// with eval_every).
func CascadeTable(w io.Writer, rs []CascadeStageResult) {
	if len(rs) == 0 {
		return
	}
	envNames := engine.SortedKeys(rs[0].Reward)
	fmt.Fprintf(w, "| after stage | %s | mean |\n|---|%s---|\n", strings.Join(envNames, " | "), strings.Repeat("---|", len(envNames)))
	for _, r := range rs {
		cells := make([]string, len(envNames))
		for i, e := range envNames {
			cells[i] = fmt.Sprintf("%.3f", r.Reward[e])
		}
		best := ""
		if r.Best {
			best = " (best)"
		}
		at := ""
		if r.Partial {
			at = ", iteration " + strconv.Itoa(r.Iteration)
		}
		fmt.Fprintf(w, "| %d: %s%s%s | %s | %.3f |\n", r.Stage, r.Env, at, best, strings.Join(cells, " | "), r.Mean)
	}
}

// readCascade reads cascade.jsonl (none: nil). A torn last line (a kill
// mid-write) is dropped: its evaluation is done again, and the next append
// cuts the line (jsonl.Append).
func readCascade(path string) ([]CascadeStageResult, error) {
	var out []CascadeStageResult
	_, err := jsonl.ReadFile(path, 0, func(l jsonl.Line) error {
		var r CascadeStageResult
		if err := json.Unmarshal(l.Bytes, &r); err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return out, err
}

func appendJSONLine(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return jsonl.AppendLines(path, append(b, '\n'))
}
