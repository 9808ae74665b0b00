package recipes

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
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
	"github.com/omar-selfplay/omar/selfplay"
)

// CascadeOptions are Cascade RL (SocialRL-Neg): one policy trained on one
// environment after another, each stage starting from the checkpoint the
// selection rule picks, with the policy evaluated after each stage (and
// inside stages with EvalEvery).
type CascadeOptions struct {
	// Run is the template of every stage's run; a stage sets its
	// environment (with its parameters) and iterations, and starts from
	// the checkpoint Selection picks.
	Run loop.Options `yaml:"run"`
	// Stages in order; none: Order fills them (StagePlan).
	Stages []CascadeStage `yaml:"stages"`
	// Order fills the stages when none are given: transfer_aware (empty:
	// the default), random (a permutation drawn from run.rollout.seed) or
	// anti_transfer (transfer_aware reversed); TransferAwareOrder.
	Order string `yaml:"order"`
	// Iterations and Params are each filled PPO stage's (Params none: the
	// built-in model's game parameters, loop.BuiltinParams).
	Iterations int            `yaml:"iterations"`
	Params     map[string]any `yaml:"params"`
	// SFT adds the paper's supervised stages to the filled ones: the
	// cascade starts with a Craigslist SFT stage, and Marketplace's PPO
	// stage comes after a Marketplace SFT stage. Each clones SFTEpisodes
	// of the strategic script's play for SFTEpochs epochs.
	SFT         bool `yaml:"sft"`
	SFTEpisodes int  `yaml:"sft_episodes"`
	SFTEpochs   int  `yaml:"sft_epochs"`
	// Selection is the rule that picks each stage's checkpoint:
	// encountered (empty: the default, the paper's) evaluates stage k on
	// the environments of stages 1..k, and stage k+1 starts from stage k's
	// best evaluation; global_best evaluates every stage on every
	// environment of the cascade, and each stage starts from the best
	// evaluation of all so far.
	Selection string `yaml:"selection"`
	// Episodes per pairing of the evaluation after each stage, against
	// Opponents (arena specs of scripted policies).
	Episodes  int      `yaml:"episodes"`
	Opponents []string `yaml:"opponents"`
	// EvalEvery evaluates every n iterations inside a PPO stage as well as
	// at its end (0: at the end of each stage only).
	EvalEvery int `yaml:"eval_every"`
}

// The selection rules of CascadeOptions.Selection.
const (
	SelectEncountered = "encountered"
	SelectGlobalBest  = "global_best"
)

// The stage orders of CascadeOptions.Order.
const (
	OrderTransferAware = "transfer_aware"
	OrderRandom        = "random"
	OrderAntiTransfer  = "anti_transfer"
)

// The kinds of CascadeStage.Kind.
const (
	StagePPO = "ppo"
	StageSFT = "sft"
)

// TransferAwareOrder is the order of SocialRL-Neg's cascade (Calendar →
// CaSiNo → DnD → Craigslist → Marketplace → Job Interview,
// docs/mission.md §3), which the paper chose so that the games that
// transfer most come first. It is the paper's order taken as given: omar
// has not measured the transfer between its games.
func TransferAwareOrder() []string {
	return []string{"calendar", "casino", "dealornodeal", "craigslist", "marketplace", "jobinterview"}
}

// CascadeStage is one environment of a cascade.
type CascadeStage struct {
	Env    string         `yaml:"env"`
	Params map[string]any `yaml:"params"`
	// Kind is ppo (empty: the default; self-play PPO for Iterations
	// iterations) or sft (behaviour cloning of the strategic script:
	// Episodes of its play on Env, cloned for Iterations epochs through
	// bc.SFT).
	Kind       string `yaml:"kind"`
	Iterations int    `yaml:"iterations"`
	Episodes   int    `yaml:"episodes"`
}

// DefaultCascade is the paper's rule (selection: encountered) over its
// order (TransferAwareOrder) on the built-in model's parameters, 5
// iterations a stage, no SFT stages.
func DefaultCascade() CascadeOptions {
	o := CascadeOptions{Run: loop.Options{}.Defaults(), Iterations: 5, SFTEpisodes: 32, SFTEpochs: 2,
		Selection: SelectEncountered, Episodes: 16, Opponents: []string{"scripted:naive", "scripted:strategic"}}
	o.Run.Eval.Every, o.Run.League.Enabled = 0, false
	return o
}

// StagePlan is the stages the cascade runs: Stages when given (a stage
// without params, of the built-in model, gets its game parameters), else
// the ones Order (and SFT) fill.
func (o CascadeOptions) StagePlan() []CascadeStage {
	if len(o.Stages) > 0 {
		out := slices.Clone(o.Stages)
		for i, s := range out {
			// As a run of the built-in model plays them (loop.Open), and
			// so that the stage's evaluations do too.
			if s.Params == nil && o.Run.Rollout.Model == "" && o.Run.ModelPreset == loop.BuiltinPreset {
				out[i].Params = loop.BuiltinEnvParams(s.Env)
			}
		}
		return out
	}
	order := TransferAwareOrder()
	switch o.Order {
	case OrderAntiTransfer:
		slices.Reverse(order)
	case OrderRandom:
		rng := rand.New(rand.NewPCG(o.Run.Rollout.Seed, 0x63617363)) // "casc"
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	params := o.Params
	if params == nil {
		params = loop.BuiltinParams()
	}
	var out []CascadeStage
	sft := func(env string) {
		out = append(out, CascadeStage{Env: env, Params: maps.Clone(params), Kind: StageSFT, Iterations: o.SFTEpochs, Episodes: o.SFTEpisodes})
	}
	if o.SFT {
		sft("craigslist")
	}
	for _, env := range order {
		if o.SFT && env == "marketplace" {
			sft(env)
		}
		out = append(out, CascadeStage{Env: env, Params: maps.Clone(params), Kind: StagePPO, Iterations: o.Iterations})
	}
	return out
}

// Validate reports the first invalid field.
func (o CascadeOptions) Validate() error {
	switch {
	case len(o.Stages) > 0 && (o.Order != "" || o.SFT):
		return errors.New("cascade: order and sft fill the stages: give either stages or order")
	case o.Order != "" && o.Order != OrderTransferAware && o.Order != OrderRandom && o.Order != OrderAntiTransfer:
		return fmt.Errorf("cascade: order %q: want %s, %s or %s", o.Order, OrderTransferAware, OrderRandom, OrderAntiTransfer)
	case o.Selection != "" && o.Selection != SelectEncountered && o.Selection != SelectGlobalBest:
		return fmt.Errorf("cascade: selection %q: want %s or %s", o.Selection, SelectEncountered, SelectGlobalBest)
	case o.Episodes < 1:
		return fmt.Errorf("cascade: episodes %d < 1", o.Episodes)
	case len(o.Opponents) == 0:
		return errors.New("cascade: no opponents")
	case o.EvalEvery < 0:
		return fmt.Errorf("cascade: eval_every %d < 0", o.EvalEvery)
	}
	for i, s := range o.StagePlan() {
		g, err := envs.Find(s.Env)
		if err != nil {
			return fmt.Errorf("cascade: stage %d: %w", i+1, err)
		}
		switch {
		case s.Kind != "" && s.Kind != StagePPO && s.Kind != StageSFT:
			return fmt.Errorf("cascade: stage %d (%s): kind %q: want %s or %s", i+1, s.Env, s.Kind, StagePPO, StageSFT)
		case s.Iterations < 1:
			return fmt.Errorf("cascade: stage %d (%s): iterations %d < 1", i+1, s.Env, s.Iterations)
		case s.Kind != StageSFT && s.Episodes != 0:
			return fmt.Errorf("cascade: stage %d (%s): episodes is an sft stage's (run.rollout.episodes is a PPO stage's)", i+1, s.Env)
		case s.Kind == StageSFT && s.Episodes < 1:
			return fmt.Errorf("cascade: stage %d (%s): an sft stage's episodes %d < 1", i+1, s.Env, s.Episodes)
		}
		if s.Kind == StageSFT {
			if _, err := engine.ScriptedCast(g, []string{sftScript}, 0); err != nil {
				return fmt.Errorf("cascade: stage %d (%s): sft clones the %s script: %w", i+1, s.Env, sftScript, err)
			}
		}
	}
	return nil
}

// CascadeStageResult is an evaluation of a stage's policy, after the
// stage or (Partial) after Iteration of its iterations: the mean held-out
// reward per environment evaluated (the environments of stages 1..Stage
// under selection encountered, every environment of the cascade under
// global_best), and their mean.
type CascadeStageResult struct {
	Stage int    `json:"stage"`
	Env   string `json:"env"`
	// Kind is the stage's (empty: ppo).
	Kind      string             `json:"kind,omitempty"`
	Iteration int                `json:"iteration,omitempty"`
	Partial   bool               `json:"partial,omitempty"`
	Reward    map[string]float64 `json:"reward"`
	Mean      float64            `json:"mean"`
	// Best reports whether the evaluated adapter is the best so far by the
	// Selection rule: of its stage (encountered) or of all evaluations
	// (global_best, or a line without Selection, which the cascade wrote
	// before the rules had names); Adapter is then its file.
	Best      bool   `json:"best"`
	Adapter   string `json:"adapter,omitempty"`
	Selection string `json:"selection,omitempty"`
	// From is the checkpoint the stage started from ("base", "stage 2",
	// "stage 2, iteration 4"), FromAdapter its file.
	From        string `json:"from,omitempty"`
	FromAdapter string `json:"from_adapter,omitempty"`
	// SFTTrajectories and SFTSkipped are an SFT stage's: the seat
	// trajectories cloned from the script's records and learnt, and the
	// records that could not be cloned (a reply over max_tokens).
	SFTTrajectories int `json:"sft_trajectories,omitempty"`
	SFTSkipped      int `json:"sft_skipped,omitempty"`
}

// CascadeBestFile is, in a stage's directory, the copy of the adapter of
// its best evaluation inside the stage (the stage's adapter.gguf moves on).
const CascadeBestFile = "cascade-best.gguf"

// CascadeFile is the cascade's progress in its directory: one line per
// evaluation.
const CascadeFile = "cascade.jsonl"

// Cascade runs o's stages (StagePlan) in dir (dir/stage-N for each
// stage's run) and returns every evaluation, in order. It resumes:
// finished stages and the evaluations done are read back from
// cascade.jsonl, a PPO stage interrupted in the middle continues from its
// own checkpoint, an SFT stage is done again; the selection rule is the
// one cascade.jsonl was written under.
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
	c := &cascadeRun{o: o, plan: o.StagePlan(), dir: dir, rule: cascadeRule(o, done), done: done}
	finished := 0
	for _, r := range done {
		if !r.Partial {
			finished++
		}
	}
	for k := finished; k < len(c.plan); k++ {
		s := c.plan[k]
		start := cascadeStart(c.done, k+1, c.rule, dir)
		if start.adapter == "" && o.Run.Rollout.Adapter != "" {
			start = cascadeCheckpoint{adapter: o.Run.Rollout.Adapter, label: "rollout.adapter"}
		}
		if s.Kind == StageSFT {
			err = c.sftStage(ctx, k, start)
		} else {
			err = c.ppoStage(ctx, k, start, stage)
		}
		if err != nil {
			return c.done, fmt.Errorf("cascade: stage %d (%s): %w", k+1, s.Env, err)
		}
	}
	return c.done, nil
}

// cascadeRun is a cascade in progress: its plan, its rule and the
// evaluations done.
type cascadeRun struct {
	o    CascadeOptions
	plan []CascadeStage
	dir  string
	rule string
	done []CascadeStageResult
}

// ppoStage runs (or resumes) stage k (from 0) as a training run from
// start, with its evaluations.
func (c *cascadeRun) ppoStage(ctx context.Context, k int, start cascadeCheckpoint, hook func(*loop.Run)) error {
	s := c.plan[k]
	ro := c.o.Run
	ro.Rollout.Env, ro.Rollout.Params, ro.Iterations = s.Env, s.Params, s.Iterations
	ro.Rollout.Adapter = start.adapter
	sdir := filepath.Join(c.dir, "stage-"+strconv.Itoa(k+1))
	mode := loop.Fresh
	if _, err := os.Stat(filepath.Join(sdir, runfiles.ConfigFile)); err == nil {
		if ro, err = loop.ReadConfig(sdir); err != nil {
			return err
		}
		mode = loop.Resume
	}
	run, err := loop.Open(sdir, ro, mode, nil)
	if err != nil {
		return err
	}
	defer run.Close()
	if hook != nil {
		hook(run)
	}
	evaluate := func(partial bool) error {
		it := run.State().Iteration
		dir := run.Path(runfiles.EvalDir + "/cascade")
		if partial {
			dir += "-" + strconv.Itoa(it)
		}
		res, err := c.evaluate(ctx, k, it, run.ArenaOptions(), run.Policy(), dir)
		if err != nil {
			return err
		}
		res.Partial = partial
		res.From, res.FromAdapter = start.label, start.adapter
		keep := ""
		if partial {
			// Later iterations of the stage overwrite adapter.gguf.
			keep = run.Path(CascadeBestFile)
		}
		return c.record(res, run.Path(runfiles.AdapterFile), keep)
	}
	for !run.Done() && err == nil {
		// An evaluation due before an interrupt comes first.
		if it := run.State().Iteration; c.o.EvalEvery > 0 && it > 0 && it%c.o.EvalEvery == 0 && !c.evaluated(k+1, it) {
			if err = evaluate(true); err != nil {
				break
			}
		}
		_, err = run.Step(ctx)
	}
	if err == nil || errors.Is(err, loop.ErrStopped) {
		err = evaluate(false)
	}
	return err
}

// evaluated reports whether stage's evaluation after iteration it is done.
func (c *cascadeRun) evaluated(stage, it int) bool {
	return slices.ContainsFunc(c.done, func(r CascadeStageResult) bool { return r.Stage == stage && r.Iteration == it })
}

// record marks res best or not by the rule, keeps its adapter (a copy at
// keep, when given) if it is, and appends it to cascade.jsonl.
func (c *cascadeRun) record(res CascadeStageResult, adapter, keep string) error {
	res.Selection = c.rule
	if res.Best = res.Mean > bestMean(c.done, res.Stage, c.rule); res.Best {
		res.Adapter = adapter
		if keep != "" {
			b, err := os.ReadFile(adapter)
			if err != nil {
				return err
			}
			if err := atomicfile.Write(keep, b, 0o644); err != nil {
				return err
			}
			res.Adapter = keep
		}
	}
	c.done = append(c.done, res)
	return appendJSONLine(filepath.Join(c.dir, CascadeFile), res)
}

// evaluate plays policy on the environments the rule evaluates stage k
// (from 0) on after iteration it, in arena directory dir: the environments of stages 1..k+1
// (encountered) or of every stage (global_best).
func (c *cascadeRun) evaluate(ctx context.Context, k, it int, a arena.Options, policy *selfplay.Player, dir string) (CascadeStageResult, error) {
	s := c.plan[k]
	res := CascadeStageResult{Stage: k + 1, Env: s.Env, Iteration: it}
	if s.Kind == StageSFT {
		res.Kind = StageSFT
	}
	a.Envs = cascadeEnvs(c.plan, k, c.rule)
	a.Episodes = c.o.Episodes
	opps, err := loop.ScriptedOpponents(c.o.Opponents)
	if err != nil {
		return res, err
	}
	cur := arena.Player{Name: "policy", Version: "stage " + strconv.Itoa(k+1) + ", iteration " + strconv.Itoa(it), Kind: players.KindAdapter, Model: policy}
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

// cascadeEnvs are the environments stage k (from 0) is evaluated on under
// rule, each once, in the order they are first met, with the parameters
// of their first stage.
func cascadeEnvs(plan []CascadeStage, k int, rule string) []arena.Env {
	last := len(plan) - 1
	if rule == SelectEncountered {
		last = k
	}
	var out []arena.Env
	seen := map[string]bool{}
	for _, s := range plan[:last+1] {
		if !seen[s.Env] {
			seen[s.Env] = true
			out = append(out, arena.Env{Name: s.Env, Params: engine.Params(s.Params)})
		}
	}
	return out
}

// CascadeTable writes the stage-by-stage table: held-out reward per
// environment at each evaluation (after each stage, and inside stages
// with eval_every; "–" where the environment was not evaluated: not yet
// encountered), their mean, and the checkpoint the stage started from.
func CascadeTable(w io.Writer, rs []CascadeStageResult) {
	if len(rs) == 0 {
		return
	}
	seen := map[string]bool{}
	for _, r := range rs {
		for e := range r.Reward {
			seen[e] = true
		}
	}
	envNames := engine.SortedKeys(seen)
	fmt.Fprintf(w, "| after stage | from | %s | mean |\n|---|---|%s---|\n", strings.Join(envNames, " | "), strings.Repeat("---|", len(envNames)))
	for _, r := range rs {
		cells := make([]string, len(envNames))
		for i, e := range envNames {
			cells[i] = "–"
			if v, ok := r.Reward[e]; ok {
				cells[i] = fmt.Sprintf("%.3f", v)
			}
		}
		name := r.Env
		if r.Kind == StageSFT {
			name += " (sft)"
		}
		if r.Partial {
			name += ", iteration " + strconv.Itoa(r.Iteration)
		}
		if r.Best {
			name += " (best)"
		}
		fmt.Fprintf(w, "| %d: %s | %s | %s | %.3f |\n", r.Stage, name, cmp.Or(r.From, "–"), strings.Join(cells, " | "), r.Mean)
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
