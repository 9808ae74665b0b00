package engine

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/omar-selfplay/omar/seeds"
)

// Cast chooses the agent of each seat once the episode has dealt its seats
// (roles may be hidden until then). label names the agent in the record,
// e.g. "scripted:strategic" or "llama:tiny.gguf".
type Cast func(seat Seat) (agent Agent, label string, err error)

// Record is the complete, self-contained account of one episode: one JSONL
// line of an episodes file. It holds everything needed to recompute every
// reward: the scenario with its private fields, every event with its
// audience, and the outcome.
type Record struct {
	Env        string       `json:"env"` // versioned id, e.g. "dealornodeal_v1"
	EnvName    string       `json:"env_name"`
	EnvVersion int          `json:"env_version"`
	Params     Params       `json:"params,omitempty"`
	Seed       uint64       `json:"seed"`
	Seats      []SeatRecord `json:"seats"`
	Scenario   any          `json:"scenario"`
	Events     []Event      `json:"events"`
	Outcome    Outcome      `json:"outcome"`
}

// SeatRecord is a seat with the agent that played it.
type SeatRecord struct {
	Seat
	Agent string `json:"agent"`
}

// SplitID splits a versioned id "name_vN" into name and N (0 when absent).
func SplitID(id string) (name string, version int) {
	i := strings.LastIndex(id, "_v")
	if i < 0 {
		return id, 0
	}
	v, err := strconv.Atoi(id[i+2:])
	if err != nil {
		return id, 0
	}
	return id[:i], v
}

// Play deals an episode of g from seed, casts its seats, runs it to the end
// and returns its record. observe, when non-nil, receives the runtime before
// the episode starts (for example to serve its log over HTTP).
func Play(ctx context.Context, g Game, seed uint64, p Params, cast Cast, opts Options, observe func(*Runtime)) (*Record, error) {
	ep, err := g.NewEpisode(seed, p)
	if err != nil {
		return nil, err
	}
	seats := ep.Seats()
	agents := make([]Agent, len(seats))
	rec := &Record{Env: g.ID(), Params: p, Seed: seed, Seats: make([]SeatRecord, len(seats))}
	rec.EnvName, rec.EnvVersion = SplitID(g.ID())
	for i, s := range seats {
		a, label, err := cast(s)
		if err != nil {
			return nil, fmt.Errorf("engine: cast seat %d (%s): %w", i, s.Name, err)
		}
		agents[i] = a
		rec.Seats[i] = SeatRecord{Seat: s, Agent: label}
	}
	rt, err := NewRuntime(seats, agents, opts)
	if err != nil {
		return nil, err
	}
	if observe != nil {
		observe(rt)
	}
	defer rt.log.Close()
	if err := ep.Run(ctx, rt); err != nil {
		return nil, fmt.Errorf("engine: %s seed %d: %w", g.ID(), seed, err)
	}
	out := ep.Outcome()
	lo, hi := g.RewardRange()
	if err := out.Validate(len(seats), lo, hi); err != nil {
		return nil, fmt.Errorf("engine: %s seed %d: %w", g.ID(), seed, err)
	}
	rt.log.Append(Event{Kind: KindOutcome, Audience: Everyone(), Seat: -1, Text: "The episode is over: " + out.Result, Data: out})
	rec.Scenario = ep.Scenario()
	rec.Outcome = out
	rec.Events = rt.log.All()
	return rec, nil
}

// ScriptedCast casts seats with g's scripted policies. names lists policy
// names by seat; a single name applies to every seat; "scripted" means the
// game's default policy. Each seat's agent is seeded from (seed, seat).
func ScriptedCast(g Game, names []string, seed uint64) (Cast, error) {
	if len(names) == 0 {
		names = []string{"scripted"}
	}
	pols := g.Policies()
	if len(pols) == 0 {
		return nil, fmt.Errorf("engine: %s has no scripted policies", g.ID())
	}
	resolve := func(name string) (Policy, error) {
		if name == "scripted" || name == "" {
			return pols[0], nil
		}
		return FindPolicy(g, ScriptedName(name))
	}
	for _, n := range names {
		if _, err := resolve(n); err != nil {
			return nil, err
		}
	}
	return func(s Seat) (Agent, string, error) {
		name := names[0]
		if len(names) > 1 {
			if s.Index >= len(names) {
				return nil, "", fmt.Errorf("%d agents given for more seats", len(names))
			}
			name = names[s.Index]
		}
		pol, err := resolve(name)
		if err != nil {
			return nil, "", err
		}
		return pol.New(s, seeds.Derive(seed, uint64(s.Index))), ScriptedAgent(pol.Name), nil
	}, nil
}
