// Package learning measures whether training learns: it runs the PPO loop
// (package loop) on a known-optimum test bed (package games/testbed) and
// reports, iteration by iteration, the share of the optimum the policy's
// own rollouts reached, or for rock–paper–scissors the exploitability of
// the moves it played. It is what `omar bench learning` runs and what
// docs/learning.md describes.
package learning

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/omar-selfplay/omar/advantage"
	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/games/testbed"
	"github.com/omar-selfplay/omar/loop"
	"github.com/omar-selfplay/omar/model"
	"github.com/omar-selfplay/omar/runfiles"
	"github.com/omar-selfplay/omar/selfplay"
	"github.com/omar-selfplay/omar/train"
)

// Envs are the test beds' ids without version, in the order of the
// results' tables.
var Envs = []string{"testbed_bandit", "testbed_credit", "testbed_price", "testbed_deals", "testbed_number", "testbed_rps"}

// Options are one benchmark run.
type Options struct {
	// Env is a test bed (one of Envs, with or without its version).
	Env string
	// Estimator names an advantage estimator (advantage.Names()).
	Estimator string
	// Model is "builtin" (the built-in model) or a random model preset of
	// package model ("tiny", …).
	Model string
	// Seed seeds the random model (for a preset), the rollout and the
	// trainer.
	Seed uint64
	// Iterations of the PPO loop, Episodes per iteration.
	Iterations int
	Episodes   int
	// GroupSize is the GRPO group; 0 chooses 8 for grpo and 1 otherwise.
	GroupSize int
	// LR is the LoRA learning rate (and the value head's).
	LR float32
	// EntropyCoef and KLCoef weigh the trainer's entropy bonus and its
	// KL(π‖π_base) penalty (train.Options); Temperature samples the
	// rollouts.
	EntropyCoef, KLCoef, Temperature float32
	// LogprobsOver is the trainer's train.Options.LogprobsOver and
	// EntropyDecaySteps its train.Options.EntropyDecaySteps.
	LogprobsOver      string
	EntropyDecaySteps int
	// Params are the test bed's parameters over its defaults (nil: the
	// defaults). Each outcome reports its deal's optimum, so the share
	// of the optimum stays exact under any parameters.
	Params engine.Params `json:",omitempty"`
	// LlamaLib is the directory of the llama.cpp libraries.
	LlamaLib string
}

// Defaults: the tiny random model, the default estimator, 16 episodes
// per iteration for 20 iterations, learning rate 1e-3 (the built-in
// run's), logprobs over the grammar's sets, an entropy bonus of 0.2
// annealed to 0 over 40 optimizer steps (10 iterations) and no KL to the
// base model. At 1e-2 one update moved the policy by a KL of up to 12 and
// runs that reached the optimum left it again; without the bonus a model
// that never samples the best move never learns it, and the KL to the
// base holds the price game at 0.7–0.93 of its optimum
// (docs/results/2026-12-07-known-optima.md,
// docs/results/2026-12-07-grammar-logprobs.md).
func (Options) Defaults() Options {
	return Options{
		Env: "testbed_bandit", Estimator: advantage.Default, Model: "tiny", Seed: 1,
		Iterations: 20, Episodes: 16, LR: 1e-3,
		LogprobsOver: train.LogprobsOverGrammar, EntropyCoef: 0.2, EntropyDecaySteps: 40,
		KLCoef: 0, Temperature: 1,
	}
}

// Validate reports the first invalid field.
func (o Options) Validate() error {
	name, _ := engine.SplitID(o.Env)
	switch {
	case !slices.Contains(Envs, name):
		return fmt.Errorf("learning: env %q: want one of %v", o.Env, Envs)
	case !slices.Contains(advantage.Names(), o.Estimator):
		return fmt.Errorf("learning: estimator %q: want one of %v", o.Estimator, advantage.Names())
	case o.Model != loop.BuiltinPreset && !slices.Contains(model.Presets, o.Model):
		return fmt.Errorf("learning: model %q: want %s or one of %v", o.Model, loop.BuiltinPreset, model.Presets)
	case o.Iterations < 1 || o.Iterations > 1000:
		return fmt.Errorf("learning: iterations %d: want 1..1000", o.Iterations)
	case o.Episodes < 2 || o.Episodes > 4096:
		return fmt.Errorf("learning: episodes %d: want 2..4096", o.Episodes)
	case o.GroupSize < 0 || o.GroupSize > 0 && o.Episodes%o.GroupSize != 0:
		return fmt.Errorf("learning: group size %d: want 0 (automatic) or a divisor of episodes (%d)", o.GroupSize, o.Episodes)
	case !(o.LR > 0) || math.IsInf(float64(o.LR), 0):
		return fmt.Errorf("learning: lr %v: want a positive number", o.LR)
	case !(o.EntropyCoef >= 0) || !(o.KLCoef >= 0) || math.IsInf(float64(o.EntropyCoef+o.KLCoef), 0):
		return fmt.Errorf("learning: entropy coef %v, kl coef %v: want finite numbers ≥ 0", o.EntropyCoef, o.KLCoef)
	case !(o.Temperature > 0) || o.Temperature > 10:
		return fmt.Errorf("learning: temperature %v: want (0, 10]", o.Temperature)
	}
	// The trainer's own checks of the settings passed through to it.
	t := train.Options{}.Defaults()
	t.LogprobsOver, t.EntropyDecaySteps = o.LogprobsOver, o.EntropyDecaySteps
	if err := t.Validate(); err != nil {
		return fmt.Errorf("learning: %w", err)
	}
	return nil
}

func (o Options) groupSize() int {
	if o.GroupSize > 0 {
		return o.GroupSize
	}
	if o.Estimator == "grpo" {
		return min(8, o.Episodes)
	}
	return 1
}

// LoopOptions are the options of the PPO run o makes: small settings
// sized for a 2-core machine, the policy in every seat (no league, no
// held-out evaluation: the rollouts are the measurement), sampling at
// temperature 1 with the grammar of the menu, replies of at most 8 tokens.
func (o Options) LoopOptions() loop.Options {
	l := loop.Options{}.Defaults()
	l.Iterations = o.Iterations
	l.ModelPreset = o.Model
	l.Rollout.Env = o.Env
	l.Rollout.Params = o.Params
	l.Rollout.Episodes, l.Rollout.Parallel = o.Episodes, min(8, o.Episodes)
	l.Rollout.GroupSize = o.groupSize()
	l.Rollout.Seed = o.Seed
	l.Rollout.MaxTokens, l.Rollout.Context = 8, 1024
	l.Rollout.Temperature = o.Temperature
	l.Estimator = o.Estimator
	l.Train.LR, l.Train.ValueLR = o.LR, o.LR
	l.Train.EntropyCoef, l.Train.KLCoef, l.Train.LogprobsOver = o.EntropyCoef, o.KLCoef, o.LogprobsOver
	l.Train.EntropyDecaySteps = o.EntropyDecaySteps
	// The trajectories give the probability the model put on what it
	// sampled (Point.SampledProb).
	l.SaveTrajectories = true
	l.Train.Seed = o.Seed
	l.League.Enabled, l.Eval.Every = false, 0
	l.CheckpointEvery = o.Iterations // the end only: a benchmark is not resumed
	l.Rollout.LlamaLib = o.LlamaLib
	return l
}

// Point is one iteration of a benchmark run, measured on its rollouts
// (the policy before that iteration's update).
type Point struct {
	Iteration int `json:"iteration"`
	// Reward is the mean reward of the policy's seats.
	Reward float64 `json:"reward"`
	// Fraction is the mean expected reward of the moves played over the
	// optimum (not for rock–paper–scissors). The expected reward is the
	// outcome's "expected" metric where the game reports one (the price
	// game: the chosen offer's expectation over the reservation, free of
	// the draw's noise), else the reward itself; the optimum is the
	// outcome's "optimum" metric where it reports one (each deal's, for
	// testbed_deals), else the test bed's.
	Fraction float64 `json:"fraction,omitempty"`
	// Optimal is the share of episodes whose decisive move was optimal.
	Optimal float64 `json:"optimal,omitempty"`
	// Moves is the share of ROCK, PAPER and SCISSORS over both seats, and
	// Exploitability what a best response earns against it
	// (rock–paper–scissors only).
	Moves          *[3]float64 `json:"moves,omitempty"`
	Exploitability float64     `json:"exploitability,omitempty"`
	// Invalid is the share of replies the engine rejected.
	Invalid float64 `json:"invalid"`
	// SampledProb is the mean probability the model's full-vocabulary
	// softmax (untempered) gave the tokens it generated, and FirstProb
	// that of each reply's first token: under a grammar that forbids most
	// of the model's mass, what the trainer's log-probabilities see is far
	// from the menu the sampler chose from.
	SampledProb float64 `json:"sampled_prob"`
	FirstProb   float64 `json:"first_prob"`
}

// Result is a benchmark run.
type Result struct {
	Options Options `json:"options"`
	// Optimum is the test bed's optimal expected reward (0 for
	// rock–paper–scissors, its equilibrium value; testbed_deals: the mean
	// of its deals' optima).
	Optimum float64 `json:"optimum"`
	Points  []Point `json:"points"`
}

// Grid is a run of base for every test bed × estimator × model × seed,
// in that order, each validated.
func Grid(base Options, envs, estimators, models []string, seeds []uint64) ([]Options, error) {
	var runs []Options
	for _, e := range envs {
		for _, est := range estimators {
			for _, m := range models {
				for _, s := range seeds {
					o := base
					o.Env, o.Estimator, o.Model, o.Seed = e, est, m, s
					if err := o.Validate(); err != nil {
						return nil, err
					}
					runs = append(runs, o)
				}
			}
		}
	}
	return runs, nil
}

// WriteHeader writes the header of a table of runs, a row each (WriteRow).
func WriteHeader(w io.Writer) {
	fmt.Fprintf(w, "%-16s %-12s %-8s %4s  %-8s %s\n", "env", "estimator", "model", "seed", "figure", "by iteration")
}

// WriteRow writes r as a row of WriteHeader's table: the run's options
// and its figure iteration by iteration, the fraction of the optimum (for
// rock–paper–scissors the exploitability).
func (r *Result) WriteRow(w io.Writer) {
	figure, vals := "fraction", make([]string, len(r.Points))
	for i, p := range r.Points {
		v := p.Fraction
		if p.Moves != nil {
			figure, v = "exploit", p.Exploitability
		}
		vals[i] = fmt.Sprintf("%.2f", v)
	}
	o := r.Options
	fmt.Fprintf(w, "%-16s %-12s %-8s %4d  %-8s %s\n", o.Env, o.Estimator, o.Model, o.Seed, figure, strings.Join(vals, " "))
}

// Optimum returns the optimal expected reward of the test bed env under
// params (over its defaults; nil: the defaults). Where deals vary (the
// price beds' shifts and scales) it is the mean of the deals' optima.
func Optimum(env string, params engine.Params) (float64, error) {
	name, _ := engine.SplitID(env)
	var p interface{ Validate() error }
	var opt func() float64
	switch name {
	case "testbed_bandit":
		b := testbed.DefaultBanditParams()
		p, opt = &b, func() float64 { _, r := b.Optimum(); return r }
	case "testbed_credit":
		c := testbed.DefaultCreditParams()
		p, opt = &c, func() float64 { _, r := c.Optimum(); return r }
	case "testbed_price", "testbed_deals", "testbed_number":
		pp := map[string]testbed.PriceParams{
			"testbed_price": testbed.DefaultPriceParams(), "testbed_deals": testbed.DefaultPriceDealsParams(),
			"testbed_number": testbed.DefaultPriceNumberParams(),
		}[name]
		p, opt = &pp, func() float64 { return pp.MeanOptimum() }
	case "testbed_rps":
		return 0, nil
	default:
		return 0, fmt.Errorf("learning: %q is not a test bed (want one of %v)", env, Envs)
	}
	if err := engine.DecodeParams(params, p); err != nil {
		return 0, fmt.Errorf("learning: %s params: %w", name, err)
	}
	if err := p.Validate(); err != nil {
		return 0, fmt.Errorf("learning: %s params: %w", name, err)
	}
	return opt(), nil
}

// Run trains in dir (which it overwrites) and measures every iteration.
func Run(ctx context.Context, dir string, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	opt, err := Optimum(o.Env, o.Params)
	if err != nil {
		return nil, err
	}
	r, err := loop.Open(dir, o.LoopOptions(), loop.Overwrite, nil)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if err := r.Train(ctx); err != nil {
		return nil, err
	}
	recs, err := engine.LoadRecords(nil, filepath.Join(dir, runfiles.EpisodesFile))
	if err != nil {
		return nil, err
	}
	res := &Result{Options: o, Optimum: opt}
	if res.Points, err = Measure(recs, o.Episodes, opt); err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(dir, runfiles.TrajectoriesFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	trajs, err := selfplay.ReadTrajectories(f)
	if err != nil {
		return nil, err
	}
	SampledProbs(res.Points, trajs, o.Episodes)
	return res, nil
}

// SampledProbs sets each point's SampledProb and FirstProb from the run's
// trajectories (episodes per iteration, in order).
func SampledProbs(pts []Point, trajs []selfplay.Trajectory, episodes int) {
	type sums struct{ all, first, nAll, nFirst float64 }
	by := make([]sums, len(pts))
	for _, t := range trajs {
		it := t.Episode / episodes
		if it < 0 || it >= len(pts) {
			continue
		}
		s := &by[it]
		for i, m := range t.Mask {
			if !m || i >= len(t.RawLogprobs) {
				continue
			}
			p := math.Exp(float64(t.RawLogprobs[i]))
			s.all, s.nAll = s.all+p, s.nAll+1
			if i == 0 || !t.Mask[i-1] {
				s.first, s.nFirst = s.first+p, s.nFirst+1
			}
		}
	}
	for i, s := range by {
		if s.nAll > 0 {
			pts[i].SampledProb = s.all / s.nAll
		}
		if s.nFirst > 0 {
			pts[i].FirstProb = s.first / s.nFirst
		}
	}
}

// Measure splits a run's episode records into its iterations (episodes
// per iteration, in order) and measures each.
func Measure(recs []*engine.Record, episodes int, optimum float64) ([]Point, error) {
	if episodes < 1 || len(recs)%episodes != 0 {
		return nil, fmt.Errorf("learning: %d episode records are not whole iterations of %d", len(recs), episodes)
	}
	var pts []Point
	for it := 0; it*episodes < len(recs); it++ {
		pts = append(pts, measure(it+1, recs[it*episodes:(it+1)*episodes], optimum))
	}
	return pts, nil
}

func measure(it int, recs []*engine.Record, optimum float64) Point {
	p := Point{Iteration: it}
	var rewards, optimal, actions, invalid, expected, optima float64
	var moves [3]float64
	rps := false
	for _, rec := range recs {
		for _, r := range rec.Outcome.Rewards {
			p.Reward += r
			rewards++
		}
		optimal += rec.Outcome.Metrics["optimal"]
		if v, ok := rec.Outcome.Metrics["expected"]; ok {
			expected += v
		} else if len(rec.Outcome.Rewards) > 0 {
			expected += rec.Outcome.Rewards[0]
		}
		if v, ok := rec.Outcome.Metrics["optimum"]; ok {
			optima += v
		} else {
			optima += optimum
		}
		for i, name := range []string{"rock", "paper", "scissors"} {
			if v, ok := rec.Outcome.Metrics[name]; ok {
				moves[i] += v
				rps = true
			}
		}
		for _, e := range rec.Events {
			switch e.Kind {
			case engine.KindAck:
				actions++
			case engine.KindValidationError:
				actions++
				invalid++
			}
		}
	}
	p.Reward /= max(rewards, 1)
	if actions > 0 {
		p.Invalid = invalid / actions
	}
	if rps {
		total := moves[0] + moves[1] + moves[2]
		for i := range moves {
			moves[i] /= max(total, 1)
		}
		p.Moves = &moves
		p.Exploitability = testbed.Exploitability(moves)
		return p
	}
	p.Optimal = optimal / float64(len(recs))
	if optima > 0 {
		p.Fraction = expected / optima
	}
	return p
}
