package recipes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"

	"github.com/omar-selfplay/omar/bc"
	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/envs"
	"github.com/omar-selfplay/omar/internal/jsonl"
	"github.com/omar-selfplay/omar/loop"
	"github.com/omar-selfplay/omar/runfiles"
	"github.com/omar-selfplay/omar/seeds"
)

// sftScript is the scripted policy an SFT stage clones.
const sftScript = "strategic"

// CascadeSFTRecords is, in an SFT stage's directory, the episode records
// of the strategic script's play that the stage clones.
const CascadeSFTRecords = "sft-records.jsonl"

// sftStage runs stage k (from 0) as behaviour cloning from start: the
// strategic script plays the stage's episodes on its environment (every
// seat), bc.SFT learns every seat's replies through the policy's own seat
// streams, and the adapter is evaluated as a PPO stage's is. Interrupted,
// it is done again from the start.
func (c *cascadeRun) sftStage(ctx context.Context, k int, start cascadeCheckpoint) error {
	s := c.plan[k]
	sdir := filepath.Join(c.dir, "stage-"+strconv.Itoa(k+1))
	if err := os.MkdirAll(sdir, 0o755); err != nil {
		return err
	}
	ro := c.o.Run.Rollout
	ro.Env, ro.Params, ro.Adapter = s.Env, s.Params, start.adapter
	if ro.Model == "" { // the run template's model, as loop.Open writes it
		path, err := filepath.Abs(filepath.Join(sdir, runfiles.ModelFile))
		if err != nil {
			return err
		}
		if _, err := os.Stat(path); err != nil {
			if err := loop.WriteModel(path, c.o.Run); err != nil {
				return err
			}
		}
		ro.Model = path
	}
	records := filepath.Join(sdir, CascadeSFTRecords)
	if err := playScript(ctx, s, seeds.Derive(ro.Seed, 0x736674, uint64(k)), max(1, ro.Parallel), records); err != nil {
		return err
	}
	so := bc.SFTOptions{}.Defaults()
	so.Model, so.Adapter, so.Records, so.Learn = ro.Model, start.adapter, []string{records}, []string{sftScript}
	so.MaxTokens, so.Context = ro.MaxTokens, ro.Context
	so.Out, so.Epochs = filepath.Join(sdir, runfiles.AdapterFile), s.Iterations
	// The run template's trainer: the adapter has the rank and modules
	// the PPO stages load.
	so.Train = c.o.Run.Train
	so.Train.LibDir = ro.LlamaLib
	sr, err := bc.SFT(ctx, so, bc.SFTHooks{})
	if err != nil {
		return err
	}
	ro.Adapter = so.Out
	return c.evaluateAdapter(ctx, k, ro, sdir, func(res *CascadeStageResult) {
		res.From, res.FromAdapter = start.label, start.adapter
		res.SFTTrajectories, res.SFTSkipped = sr.Trajectories, sr.Skipped
	})
}

// playScript writes episodes of the strategic script on every seat of
// s's environment to path.
func playScript(ctx context.Context, s CascadeStage, seed uint64, parallel int, path string) error {
	g, err := envs.Find(s.Env)
	if err != nil {
		return err
	}
	run := engine.ScriptedRun{Game: g, Agents: []string{sftScript}, Params: engine.Params(s.Params), Episodes: s.Episodes,
		Seed: seed, Parallel: parallel, Options: engine.DefaultOptions()}
	if err := run.Validate(); err != nil {
		return err
	}
	w, err := jsonl.Create(path)
	if err != nil {
		return err
	}
	err = engine.PlayScripted(ctx, run, func(rec *engine.Record) error { return w.Write(rec) })
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return err
}

// evaluateAdapter evaluates ro's model and adapter as stage k's (from 0)
// policy, with the arena settings a run of ro would evaluate with, in
// sdir/eval/cascade, and records the evaluation with what note adds.
func (c *cascadeRun) evaluateAdapter(ctx context.Context, k int, ro loop.RolloutOptions, sdir string, note func(*CascadeStageResult)) error {
	g, err := envs.Find(ro.Env)
	if err != nil {
		return err
	}
	seats, err := g.Seats(engine.Params(ro.Params))
	if err != nil {
		return err
	}
	if ro.Contexts == 0 {
		ro.Contexts = loop.AutoContexts(ro)
	}
	ps, err := loop.OpenPlayers(&ro, len(seats))
	if err != nil {
		return err
	}
	defer ps.Close()
	if ps.Llama == nil {
		return errors.New("no policy model")
	}
	// A seat stream fits the backend's and the model's context, as in a
	// run (loop.Open).
	a := ro.ArenaOptions(min(ro.Context, ps.Llama.ContextPerSequence(), ps.Llama.Model().NCtxTrain()))
	if t := c.o.Run.Eval.Temperature; t != nil {
		a.Sampling.Temperature = *t
	}
	res, err := c.evaluate(ctx, k, 0, a, ps.Policy, filepath.Join(sdir, runfiles.EvalDir, "cascade"))
	if err != nil {
		return err
	}
	note(&res)
	return c.record(res, ro.Adapter, "")
}
