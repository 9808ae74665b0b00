package loop

import (
	"fmt"
	"sort"
	"strings"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/runfiles"
	"github.com/omar-selfplay/omar/selfplay"
)

// GuardCounts are the turn guard's counts over trajectories: turns seen,
// turns flagged and flags per reason.
type GuardCounts struct {
	Turns   int            `json:"turns"`
	Flagged int            `json:"flagged"`
	Reasons map[string]int `json:"reasons,omitempty"`
}

// Add counts the turns of trajs.
func (g *GuardCounts) Add(trajs []selfplay.Trajectory) {
	for i := range trajs {
		t := &trajs[i]
		g.Turns += len(t.TurnEnds)
		for k, fl := range t.TurnFlags {
			if !t.Flagged(k) {
				continue
			}
			g.Flagged++
			if g.Reasons == nil {
				g.Reasons = map[string]int{}
			}
			for _, r := range fl {
				g.Reasons[r]++
			}
		}
	}
}

// Rate is the share of flagged turns.
func (g GuardCounts) Rate() float64 {
	if g.Turns == 0 {
		return 0
	}
	return float64(g.Flagged) / float64(g.Turns)
}

// String lists the reasons in sorted order ("copy 1, empty 3").
func (g GuardCounts) String() string {
	names := make([]string, 0, len(g.Reasons))
	for r := range g.Reasons {
		names = append(names, r)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, r := range names {
		parts[i] = fmt.Sprintf("%s %d", r, g.Reasons[r])
	}
	return strings.Join(parts, ", ")
}

// Tally accumulates what metrics report of a rollout's episodes: rewards
// per role, rejected and defaulted decisions, guard flags.
type Tally struct {
	// Agent, when set, counts only the rewards of seats this agent label
	// played (a league run's policy; its opponents' rewards are not the
	// policy's).
	Agent     string
	sums      map[string]float64
	counts    map[string]int
	roles     []string // in order of first appearance
	rewards   []float64
	actions   int
	invalid   int
	decisions int
	defaults  int
	Guard     GuardCounts
}

// Add counts one finished episode.
func (t *Tally) Add(res *selfplay.EpisodeResult) {
	if t.sums == nil {
		t.sums, t.counts = map[string]float64{}, map[string]int{}
	}
	t.Guard.Add(res.Trajectories)
	for _, s := range res.Record.Seats {
		if t.Agent != "" && s.Agent != t.Agent {
			continue
		}
		rw := res.Record.Outcome.Rewards[s.Index]
		if _, ok := t.counts[s.Role]; !ok {
			t.roles = append(t.roles, s.Role)
		}
		t.sums[s.Role] += rw
		t.counts[s.Role]++
		t.rewards = append(t.rewards, rw)
	}
	for _, e := range res.Record.Events {
		switch e.Kind {
		case engine.KindAction:
			t.actions++
		case engine.KindValidationError:
			t.invalid++
		case engine.KindAck:
			t.decisions++
		case engine.KindDefault:
			t.decisions++
			t.defaults++
		}
	}
}

// Roles are the roles seen, in order of first appearance.
func (t *Tally) Roles() []string { return t.roles }

// RoleReward is the mean reward of role.
func (t *Tally) RoleReward(role string) float64 {
	if t.counts[role] == 0 {
		return 0
	}
	return t.sums[role] / float64(t.counts[role])
}

// fill writes the tally into m.
func (t *Tally) fill(m *runfiles.Metrics) {
	for role := range t.sums {
		m.Reward[role] = t.RoleReward(role)
	}
	m.RewardMean = mean(t.rewards)
	if t.actions > 0 {
		m.InvalidRate = float64(t.invalid) / float64(t.actions)
	}
	if t.decisions > 0 {
		m.DefaultRate = float64(t.defaults) / float64(t.decisions)
	}
	m.DegenerateRate, m.DegenerateTurns, m.Degenerate = t.Guard.Rate(), t.Guard.Flagged, t.Guard.Reasons
}

func mean(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}
