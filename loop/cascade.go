package loop

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
)

// CascadeOptions are Cascade RL (SocialRL-Neg): one policy trained on one
// environment after another, each stage starting from the best adapter so
// far, with every environment of the cascade evaluated after each stage,
// so forgetting shows.
type CascadeOptions struct {
	// Run is the template of every stage's run; a stage sets its
	// environment (with its parameters) and iterations, and starts from
	// the best adapter so far.
	Run Options `yaml:"run"`
	// Stages in order.
	Stages []CascadeStage `yaml:"stages"`
	// Episodes per pairing of the evaluation after each stage, against
	// Opponents (arena specs of scripted policies).
	Episodes  int      `yaml:"episodes"`
	Opponents []string `yaml:"opponents"`
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
	o := CascadeOptions{Run: Options{}.Defaults(), Episodes: 16, Opponents: []string{"scripted:naive", "scripted:strategic"}}
	o.Run.Eval.Every, o.Run.League.Enabled = 0, false
	for _, env := range []string{"calendar", "casino", "dealornodeal", "craigslist", "marketplace", "jobinterview"} {
		o.Stages = append(o.Stages, CascadeStage{Env: env, Params: BuiltinParams(), Iterations: 5})
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

// CascadeStageResult is the evaluation after one stage: the mean held-out
// reward per environment of the cascade, and their mean.
type CascadeStageResult struct {
	Stage  int                `json:"stage"`
	Env    string             `json:"env"`
	Reward map[string]float64 `json:"reward"`
	Mean   float64            `json:"mean"`
	// Best reports whether this stage's adapter is the best so far (and
	// the next stage starts from it).
	Best bool `json:"best"`
}

// CascadeFile is the cascade's progress in its directory: one line per
// finished stage.
const CascadeFile = "cascade.jsonl"

// Cascade runs o's stages in dir (dir/stage-N for each stage's run) and
// returns the evaluation after every stage. It resumes: finished stages
// are read back from cascade.jsonl, a stage interrupted in the middle
// continues from its own checkpoint.
func Cascade(ctx context.Context, o CascadeOptions, dir string, stage func(r *Run)) ([]CascadeStageResult, error) {
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
	best, bestMean := "", -1.0
	for _, r := range done {
		if r.Best {
			best, bestMean = filepath.Join(dir, "stage-"+strconv.Itoa(r.Stage), AdapterFile), r.Mean
		}
	}
	for k := len(done); k < len(o.Stages); k++ {
		s := o.Stages[k]
		ro := o.Run
		ro.Rollout.Env, ro.Rollout.Params, ro.Iterations = s.Env, s.Params, s.Iterations
		if best != "" {
			ro.Rollout.Adapter = best
		}
		sdir := filepath.Join(dir, "stage-"+strconv.Itoa(k+1))
		mode := Fresh
		if _, err := os.Stat(filepath.Join(sdir, ConfigFile)); err == nil {
			if ro, err = ReadConfig(sdir); err != nil {
				return nil, err
			}
			mode = Resume
		}
		run, err := Open(sdir, ro, mode, nil)
		if err != nil {
			return nil, fmt.Errorf("cascade: stage %d (%s): %w", k+1, s.Env, err)
		}
		if stage != nil {
			stage(run)
		}
		err = run.Train(ctx)
		if err == nil || errors.Is(err, ErrStopped) {
			var res CascadeStageResult
			res, err = evaluateStage(ctx, o, run, k+1)
			if err == nil {
				res.Best = res.Mean > bestMean
				if res.Best {
					best, bestMean = run.Path(AdapterFile), res.Mean
				}
				done = append(done, res)
				err = appendJSONLine(filepath.Join(dir, CascadeFile), res)
			}
		}
		run.Close()
		if err != nil {
			return done, fmt.Errorf("cascade: stage %d (%s): %w", k+1, s.Env, err)
		}
	}
	return done, nil
}

// evaluateStage plays the stage's trained policy on every environment of
// the cascade.
func evaluateStage(ctx context.Context, o CascadeOptions, run *Run, k int) (CascadeStageResult, error) {
	res := CascadeStageResult{Stage: k, Env: o.Stages[k-1].Env}
	a := run.arenaOptions()
	a.Envs = nil
	seen := map[string]bool{}
	for _, s := range o.Stages {
		if !seen[s.Env] {
			seen[s.Env] = true
			a.Envs = append(a.Envs, arena.Env{Name: s.Env, Params: engine.Params(s.Params)})
		}
	}
	a.Episodes = o.Episodes
	opps, err := scriptedOpponents(o.Opponents)
	if err != nil {
		return res, err
	}
	cur := arena.Player{Name: "policy", Version: "stage " + strconv.Itoa(k), Kind: arena.SpecAdapter, Model: run.player}
	dir := run.Path(EvalDir + "/cascade")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	rep, err := arena.Evaluate(context.WithoutCancel(ctx), a, dir, []arena.Player{cur}, opps, arena.Hooks{})
	if err != nil {
		return res, err
	}
	// The mean over environments, each weighing the same whatever its
	// number of sides.
	res.Reward, _ = meanBy(rep.Cells, func(c arena.Cell) string { return c.Env })
	for _, env := range engine.SortedKeys(res.Reward) { // sorted: the same sum every time
		res.Mean += res.Reward[env] / float64(len(res.Reward))
	}
	return res, rep.WriteFiles(dir)
}

// CascadeTable writes the stage-by-stage table: held-out reward per
// environment after each stage.
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
		fmt.Fprintf(w, "| %d: %s%s | %s | %.3f |\n", r.Stage, r.Env, best, strings.Join(cells, " | "), r.Mean)
	}
}

func readCascade(path string) ([]CascadeStageResult, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []CascadeStageResult
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var r CascadeStageResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func appendJSONLine(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return appendFile(path, append(b, '\n'))
}
