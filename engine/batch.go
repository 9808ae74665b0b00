package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/omar-selfplay/omar/seeds"
)

// ScriptedRun describes episodes played by scripted policies only (what
// omar play does).
type ScriptedRun struct {
	Game Game
	// Agents are policy names by seat (one name: every seat; see
	// ScriptedCast).
	Agents   []string
	Params   Params
	Episodes int
	// Seed derives episode k's deal and policies from (Seed, k).
	Seed     uint64
	Parallel int
	Options  Options
}

// ScriptedConfig is a ScriptedRun as a YAML config gives it (omar play's
// --config, which its flags override): the game by id, the agents as
// ScriptedAgents reads them, and the file of the episodes' records.
type ScriptedConfig struct {
	Env        string   `yaml:"env"`
	Params     Params   `yaml:"params"`
	Agents     []string `yaml:"agents"`
	Episodes   int      `yaml:"episodes"`
	Seed       uint64   `yaml:"seed"`
	Out        string   `yaml:"out"`
	Parallel   int      `yaml:"parallel"`
	MaxRetries *int     `yaml:"max_retries"` // nil: DefaultOptions'
}

// DefaultScriptedConfig is every seat's default script, one episode from
// seed 1, four episodes at once.
func DefaultScriptedConfig() ScriptedConfig {
	return ScriptedConfig{Agents: []string{"scripted"}, Episodes: 1, Seed: 1, Parallel: 4}
}

// Run is the run c describes of g, the game c.Env names, checked
// (Validate).
func (c ScriptedConfig) Run(g Game) (ScriptedRun, error) {
	agents := make([]string, len(c.Agents))
	for i, a := range c.Agents {
		agents[i] = strings.TrimSpace(a)
	}
	agents, err := ScriptedAgents(g, c.Params, agents)
	if err != nil {
		return ScriptedRun{}, err
	}
	r := ScriptedRun{Game: g, Agents: agents, Params: c.Params, Episodes: c.Episodes, Seed: c.Seed, Parallel: c.Parallel, Options: DefaultOptions()}
	if c.MaxRetries != nil {
		r.Options.MaxRetries = *c.MaxRetries
	}
	return r, r.Validate()
}

// ScriptedAgents reads the agents of a ScriptedRun of g with params:
// key=agent pairs as a run's --agents takes them (AgentFor; a seat no key
// names plays its default script, "scripted"), or else policy names, one
// for every seat or one per seat in order, returned as they are. Pairs
// are returned as policy names by seat order; each must be scripted.
func ScriptedAgents(g Game, params Params, list []string) ([]string, error) {
	if !slices.ContainsFunc(list, func(s string) bool { return strings.Contains(s, "=") }) {
		return list, nil
	}
	pairs, err := ParseAgents(strings.Join(list, ","))
	if err != nil {
		return nil, err
	}
	seats, err := g.Seats(params)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(seats))
	for i, s := range seats {
		a, ok := AgentFor(pairs, Seat{Index: i, Name: s.Name, Role: s.Role})
		switch {
		case !ok:
			a = "scripted"
		case !IsScripted(a):
			return nil, fmt.Errorf("agents: %s=%s: omar play seats scripted policies only (scripted or scripted:NAME)", s.Name, a)
		}
		names[i] = a
	}
	return names, nil
}

// Validate checks r before any episode is played: counts, one agent or
// one per seat, and that every agent names a policy of the game.
func (r ScriptedRun) Validate() error {
	switch {
	case r.Game == nil:
		return errors.New("engine: no game")
	case r.Episodes < 1:
		return fmt.Errorf("episodes %d < 1", r.Episodes)
	case r.Parallel < 1:
		return fmt.Errorf("parallel %d < 1", r.Parallel)
	case r.Options.MaxRetries < 0:
		return fmt.Errorf("max_retries %d < 0", r.Options.MaxRetries)
	}
	if len(r.Agents) > 1 {
		seats, err := r.Game.Seats(r.Params)
		if err != nil {
			return err
		}
		if len(r.Agents) != len(seats) {
			return fmt.Errorf("%d agents for the %d seats of %s", len(r.Agents), len(seats), r.Game.ID())
		}
	}
	_, err := ScriptedCast(r.Game, r.Agents, 0)
	return err
}

// PlayScripted plays r's episodes, r.Parallel at a time, and hands the
// records to emit in episode order, so the output is the same for every
// degree of parallelism. A finished episode holds its slot until emit has
// returned for it (RunOrdered): at most r.Parallel records are in memory,
// however slow the consumer.
func PlayScripted(ctx context.Context, r ScriptedRun, emit func(*Record) error) error {
	_, err := RunOrdered(ctx, 0, r.Episodes, r.Parallel,
		func(ctx context.Context, k int) (*Record, error) {
			seed := seeds.Derive(r.Seed, uint64(k))
			cast, err := ScriptedCast(r.Game, r.Agents, seed)
			if err != nil {
				return nil, fmt.Errorf("episode %d: %w", k, err)
			}
			rec, err := Play(ctx, r.Game, seed, r.Params, cast, r.Options, nil)
			if err != nil {
				return nil, fmt.Errorf("episode %d: %w", k, err)
			}
			return rec, nil
		}, emit)
	return err
}

// Summary aggregates episode records: results, mean reward by role and
// agent, mean outcome metrics.
type Summary struct {
	Episodes int
	Results  map[string]int
	// Reward is keyed "role (agent)".
	Reward  map[string]*Mean
	Metrics map[string]*Mean
}

// Mean is a running mean.
type Mean struct {
	Sum float64
	N   int
}

// Add counts x.
func (m *Mean) Add(x float64) { m.Sum += x; m.N++ }

// Value is the mean (0 of nothing).
func (m *Mean) Value() float64 { return m.Sum / float64(max(m.N, 1)) }

// NewSummary returns an empty summary.
func NewSummary() *Summary {
	return &Summary{Results: map[string]int{}, Reward: map[string]*Mean{}, Metrics: map[string]*Mean{}}
}

func mean(m map[string]*Mean, k string) *Mean {
	if m[k] == nil {
		m[k] = &Mean{}
	}
	return m[k]
}

// Add counts one record.
func (s *Summary) Add(rec *Record) {
	s.Episodes++
	s.Results[rec.Outcome.Result]++
	for i, seat := range rec.Seats {
		mean(s.Reward, seat.Role+" ("+seat.Agent+")").Add(rec.Outcome.Rewards[i])
	}
	for k, v := range rec.Outcome.Metrics {
		mean(s.Metrics, k).Add(v)
	}
}

// SortedKeys returns m's keys in order.
func SortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Write prints the summary as omar play closes: mean reward by role and
// agent, the results' shares, the metrics' means.
func (s *Summary) Write(w io.Writer, id string) {
	fmt.Fprintf(w, "%s: %d episodes\n", id, s.Episodes)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "role (agent)\tmean reward\tn")
	for _, k := range SortedKeys(s.Reward) {
		fmt.Fprintf(tw, "%s\t%.4f\t%d\n", k, s.Reward[k].Value(), s.Reward[k].N)
	}
	tw.Flush()
	var res []string
	for _, k := range SortedKeys(s.Results) {
		res = append(res, fmt.Sprintf("%s %.1f%%", k, 100*float64(s.Results[k])/float64(s.Episodes)))
	}
	fmt.Fprintf(w, "results: %s\n", strings.Join(res, ", "))
	if len(s.Metrics) > 0 {
		tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "metric\tmean")
		for _, k := range SortedKeys(s.Metrics) {
			fmt.Fprintf(tw, "%s\t%.4f\n", k, s.Metrics[k].Value())
		}
		tw.Flush()
	}
}
