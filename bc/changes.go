package bc

import (
	"fmt"
	"slices"
	"strings"

	"github.com/omar-selfplay/omar/model"
)

// BuildChanges are changes to a build's recipe, the flags of `omar model
// default --rebuild` (whose names its errors use). A zero count, an empty
// name, or -1 where 0 is a choice (DaggerRounds, DaggerMaxPerSeat) keeps
// the recipe's (Defaults).
type BuildChanges struct {
	// Steps are the optimizer steps of behaviour cloning.
	Steps int
	// Episodes are every environment's corpus episodes per cast;
	// CorpusScale multiplies the recipe's instead, keeping its mix (one
	// of the two).
	Episodes    int
	CorpusScale float64
	// Preset is the model's shape (model.Presets).
	Preset string
	// Seed draws the initial weights and the order of the batches.
	Seed uint64
	// Threads are the trainer's threads; 0 sizes them to the free cores.
	// It always applies.
	Threads int
	// The DAgger rounds: how many, their steps and episodes, their
	// environments (DaggerGameFor) and the most labelled turns of one
	// seat per episode.
	DaggerRounds, DaggerSteps, DaggerEpisodes int
	DaggerEnvs                                []string
	DaggerMaxPerSeat                          int
	// CPUVariant pins ggml's CPU kernels (BuildOptions.CPUVariant); it
	// always applies.
	CPUVariant string
}

// Defaults are no changes: -1 for the DAgger rounds and the turns per
// seat, where 0 is a choice.
func (BuildChanges) Defaults() BuildChanges {
	return BuildChanges{DaggerRounds: -1, DaggerMaxPerSeat: -1}
}

// Apply returns o with c's changes, or the first change that does not
// fit.
func (c BuildChanges) Apply(o BuildOptions) (BuildOptions, error) {
	if c.Steps > 0 {
		o.Steps, o.Train.TotalSteps = c.Steps, c.Steps
	}
	if c.Preset != "" {
		if !slices.Contains(model.Presets, c.Preset) {
			return o, fmt.Errorf("--preset %q: want one of %v", c.Preset, model.Presets)
		}
		o.Preset = c.Preset
	}
	if c.Seed > 0 {
		o.Seed = c.Seed
	}
	if c.Threads < 0 {
		return o, fmt.Errorf("--threads %d: want 0 (the free cores) or more", c.Threads)
	}
	o.Train.Threads = c.Threads
	switch {
	case c.Episodes > 0 && c.CorpusScale != 0:
		return o, fmt.Errorf("--episodes and --corpus-scale: give one")
	case c.Episodes > 0:
		for i := range o.Corpus.Envs {
			o.Corpus.Envs[i].Episodes = c.Episodes
		}
	case c.CorpusScale != 0:
		if !(c.CorpusScale > 0 && c.CorpusScale <= 1000) {
			return o, fmt.Errorf("--corpus-scale %v: want a factor in (0, 1000]", c.CorpusScale)
		}
		o.Corpus = o.Corpus.Scaled(c.CorpusScale)
	}
	if c.DaggerRounds >= 0 {
		o.Dagger.Rounds = c.DaggerRounds
	}
	if c.DaggerSteps > 0 {
		o.Dagger.Steps = c.DaggerSteps
	}
	if c.DaggerEpisodes > 0 {
		o.Dagger.Episodes = c.DaggerEpisodes
	}
	if len(c.DaggerEnvs) > 0 {
		o.Dagger.Games = nil
		for _, e := range c.DaggerEnvs {
			g, err := DaggerGameFor(strings.TrimSpace(e))
			if err != nil {
				return o, fmt.Errorf("--dagger-envs: %v", err)
			}
			o.Dagger.Games = append(o.Dagger.Games, g)
		}
	}
	if c.DaggerMaxPerSeat >= 0 {
		o.Dagger.MaxPerSeat = c.DaggerMaxPerSeat
	}
	o.CPUVariant = c.CPUVariant
	return o, nil
}
