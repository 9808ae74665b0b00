package bc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/envs"
	"github.com/omar-selfplay/omar/loop"
	"github.com/omar-selfplay/omar/seeds"
	"github.com/omar-selfplay/omar/selfplay"
	"github.com/omar-selfplay/omar/train"
)

// CorpusOptions describe a behaviour-cloning corpus: episodes the games'
// scripted policies play, with the replies of some seats learnt through
// the exact seat streams self-play renders (selfplay.Clone).
type CorpusOptions struct {
	Envs []CorpusEnv `yaml:"envs"`
	// Seed derives every episode's deal and every policy's seed.
	Seed uint64 `yaml:"seed"`
	// MaxTokens and Context are the seat stream's, as in self-play: a
	// model trained on the corpus plays with the same settings.
	MaxTokens int `yaml:"max_tokens"`
	Context   int `yaml:"context"`
}

// CorpusEnv is one environment of a corpus.
type CorpusEnv struct {
	Env    string         `yaml:"env"`
	Params map[string]any `yaml:"params"`
	// Episodes per cast.
	Episodes int `yaml:"episodes"`
	// Casts are scripted policy names by seat order (one name: every
	// seat), as `omar play --agents` takes them; none: the game's default
	// policy on every seat.
	Casts [][]string `yaml:"casts"`
	// Learn names the policies whose seats are learnt ("scripted:" may be
	// left out); empty: every seat.
	Learn []string `yaml:"learn"`
	// Weight is how often each of the environment's sequences is seen per
	// epoch (1 by default; 0.5 keeps every other one, 2 repeats each).
	Weight float64 `yaml:"weight"`
}

// Validate reports the first invalid field.
func (o CorpusOptions) Validate() error {
	if len(o.Envs) == 0 {
		return errors.New("corpus: no environments")
	}
	if o.MaxTokens < 1 || o.Context < 2*o.MaxTokens {
		return fmt.Errorf("corpus: max_tokens %d and context %d: want max_tokens ≥ 1 and context ≥ 2 × max_tokens", o.MaxTokens, o.Context)
	}
	for i, e := range o.Envs {
		if _, err := envs.Find(e.Env); err != nil {
			return fmt.Errorf("corpus: envs[%d]: %w", i, err)
		}
		if e.Episodes < 1 || e.Episodes > loop.MaxCount {
			return fmt.Errorf("corpus: envs[%d] (%s): episodes %d: want 1..%d", i, e.Env, e.Episodes, loop.MaxCount)
		}
		if math.IsNaN(e.Weight) || e.Weight < 0 || e.Weight > 100 {
			return fmt.Errorf("corpus: envs[%d] (%s): weight %v: want 0..100", i, e.Env, e.Weight)
		}
	}
	return nil
}

// runnerOptions are the seat-stream options the corpus is rendered with.
func (o CorpusOptions) runnerOptions(params map[string]any) selfplay.Options {
	ro := selfplay.Options{}.Defaults()
	ro.Seed = o.Seed
	ro.MaxTokens, ro.Context = o.MaxTokens, o.Context
	ro.MinReplyTokens = min(ro.MinReplyTokens, o.MaxTokens)
	ro.Params = engine.Params(params)
	return ro
}

// learns reports whether a seat whose record label is agent is learnt.
func (e CorpusEnv) learns(agent string) bool {
	if len(e.Learn) == 0 {
		return true
	}
	name := engine.ScriptedName(agent)
	for _, l := range e.Learn {
		if engine.ScriptedName(l) == name {
			return true
		}
	}
	return false
}

// CorpusStats count what BuildCorpus made.
type CorpusStats struct {
	Episodes, Skipped, Trajectories int
	// Tokens and TrainedTokens per environment, by the name the
	// options give it (what users type: "casino", not "casino_v1").
	Tokens, TrainedTokens map[string]int
}

// Scaled is o with every environment's episodes multiplied by f (rounded,
// at least 1): a larger or smaller corpus with the same mix.
func (o CorpusOptions) Scaled(f float64) CorpusOptions {
	o.Envs = slices.Clone(o.Envs)
	for i := range o.Envs {
		o.Envs[i].Episodes = max(1, int(math.Round(float64(o.Envs[i].Episodes)*f)))
	}
	return o
}

// BuildCorpus plays o's episodes with scripted casts and clones the learnt
// seats through p's tokenizer and chat template. Each trajectory's Weight
// is its environment's. progress, when not nil, is called after each
// episode.
func BuildCorpus(ctx context.Context, o CorpusOptions, p *selfplay.Player, progress func(done, total int)) ([]WeightedTrajectory, CorpusStats, error) {
	st := CorpusStats{Tokens: map[string]int{}, TrainedTokens: map[string]int{}}
	if err := o.Validate(); err != nil {
		return nil, st, err
	}
	total := 0
	for _, e := range o.Envs {
		total += e.Episodes * max(1, len(e.Casts))
	}
	var out []WeightedTrajectory
	done := 0
	for ei, e := range o.Envs {
		g, _ := envs.Find(e.Env)
		casts := e.Casts
		if len(casts) == 0 {
			casts = [][]string{nil}
		}
		ro := o.runnerOptions(e.Params)
		w := e.Weight
		if w == 0 {
			w = 1
		}
		for ci, names := range casts {
			for k := range e.Episodes {
				if err := ctx.Err(); err != nil {
					return nil, st, err
				}
				seed := seeds.Derive(o.Seed, uint64(ei), uint64(ci), uint64(k))
				cast, err := engine.ScriptedCast(g, names, seeds.Derive(seed, 1))
				if err != nil {
					return nil, st, fmt.Errorf("corpus: %s: %w", e.Env, err)
				}
				rec, err := engine.Play(ctx, g, seed, engine.Params(e.Params), cast, ro.Engine, nil)
				if err != nil {
					return nil, st, fmt.Errorf("corpus: %s: %w", e.Env, err)
				}
				trajs, err := cloneLearnt(ctx, g, rec, done, p, ro, e)
				done++
				if progress != nil {
					progress(done, total)
				}
				if err != nil {
					// A reply longer than max_tokens, say: the episode is
					// left out and counted.
					st.Skipped++
					continue
				}
				st.Episodes++
				for _, t := range trajs {
					out = append(out, WeightedTrajectory{Trajectory: t, Weight: w})
					st.Trajectories++
					st.Tokens[e.Env] += len(t.Tokens)
					st.TrainedTokens[e.Env] += t.Generated()
				}
			}
		}
	}
	return out, st, nil
}

// cloneLearnt clones the seats of rec that e learns.
func cloneLearnt(ctx context.Context, g engine.Game, rec *engine.Record, idx int, p *selfplay.Player, ro selfplay.Options, e CorpusEnv) ([]selfplay.Trajectory, error) {
	var seats []int
	for _, s := range rec.Seats {
		if e.learns(s.Agent) {
			seats = append(seats, s.Index)
		}
	}
	if len(seats) == 0 {
		return nil, nil
	}
	return selfplay.Clone(ctx, g, rec, idx, p, ro, seats)
}

// WeightedTrajectory is a corpus trajectory with its sampling weight.
type WeightedTrajectory struct {
	selfplay.Trajectory
	Weight float64
}

// CloneRecords clones the records in the JSONL files at paths (omar play,
// rollout or selfplay output): the seats whose agent label learn names
// (empty: every seat), rendered through p's streams with ro's settings.
// Records that do not replay are counted in skipped, not fatal.
func CloneRecords(ctx context.Context, paths []string, learn []string, p *selfplay.Player, maxTokens, context int) (trajs []selfplay.Trajectory, skipped int, err error) {
	idx := 0
	for _, path := range paths {
		// A torn last line (a write cut short) is a record that cannot
		// be cloned: counted in skipped like one that does not replay.
		err := engine.ReadRecords([]string{path}, func(error) { skipped++ }, func(rec *engine.Record) error {
			g, err := envs.Find(rec.Env)
			if err != nil {
				return err
			}
			o := CorpusOptions{MaxTokens: maxTokens, Context: context}
			ts, err := cloneLearnt(ctx, g, rec, idx, p, o.runnerOptions(map[string]any(rec.Params)), CorpusEnv{Learn: learn})
			idx++
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				skipped++
				return nil
			}
			trajs = append(trajs, ts...)
			return nil
		})
		if err != nil {
			return nil, skipped, err
		}
	}
	return trajs, skipped, nil
}

// WeightedSequences turns weighted trajectories into the training
// sequences of one epoch: each is kept ⌊w⌋ times plus once more with
// probability w − ⌊w⌋, decided by a hash of (seed, epoch, index) so that
// the mix is reproducible.
func WeightedSequences(trajs []WeightedTrajectory, seed uint64, epoch int) []train.Sequence {
	var out []train.Sequence
	for i, t := range trajs {
		n := repeats(t.Weight, seeds.Derive(seed, uint64(epoch), uint64(i)))
		seqs, _ := loop.Sequences([]selfplay.Trajectory{t.Trajectory})
		for range n {
			out = append(out, seqs...)
		}
	}
	return out
}
