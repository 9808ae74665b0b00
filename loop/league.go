package loop

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/runfiles"
	"github.com/omar-selfplay/omar/seeds"
	"github.com/omar-selfplay/omar/selfplay"
)

// LeagueOptions configure an opponent league (the league section): in
// each episode the policy plays one seat and an opponent drawn from a
// pool plays every other — fixed scripts, the frozen starting model and
// snapshots of the policy itself — or, with probability self_play, the
// policy plays every seat. Only the policy's seats are trained.
// Opponents are drawn with prioritised sampling: an opponent's weight is
// multiplied by (1 − r̄)^priority, where r̄ is the policy's recent mean
// reward against it (normalised to [0,1]), so opponents the policy does
// worse against are met more often.
type LeagueOptions struct {
	Enabled bool `yaml:"enabled"`
	// SelfPlay is the share of episodes with the policy on every seat.
	SelfPlay float64 `yaml:"self_play"`
	// Scripted are the games' scripted policies in the pool.
	Scripted []string `yaml:"scripted"`
	// Base puts the frozen starting model (the adapter-free base, or the
	// warm-up adapter's weights' base) in the pool.
	Base bool `yaml:"base"`
	// SnapshotEvery adds the policy after every n-th iteration to the
	// pool (0: no snapshots); MaxSnapshots keeps the most recent ones.
	SnapshotEvery int `yaml:"snapshot_every"`
	MaxSnapshots  int `yaml:"max_snapshots"`
	// Weights of the kinds of opponents (relative).
	WeightScripted float64 `yaml:"weight_scripted"`
	WeightBase     float64 `yaml:"weight_base"`
	WeightSnapshot float64 `yaml:"weight_snapshot"`
	// Priority is the exponent of the prioritised sampling (0: draws by
	// the weights alone); Decay the weight of the newest iteration in the
	// running mean r̄.
	Priority float64 `yaml:"priority"`
	Decay    float64 `yaml:"decay"`
}

// DefaultLeague is a run's league section when it has none: off; when on,
// 20% self-play, the naive and strategic scripts, the base model and a
// snapshot every 2 iterations (the last 4 kept).
func DefaultLeague() LeagueOptions {
	return LeagueOptions{
		SelfPlay: 0.2, Scripted: []string{"naive", "strategic"}, Base: true,
		SnapshotEvery: 2, MaxSnapshots: 4,
		WeightScripted: 1, WeightBase: 1, WeightSnapshot: 1,
		Priority: 1, Decay: 0.3,
	}
}

// Validate reports the first invalid field.
func (l LeagueOptions) Validate() error {
	if !l.Enabled {
		return nil
	}
	for _, f := range []struct {
		name   string
		v, max float64
	}{{"self_play", l.SelfPlay, 1}, {"weight_scripted", l.WeightScripted, 1e6}, {"weight_base", l.WeightBase, 1e6},
		{"weight_snapshot", l.WeightSnapshot, 1e6}, {"priority", l.Priority, 100}, {"decay", l.Decay, 1}} {
		if !(f.v >= 0 && f.v <= f.max) {
			return fmt.Errorf("league.%s %v: want 0..%g", f.name, f.v, f.max)
		}
	}
	switch {
	case l.SnapshotEvery < 0 || l.MaxSnapshots < 0:
		return fmt.Errorf("league: snapshot_every %d and max_snapshots %d must be ≥ 0", l.SnapshotEvery, l.MaxSnapshots)
	case len(l.Scripted) == 0 && !l.Base && l.SnapshotEvery == 0 && l.SelfPlay < 1:
		return errors.New("league: an empty pool (no scripted, base or snapshots) and self_play < 1")
	}
	return nil
}

// LeagueState is the league's part of a checkpoint.
type LeagueState struct {
	// Snapshots are the iterations whose adapters are in the pool.
	Snapshots []int `json:"snapshots,omitempty"`
	// Reward is each opponent's r̄: the policy's running mean normalised
	// reward against it.
	Reward map[string]float64 `json:"reward,omitempty"`
}

// AdapterLoader registers a named adapter on a backend (the llama
// backend's LoadAdapter): snapshots are served by the policy's backend.
type AdapterLoader interface {
	LoadAdapter(ctx context.Context, name, path string, scale float32) error
}

// opponent is one member of the pool.
type opponent struct {
	name   string // in reports and LeagueState.Reward
	agent  string // the runner's agent value
	weight float64
}

// league is a run's opponent league.
type league struct {
	o     LeagueOptions
	seed  uint64
	seats int
	// group is the rollout's group size: the episodes of one GRPO group
	// share their draw as they share their scenario, so that a group's
	// baseline compares the policy's samples against one opponent from
	// one seat, not a mix of the pool. Zero (a league built by hand) draws
	// each episode on its own.
	group int
	lo    float64
	hi    float64
	// pool is fixed for an iteration: Cast is a function of the episode
	// index and the pool as the iteration started.
	pool  []opponent
	probs []float64
}

// leagueModel is the league opponent name served by the policy's backend
// with adapter (the base weights or a snapshot).
func leagueModel(policy *selfplay.Player, name, adapter string) *selfplay.Player {
	return &selfplay.Player{Label: leaguePlayer(name), Backend: policy.Backend, Tokenizer: policy.Tokenizer, Adapter: adapter}
}

// leaguePlayer names a league model player for the runner.
func leaguePlayer(name string) string { return "league:" + name }

// newLeague sets the run's league up: checks the scripts, registers the
// base and the snapshots with the runner.
func (r *Run) newLeague(ctx context.Context) error {
	o := r.opts.League
	if !o.Enabled {
		return nil
	}
	specs, err := r.game.Seats(engine.Params(r.opts.Rollout.Params))
	if err != nil {
		return err
	}
	lo, hi := r.game.RewardRange()
	lg := &league{o: o, seed: seeds.Derive(r.opts.Rollout.Seed, 0x6c656167), seats: len(specs), group: r.opts.Rollout.GroupSize, lo: lo, hi: hi}
	for _, name := range o.Scripted {
		if _, err := engine.FindPolicy(r.game, engine.ScriptedName(name)); err != nil {
			return fmt.Errorf("league.scripted: %w", err)
		}
	}
	if o.Base {
		base := leagueModel(r.player, "base", inference.AdapterBase)
		if err := r.runner.AddPlayer(leaguePlayer("base"), base); err != nil {
			return err
		}
	}
	for _, it := range r.state.League.Snapshots {
		if err := r.loadSnapshot(ctx, it); err != nil {
			return err
		}
	}
	r.league = lg
	return nil
}

// snapshotName names the snapshot of iteration it.
func snapshotName(it int) string { return "iter-" + strconv.Itoa(it) }

// loadSnapshot serves the adapter of iteration it from the policy's
// backend as a named player.
func (r *Run) loadSnapshot(ctx context.Context, it int) error {
	loader, ok := r.swapper.(AdapterLoader)
	if !ok {
		return errors.New("league: snapshots need a backend that serves named adapters (the llama backend)")
	}
	name := snapshotName(it)
	if err := loader.LoadAdapter(ctx, name, r.snapshotPath(name), 1); err != nil {
		return fmt.Errorf("league: snapshot %s: %w", name, err)
	}
	p := leagueModel(r.player, name, name)
	return r.runner.AddPlayer(leaguePlayer(name), p)
}

// snapshotPath is the file of the snapshot adapter name.
func (r *Run) snapshotPath(name string) string {
	return r.Path(filepath.Join(runfiles.LeagueDir, name+".gguf"))
}

// snapshot adds the policy after iteration it to the pool.
func (r *Run) snapshot(ctx context.Context, it int) error {
	o := r.opts.League
	if r.league == nil || o.SnapshotEvery == 0 || it%o.SnapshotEvery != 0 {
		return nil
	}
	if err := os.MkdirAll(r.Path(runfiles.LeagueDir), 0o755); err != nil {
		return err
	}
	b, err := os.ReadFile(r.Path(runfiles.AdapterFile))
	if err != nil {
		return err
	}
	if err := writeFileAtomic(r.Path(filepath.Join(runfiles.LeagueDir, snapshotName(it)+".gguf")), b); err != nil {
		return err
	}
	if err := r.loadSnapshot(ctx, it); err != nil {
		return err
	}
	s := append(r.state.League.Snapshots, it)
	if n := o.MaxSnapshots; n > 0 && len(s) > n {
		s = s[len(s)-n:]
	}
	r.state.League.Snapshots = s
	return nil
}

// prepare fixes the pool and its draw probabilities for the next
// iteration.
func (lg *league) prepare(st LeagueState) {
	o := lg.o
	lg.pool = lg.pool[:0]
	for _, name := range o.Scripted {
		agent := engine.ScriptedAgent(name)
		lg.pool = append(lg.pool, opponent{name: agent, agent: agent, weight: o.WeightScripted})
	}
	if o.Base {
		lg.pool = append(lg.pool, opponent{name: "base", agent: leaguePlayer("base"), weight: o.WeightBase})
	}
	for _, it := range st.Snapshots {
		n := snapshotName(it)
		lg.pool = append(lg.pool, opponent{name: n, agent: leaguePlayer(n), weight: o.WeightSnapshot})
	}
	lg.probs = make([]float64, len(lg.pool))
	total := 0.0
	for i, op := range lg.pool {
		r, ok := st.Reward[op.name]
		if !ok {
			r = 0.5 // not met yet
		}
		w := op.weight * math.Pow(1-r+1e-3, o.Priority)
		lg.probs[i] = w
		total += w
	}
	for i := range lg.probs {
		if total > 0 {
			lg.probs[i] /= total
		}
	}
}

// draw returns episode i's policy seat and opponent (nil: self-play); the
// episodes of a group draw alike.
func (lg *league) draw(i int) (seat int, op *opponent) {
	k := uint64(i / max(1, lg.group))
	u := func(part uint64) float64 {
		return float64(seeds.Derive(lg.seed, part, k)>>11) / (1 << 53)
	}
	if len(lg.pool) == 0 || u(1) < lg.o.SelfPlay {
		return -1, nil
	}
	seat = int(u(2) * float64(lg.seats))
	x, acc, last := u(3), 0.0, len(lg.pool)-1
	for k := range lg.pool {
		if lg.probs[k] > 0 {
			last = k
		}
		acc += lg.probs[k]
		if x < acc && lg.probs[k] > 0 {
			return seat, &lg.pool[k]
		}
	}
	// The probabilities' sum can fall short of 1 by rounding; the draw
	// then goes to the last member that can be drawn at all, never to one
	// whose weight is 0.
	return seat, &lg.pool[last]
}

// leagueDraw is an episode's draw: the policy's seat and its opponent
// (nil: self-play). A draw is kept from when its episode's work was
// published, as the pool may have changed by the time it is collected.
type leagueDraw struct {
	seat int
	op   *opponent
}

// cast is the runner's Options.Cast.
func (lg *league) cast(i int) map[int]string {
	seat, op := lg.draw(i)
	if op == nil {
		return nil
	}
	out := make(map[int]string, lg.seats)
	for s := range lg.seats {
		if s == seat {
			out[s] = selfplay.AgentPolicy
		} else {
			out[s] = op.agent
		}
	}
	return out
}

// tally counts an episode's league result into stats.
func (lg *league) tally(res *selfplay.EpisodeResult, d leagueDraw, stats map[string]*runfiles.LeagueStat) {
	seat, op := d.seat, d.op
	name := "self"
	if op != nil {
		name = op.name
	}
	st := stats[name]
	if st == nil {
		st = &runfiles.LeagueStat{}
		stats[name] = st
	}
	var r float64
	if op != nil {
		r = res.Record.Outcome.Rewards[seat]
	} else {
		r = mean(res.Record.Outcome.Rewards)
	}
	st.Reward = (st.Reward*float64(st.Episodes) + r) / float64(st.Episodes+1)
	st.Episodes++
}

// update folds an iteration's results into the running means.
func (lg *league) update(st *LeagueState, stats map[string]*runfiles.LeagueStat) {
	if st.Reward == nil {
		st.Reward = map[string]float64{}
	}
	for _, name := range engine.SortedKeys(stats) {
		if name == "self" {
			continue
		}
		norm := (stats[name].Reward - lg.lo) / (lg.hi - lg.lo)
		norm = min(1, max(0, norm))
		if old, ok := st.Reward[name]; ok {
			st.Reward[name] = (1-lg.o.Decay)*old + lg.o.Decay*norm
		} else {
			st.Reward[name] = norm
		}
	}
	// Forget opponents that left the pool.
	for name := range st.Reward {
		if !slices.ContainsFunc(lg.pool, func(o opponent) bool { return o.name == name }) && strings.HasPrefix(name, "iter-") {
			delete(st.Reward, name)
		}
	}
}
