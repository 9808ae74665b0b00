package arena

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/envs"
	"github.com/omar-selfplay/omar/internal/errclip"
	"github.com/omar-selfplay/omar/selfplay"
)

// Options configure an evaluation. They are the YAML of `omar eval
// --config` and of a self-play config's eval section; a file is decoded
// onto Defaults(), so a key left out keeps its default.
type Options struct {
	// Envs are the environments, each played in every side.
	Envs []Env `yaml:"envs"`
	// Episodes is the number of held-out episodes of every pairing: one
	// player against one opponent in one side of one environment.
	Episodes int `yaml:"episodes"`
	// Seed fixes the held-out deals and every sampled reply. With the
	// training run's seed, the deals are disjoint from every deal the run
	// can train on (see FirstEpisode).
	Seed uint64 `yaml:"seed"`
	// Parallel is the number of episodes in flight over all pairings; all
	// their model seats share the players' backends and are decoded
	// together.
	Parallel int `yaml:"parallel"`
	// Reply is how model seats reply: a policy is measured with the
	// settings it was trained with (a run copies its rollouts' whole).
	selfplay.Reply `yaml:",inline"`
	// MaxRetries after an invalid reply before the inert default.
	MaxRetries int `yaml:"max_retries"`
	// Records also writes the engine record of every episode played to
	// RecordsFile in the directory, to read the transcripts behind the
	// numbers (omar replay, omar sft --records).
	Records bool `yaml:"records"`
	// Timeout bounds one reply of one seat (0: none).
	Timeout time.Duration `yaml:"timeout"`
	// Bootstrap is the number of bootstrap resamples behind every
	// confidence interval; Confidence their level.
	Bootstrap  int     `yaml:"bootstrap"`
	Confidence float64 `yaml:"confidence"`
	// Reference is the player the others are compared with (paired
	// differences, the transfer matrix); "" picks "base" when a player is
	// named so, else the first player.
	Reference string `yaml:"reference"`
	// Trained names the environments each player was trained on (player
	// name → environment names or ids); the report then gives such a
	// player's change against the reference in-domain and off-domain
	// (DomainTransfer). It changes no episode played.
	Trained map[string][]string `yaml:"trained_on"`
	// ScenarioCount, where an environment plays a curated set, plays
	// scenario k mod ScenarioCount in held-out episode k (a protocol of n
	// scenarios × trials: Episodes = n·trials); 0 (the default) plays
	// scenario seed mod the set's size.
	ScenarioCount int `yaml:"scenario_count"`
}

// Env is one environment of an evaluation.
type Env struct {
	// Name is an environment id ("craigslist" or "craigslist_v1", see
	// package envs); it names the environment in reports.
	Name string `yaml:"name" json:"name"`
	// Params are the game's parameters.
	Params engine.Params `yaml:"params" json:"params,omitempty"`
	// Scenarios is "curated" (the default: the game's curated evaluation
	// set when it has one, else held-out seeds) or "seeds" (held-out
	// seeds only, deals from the game's sampler).
	Scenarios string `yaml:"scenarios" json:"scenarios,omitempty"`
	// Sides lists the sides a player takes, each against the opponent in
	// every other seat: roles by default, Werewolf's two teams
	// ("werewolves", "villagers"). See Side.
	Sides []string `yaml:"sides" json:"sides,omitempty"`
	// Game replaces the catalogue's game of Name (SOTOPIA with a judge
	// attached, a test game); not part of YAML.
	Game engine.Game `yaml:"-" json:"-"`
}

// Scenario sets of Env.Scenarios.
const (
	ScenariosCurated = "curated"
	ScenariosSeeds   = "seeds"
)

// Defaults returns the evaluation defaults: 64 episodes per pairing, the
// reply settings of self-play (temperature 1: the policy as it is
// trained), 1000 bootstrap resamples, 95% intervals.
func (Options) Defaults() Options {
	s := selfplay.Options{}.Defaults()
	return Options{
		Episodes: 64, Seed: 1, Parallel: 16,
		Reply:      s.Reply,
		MaxRetries: engine.DefaultOptions().MaxRetries,
		Bootstrap:  1000, Confidence: 0.95,
	}
}

// Validate checks o.
func (o Options) Validate() error {
	var errs []error
	if len(o.Envs) == 0 {
		errs = append(errs, errors.New("no environment"))
	}
	seen := map[string]bool{}
	for i, e := range o.Envs {
		switch {
		case e.Name == "":
			errs = append(errs, fmt.Errorf("env %d: no name", i))
		case seen[e.Name]:
			errs = append(errs, fmt.Errorf("env %q listed twice", e.Name))
		case e.Scenarios != "" && e.Scenarios != ScenariosCurated && e.Scenarios != ScenariosSeeds:
			errs = append(errs, fmt.Errorf("env %q: scenarios %q: want curated or seeds", e.Name, e.Scenarios))
		}
		seen[e.Name] = true
		if e.Game == nil && e.Name != "" {
			if _, err := envs.Find(e.Name); err != nil {
				errs = append(errs, err)
			}
		}
	}
	switch {
	case o.Episodes < 1:
		errs = append(errs, fmt.Errorf("episodes %d < 1", o.Episodes))
	case o.Episodes > maxEpisodes:
		errs = append(errs, fmt.Errorf("episodes %d > %d", o.Episodes, maxEpisodes))
	}
	if o.Parallel < 1 || o.Parallel > maxParallel {
		errs = append(errs, fmt.Errorf("parallel %d: want 1..%d", o.Parallel, maxParallel))
	}
	if o.Bootstrap < 100 || o.Bootstrap > maxBootstrap {
		errs = append(errs, fmt.Errorf("bootstrap %d: want 100..%d resamples", o.Bootstrap, maxBootstrap))
	}
	if !(o.Confidence > 0.5 && o.Confidence < 1) {
		errs = append(errs, fmt.Errorf("confidence %v: want 0.5 < c < 1", o.Confidence))
	}
	if o.ScenarioCount < 0 {
		errs = append(errs, fmt.Errorf("scenario_count %d < 0", o.ScenarioCount))
	}
	errs = append(errs, o.validTrained()...)
	if err := o.runnerOptions().Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		// Bounded: an env name or spec echoed here may be megabytes.
		return errclip.Clip(fmt.Errorf("arena: options: %w", err))
	}
	return nil
}

// maxEpisodes bounds Episodes: eval indices stay far below 2^63.
const maxEpisodes = 1 << 30

// maxBootstrap bounds the resamples, each a pass over a pairing's
// episodes kept in one float64 slice per cell; maxParallel the episodes in
// flight (loop's rollout bound).
const (
	maxBootstrap = 1_000_000
	maxParallel  = 4096
)

// runnerOptions are the selfplay options every pairing shares.
func (o Options) runnerOptions() selfplay.Options {
	s := selfplay.Options{}.Defaults()
	s.Seed = o.Seed
	s.Parallel = 1
	s.Reply = o.Reply
	s.Engine = engine.Options{MaxRetries: o.MaxRetries, Timeout: o.Timeout}
	return s
}

// env is a resolved environment.
type env struct {
	Env
	game   engine.Game
	params engine.Params
	sides  []Side
	// curated reports whether the game's curated set is used.
	curated bool
}

// resolve finds each environment's game, its parameters (with the curated
// set selected where the game has one) and its sides.
func (o Options) resolve() ([]*env, error) {
	var out []*env
	for _, e := range o.Envs {
		g := e.Game
		if g == nil {
			var err error
			if g, err = envs.Find(e.Name); err != nil {
				return nil, err
			}
		}
		r := &env{Env: e, game: g, params: e.Params}
		if e.Scenarios != ScenariosSeeds {
			r.params, r.curated = withCurated(g, e.Params)
		}
		if _, err := g.NewEpisode(seedOf(o.Seed, 0), r.params); err != nil {
			return nil, fmt.Errorf("arena: env %s: %w", e.Name, err)
		}
		if o.ScenarioCount > 0 {
			// The last scenario the protocol plays must exist in every set.
			if _, err := g.NewEpisode(seedOf(o.Seed, 0), r.episodeParams(o.ScenarioCount, o.ScenarioCount-1)); err != nil {
				return nil, fmt.Errorf("arena: env %s: scenario_count %d: %w", e.Name, o.ScenarioCount, err)
			}
		}
		sides, err := Sides(g, r.params, e.Sides)
		if err != nil {
			return nil, fmt.Errorf("arena: env %s: %w", e.Name, err)
		}
		r.sides = sides
		out = append(out, r)
	}
	return out, nil
}

// episodeParams are the parameters of held-out episode k: with a
// scenario count n and a curated set (and no scenario chosen in the
// parameters), scenario k mod n, so that n·t episodes play each of the
// first n scenarios t times, with other sampling seeds every time.
func (e *env) episodeParams(n, k int) engine.Params {
	if n <= 0 || !e.curated {
		return e.params
	}
	if _, ok := e.params["scenario"]; ok {
		return e.params
	}
	q := engine.Params{"scenario": k % n}
	for key, v := range e.params {
		q[key] = v
	}
	return q
}

// withCurated returns p with the game's curated scenario set selected
// (scenario_set: curated, the parameter of the negotiation games) when the
// game accepts it and p does not choose a set itself.
func withCurated(g engine.Game, p engine.Params) (engine.Params, bool) {
	if v, ok := p["scenario_set"]; ok {
		return p, v == ScenariosCurated
	}
	q := engine.Params{"scenario_set": ScenariosCurated}
	for k, v := range p {
		q[k] = v
	}
	if _, err := g.NewEpisode(1, q); err != nil {
		return p, false // the game has no curated set (or no such parameter)
	}
	return q, true
}

// envNames lists the names of es.
func envNames(es []*env) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Name)
	}
	return out
}

// sideNames lists the names of ss.
func sideNames(ss []Side) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

// checkSides rejects unknown side names.
func checkSides(all []Side, names []string) ([]Side, error) {
	var out []Side
	for _, n := range names {
		i := slices.IndexFunc(all, func(s Side) bool { return s.Name == n })
		if i < 0 {
			return nil, fmt.Errorf("side %q: want one of %s", n, strings.Join(sideNames(all), ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}
