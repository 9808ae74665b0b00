package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Params are a game's parameters as read from YAML or JSON. Each game
// decodes them into its own struct with DecodeParams.
type Params map[string]any

// DecodeParams decodes p into v (a pointer to a struct already holding the
// defaults). Unknown keys are errors.
func DecodeParams(p Params, v any) error {
	if len(p) == 0 {
		return nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("engine: encode params: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("engine: params: %w", err)
	}
	return nil
}

// ParamDefaulter is a Game that lists its parameters with their default
// values, so that a client creating episodes (the web page's form) can
// offer them. Games without it take parameters all the same.
type ParamDefaulter interface {
	// DefaultParams are the parameters NewEpisode reads, each with the
	// value it takes when p leaves it out, as JSON would carry them.
	DefaultParams() Params
}

// ParamsOf returns the parameter struct v (a game's defaults) as Params:
// its JSON fields, numbers as float64.
func ParamsOf(v any) Params {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("engine: parameters %T do not encode: %v", v, err))
	}
	var p Params
	if err := json.Unmarshal(b, &p); err != nil {
		panic(fmt.Sprintf("engine: parameters %T are not a JSON object: %v", v, err))
	}
	return p
}

// SeatSpec describes a seat of a game before an episode assigns hidden roles.
type SeatSpec struct {
	Name string `json:"name"`
	// Role is the seat's role when it is fixed by the game (e.g. "buyer");
	// empty when roles are dealt per episode (Werewolf).
	Role string `json:"role,omitempty"`
}

// Seat is a seat of a running episode. Role and Team may be private: the
// engine never sends them anywhere; episodes decide what to reveal.
type Seat struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	Role  string `json:"role"`
	Team  string `json:"team,omitempty"`
}

// Game is an immutable environment definition.
type Game interface {
	// ID is the versioned environment id, e.g. "dealornodeal_v1".
	ID() string
	Description() string
	// Seats lists the seats for parameters p (nil p means defaults).
	Seats(p Params) ([]SeatSpec, error)
	// RewardRange bounds every seat's terminal reward.
	RewardRange() (lo, hi float64)
	// NewEpisode validates p and deals a new episode from seed.
	NewEpisode(seed uint64, p Params) (Episode, error)
	// Policies lists the game's scripted policies; the first is the default
	// used by "--agents scripted". A policy named "random" (uniformly random
	// legal play) must exist: the conformance suite uses it.
	Policies() []Policy
}

// Episode is the mutable state of one game.
type Episode interface {
	// Seats are the episode's seats with their (possibly hidden) roles.
	Seats() []Seat
	// Scenario is everything dealt at the start, private fields included,
	// as a JSON-encodable value: enough to recompute every reward.
	Scenario() any
	// Run plays the episode to the end through rt. It returns an error only
	// when ctx is cancelled or the runtime fails; bad moves are game events.
	Run(ctx context.Context, rt *Runtime) error
	// Outcome is valid after Run returned nil.
	Outcome() Outcome
}

// Outcome is the end of an episode.
type Outcome struct {
	// Rewards holds each seat's terminal reward, by seat index.
	Rewards []float64 `json:"rewards"`
	// Result is a short machine-readable verdict ("deal", "no_deal",
	// "werewolves", "villagers", "draw", "timeout", …).
	Result string `json:"result"`
	// Terms are the game-specific details (deal terms, winner, …).
	Terms any `json:"terms,omitempty"`
	// Metrics are per-episode numbers for reports.
	Metrics map[string]float64 `json:"metrics,omitempty"`
}

// Validate checks the rewards against the game's declared range.
func (o Outcome) Validate(nSeats int, lo, hi float64) error {
	if len(o.Rewards) != nSeats {
		return fmt.Errorf("engine: outcome has %d rewards for %d seats", len(o.Rewards), nSeats)
	}
	for i, r := range o.Rewards {
		if math.IsNaN(r) || math.IsInf(r, 0) || r < lo-1e-9 || r > hi+1e-9 {
			return fmt.Errorf("engine: seat %d reward %v outside [%v, %v]", i, r, lo, hi)
		}
	}
	return nil
}

// Turn is what an agent receives when it is asked to act.
type Turn struct {
	Notification Notification
	Seat         Seat
	// View is everything this seat may see so far, in order, ending with the
	// notification event. Agents must not modify it.
	View []Event
	// Validate checks a reply without applying it, so that a transport can
	// answer a remote client at once; the runtime validates again when it
	// applies the reply.
	Validate func(text string) error
}

// Agent is a participant. Act returns the action for t.Notification. An
// agent that cannot answer in time returns an error wrapping
// context.DeadlineExceeded (or ErrTimeout); the runtime then applies the
// inert default.
type Agent interface {
	Act(ctx context.Context, t Turn) (Action, error)
}

// Preparer is an optional interface of agents. Before the agents of a
// move start, the runtime calls Prepare for each of its turns, from one
// goroutine; then it runs their Acts concurrently, each once. A seat played by a model announces its request there, so that all
// the requests of a simultaneous move reach the backend in one call, in
// seat order, whatever the goroutines' timing (a batching backend's logits
// depend in their last bits on which sequences it decodes together).
type Preparer interface {
	Prepare(t Turn)
}

// AgentFunc adapts a function to Agent.
type AgentFunc func(ctx context.Context, t Turn) (Action, error)

// Act calls f.
func (f AgentFunc) Act(ctx context.Context, t Turn) (Action, error) { return f(ctx, t) }

// Policy is a named scripted policy of a game.
type Policy struct {
	Name        string
	Description string
	// New makes the agent for one seat of one episode; seed makes it
	// deterministic.
	New func(seat Seat, seed uint64) Agent
}

// ScriptedPrefix starts an agent spec that names one of a game's scripted
// policies, "scripted:NAME": the one place the prefix is written.
const ScriptedPrefix = "scripted:"

// ScriptedAgent returns the agent spec of the scripted policy name
// ("scripted:NAME"); a name that already carries the prefix keeps one.
func ScriptedAgent(name string) string { return ScriptedPrefix + ScriptedName(name) }

// ScriptedName returns the policy name of an agent spec "scripted:NAME",
// or the text itself when it has no prefix.
func ScriptedName(agent string) string { return strings.TrimPrefix(agent, ScriptedPrefix) }

// IsScripted reports whether agent is a scripted agent: "scripted" (each
// seat's default script) or "scripted:NAME".
func IsScripted(agent string) bool {
	return agent == strings.TrimSuffix(ScriptedPrefix, ":") || strings.HasPrefix(agent, ScriptedPrefix)
}

// AgentFor returns the agent that agents (keys: a seat's name, "seat<N>",
// its role, or "*"; the first that is there wins, in that order) give seat
// s, and whether one did. It is the one reading of the key=agent pairs of
// --agents and a config's agents section.
func AgentFor(agents map[string]string, s Seat) (string, bool) {
	for _, k := range []string{s.Name, "seat" + strconv.Itoa(s.Index), s.Role, "*"} {
		if v, ok := agents[k]; ok && k != "" {
			return v, true
		}
	}
	return "", false
}

// ParseAgents reads "key=agent" pairs separated by commas (the --agents
// flag), e.g. "*=policy,seat0=scripted:random"; AgentFor reads the keys.
func ParseAgents(s string) (map[string]string, error) {
	agents := map[string]string{}
	for kv := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("agents %q: want key=agent pairs, e.g. '*=policy,seat0=scripted:random'", s)
		}
		agents[k] = v
	}
	return agents, nil
}

// FindPolicy returns the policy of g named name.
func FindPolicy(g Game, name string) (Policy, error) {
	for _, p := range g.Policies() {
		if p.Name == name {
			return p, nil
		}
	}
	names := []string{}
	for _, p := range g.Policies() {
		names = append(names, p.Name)
	}
	return Policy{}, fmt.Errorf("engine: %s has no scripted policy %q (have %v)", g.ID(), name, names)
}

// DecodeData copies an event's Data into v (a pointer). In-process events
// carry the game's own typed values; events read back from JSON (HTTP,
// records) carry generic maps. DecodeData handles both, so scripted
// policies work in-process and as remote clients alike.
func DecodeData(data any, v any) error {
	if data == nil {
		return fmt.Errorf("engine: event has no data")
	}
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("engine: encode data: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("engine: decode data: %w", err)
	}
	return nil
}
