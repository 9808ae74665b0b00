package sotopia

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/seeds"
)

// ID is the environment id.
const ID = "sotopia_v1"

// Named reports whether id names SOTOPIA, with or without its version:
// the environment whose rewards come from an LLM judge.
func Named(id string) bool {
	name, _ := engine.SplitID(id)
	return name == "sotopia"
}

// Params are the environment's parameters.
type Params struct {
	// Dir loads scenarios and characters from every *.yaml file of this
	// directory instead of the embedded content.
	Dir string `json:"dir,omitempty"`
	// Scenario pins a scenario by id; empty lets the seed pick one.
	Scenario string `json:"scenario,omitempty"`
	// Pair pins the scenario's character pair (0..4); -1 lets the seed pick.
	Pair int `json:"pair"`
	// Characters pins the two characters by id (overrides Pair).
	Characters []string `json:"characters,omitempty"`
	// Hard restricts the seed's choice to the hard scenarios.
	Hard bool `json:"hard,omitempty"`
	// Category restricts the seed's choice to one category.
	Category string `json:"category,omitempty"`
	// MaxTurns ends the episode after this many turns (both agents together).
	MaxTurns int `json:"max_turns"`
	// MaxNone ends the episode after more than this many consecutive "none".
	MaxNone int `json:"max_none"`
	// MaxChars bounds the content of one action.
	MaxChars int `json:"max_chars"`
}

// Defaults returns the default parameters.
func (Params) Defaults() Params { return Params{Pair: -1, MaxTurns: 20, MaxNone: 2, MaxChars: 600} }

// Validate checks p.
func (p Params) Validate() error {
	switch {
	case p.MaxTurns < 1:
		return fmt.Errorf("sotopia: max_turns %d < 1", p.MaxTurns)
	case p.MaxNone < 0:
		return fmt.Errorf("sotopia: max_none %d < 0", p.MaxNone)
	case p.MaxChars < 1:
		return fmt.Errorf("sotopia: max_chars %d < 1", p.MaxChars)
	case p.Pair < -1 || p.Pair >= PairsPerScenario:
		return fmt.Errorf("sotopia: pair %d outside -1..%d", p.Pair, PairsPerScenario-1)
	case p.Characters != nil && len(p.Characters) != 2:
		return fmt.Errorf("sotopia: characters lists %d ids, want 2", len(p.Characters))
	case p.Category != "" && !slices.Contains(Categories, p.Category):
		return fmt.Errorf("sotopia: unknown category %q", p.Category)
	}
	return nil
}

// Game is the SOTOPIA environment. The zero judge leaves episodes
// unjudged; WithJudge returns a copy that scores them.
type Game struct {
	judge *Judge
}

// New returns the environment without a judge.
func New() *Game { return &Game{} }

// WithJudge returns a copy of g whose episodes are scored by j.
func (g *Game) WithJudge(j *Judge) *Game { return &Game{judge: j} }

// Judged reports whether g has a judge: without one every episode is
// unjudged and its reward 0.
func (g *Game) Judged() bool { return g.judge != nil }

// DefaultParams implements engine.ParamDefaulter.
func (g *Game) DefaultParams() engine.Params { return engine.ParamsOf(Params{}.Defaults()) }

// ID implements engine.Game.
func (g *Game) ID() string { return ID }

// Description implements engine.Game.
func (g *Game) Description() string {
	return "SOTOPIA: two characters with private social goals act in turns; a SOTOPIA-EVAL judge scores them"
}

// Seats implements engine.Game.
func (g *Game) Seats(p engine.Params) ([]engine.SeatSpec, error) {
	if _, err := decodeParams(p); err != nil {
		return nil, err
	}
	return []engine.SeatSpec{{Name: "agent_1", Role: "agent_1"}, {Name: "agent_2", Role: "agent_2"}}, nil
}

// RewardRange implements engine.Game.
func (g *Game) RewardRange() (lo, hi float64) { return 0, 1 }

func decodeParams(raw engine.Params) (Params, error) {
	p := Params{}.Defaults()
	if err := engine.DecodeParams(raw, &p); err != nil {
		return p, fmt.Errorf("sotopia: %w", err)
	}
	return p, p.Validate()
}

var (
	embeddedOnce    sync.Once
	embeddedContent *Content
	embeddedErr     error
)

// content returns the content for p: the embedded set (loaded once) or
// p.Dir.
func content(p Params) (*Content, error) {
	if p.Dir != "" {
		return LoadDir(p.Dir)
	}
	embeddedOnce.Do(func() { embeddedContent, embeddedErr = LoadEmbedded() })
	return embeddedContent, embeddedErr
}

// Setup is what an episode dealt: the scenario and the two characters
// (private fields included). It is the episode's Scenario().
type Setup struct {
	Scenario   Scenario     `json:"scenario"`
	Characters [2]Character `json:"characters"`
	// Pair is the index of the character pair in the scenario's fixed
	// pairs, or -1 when the characters were pinned.
	Pair     int `json:"pair"`
	MaxTurns int `json:"max_turns"`
	MaxNone  int `json:"max_none"`
	MaxChars int `json:"max_chars"`
}

// NewEpisode implements engine.Game: the seed picks the scenario and the
// character pair unless p pins them.
func (g *Game) NewEpisode(seed uint64, raw engine.Params) (engine.Episode, error) {
	p, err := decodeParams(raw)
	if err != nil {
		return nil, err
	}
	c, err := content(p)
	if err != nil {
		return nil, err
	}
	var cand []int
	for i, s := range c.Scenarios {
		if (p.Scenario == "" || s.ID == p.Scenario) && (!p.Hard || s.Hard) && (p.Category == "" || s.Category == p.Category) {
			cand = append(cand, i)
		}
	}
	if len(cand) == 0 {
		return nil, fmt.Errorf("sotopia: no scenario matches scenario=%q hard=%v category=%q", p.Scenario, p.Hard, p.Category)
	}
	si := cand[seeds.Derive(seed, 1)%uint64(len(cand))]
	s := c.Scenarios[si]
	setup := Setup{Scenario: s, Pair: -1, MaxTurns: p.MaxTurns, MaxNone: p.MaxNone, MaxChars: p.MaxChars}
	ids := p.Characters
	if ids == nil {
		pairs := c.Pairs[si]
		setup.Pair = int(seeds.Derive(seed, 2) % uint64(len(pairs)))
		if p.Pair >= 0 {
			if p.Pair >= len(pairs) {
				return nil, fmt.Errorf("sotopia: scenario %s has %d pairs, pair %d asked", s.ID, len(pairs), p.Pair)
			}
			setup.Pair = p.Pair
		}
		ids = pairs[setup.Pair][:]
	}
	for i, id := range ids {
		ch, ok := c.Character(id)
		if !ok {
			return nil, fmt.Errorf("sotopia: unknown character %q", id)
		}
		setup.Characters[i] = ch
	}
	if setup.Characters[0].ID == setup.Characters[1].ID {
		return nil, fmt.Errorf("sotopia: a character cannot meet itself (%s)", ids[0])
	}
	return &Episode{setup: setup, seed: seed, judge: g.judge}, nil
}

// Policies implements engine.Game.
func (g *Game) Policies() []engine.Policy { return policies() }

// TurnRecord is one turn of the conversation.
type TurnRecord struct {
	Turn      int  `json:"turn"` // from 1
	Seat      int  `json:"seat"`
	Move      Move `json:"move"`
	Defaulted bool `json:"defaulted,omitempty"`
	Invalid   int  `json:"invalid,omitempty"`
}

// Terms are the episode's Outcome.Terms: how it ended, the transcript and
// the judge's scores. Together with Setup they are the omniscient history.
type Terms struct {
	// End is "turn_limit", "left" or "silence".
	End string `json:"end"`
	// LeftBy is the seat that left, or -1.
	LeftBy int          `json:"left_by"`
	Turns  []TurnRecord `json:"turns"`
	// Judge is "none" when no judge was configured.
	Judge      string       `json:"judge"`
	Evaluation *Evaluation  `json:"evaluation,omitempty"`
	Extra      *ExtraScores `json:"extra,omitempty"`
	// Process holds the per-turn process rewards when that pass ran.
	Process []ProcessTurn `json:"process,omitempty"`
	// JudgeError says why the judge gave no valid scores.
	JudgeError string `json:"judge_error,omitempty"`
}

// Episode is one SOTOPIA conversation.
type Episode struct {
	setup   Setup
	seed    uint64
	judge   *Judge
	terms   Terms
	outcome engine.Outcome
}

// Seats implements engine.Episode.
func (e *Episode) Seats() []engine.Seat {
	return []engine.Seat{{Index: 0, Name: "agent_1", Role: "agent_1"}, {Index: 1, Name: "agent_2", Role: "agent_2"}}
}

// Scenario implements engine.Episode.
func (e *Episode) Scenario() any { return e.setup }

// Outcome implements engine.Episode.
func (e *Episode) Outcome() engine.Outcome { return e.outcome }

// Briefing is the Data of a seat's briefing event.
type Briefing struct {
	Seat         int          `json:"seat"`
	ScenarioID   string       `json:"scenario_id"`
	Relationship Relationship `json:"relationship"`
	Scenario     string       `json:"scenario"`
	Roles        [2]string    `json:"roles"`
	Self         Character    `json:"self"`
	Other        ProfileView  `json:"other"`
	Goal         string       `json:"goal"`
	MaxTurns     int          `json:"max_turns"`
	Grammar      string       `json:"grammar"`
}

// TurnEvent is the Data of the observation of a turn.
type TurnEvent struct {
	Turn int  `json:"turn"`
	Seat int  `json:"seat"`
	Move Move `json:"move"`
}

// TurnPrompt is the Data of a turn's notification.
type TurnPrompt struct {
	Turn     int `json:"turn"`
	MaxTurns int `json:"max_turns"`
}

// Briefing returns seat's briefing. It holds the seat's own full profile
// (secret included), what the relationship reveals of the other, and this
// seat's goal only.
func (e *Episode) Briefing(seat int) Briefing {
	s := e.setup.Scenario
	return Briefing{
		Seat: seat, ScenarioID: s.ID, Relationship: s.Relationship, Scenario: s.Text,
		Roles: [2]string{s.Agents[0].Role, s.Agents[1].Role},
		Self:  e.setup.Characters[seat], Other: Visible(e.setup.Characters[1-seat], s.Relationship),
		Goal: s.Agents[seat].Goal, MaxTurns: e.setup.MaxTurns, Grammar: MoveGrammar(e.setup.MaxChars),
	}
}

// Text renders a briefing.
func (b Briefing) Text() string {
	var w strings.Builder
	fmt.Fprintf(&w, "You are %s, the %s, in a social scenario with one other person, the %s.\n\n", b.Self.Name, b.Roles[b.Seat], b.Roles[1-b.Seat])
	fmt.Fprintf(&w, "Scenario: %s\n\n", b.Scenario)
	fmt.Fprintf(&w, "Your relationship with them: %s.\n\n", strings.ReplaceAll(string(b.Relationship), "_", " "))
	fmt.Fprintf(&w, "Your character (only you know your secret):\n%s\n", describeFull(b.Self))
	fmt.Fprintf(&w, "What you know about the other person:\n%s\n", b.Other.Describe())
	fmt.Fprintf(&w, "Your goal (private; the other person has a goal of their own): %s\n\n", b.Goal)
	fmt.Fprintf(&w, "You take turns; the conversation lasts at most %d turns in total. Stay in character and do not reveal your secret unless it serves your goal.\n\n", b.MaxTurns)
	w.WriteString(FormatHelp)
	return w.String()
}

// Run implements engine.Episode.
func (e *Episode) Run(ctx context.Context, rt *engine.Runtime) error {
	s := e.setup.Scenario
	for seat := range 2 {
		b := e.Briefing(seat)
		rt.Brief(seat, b.Text(), b)
	}
	rt.Phase("The conversation begins.", nil)
	e.terms = Terms{End: "turn_limit", LeftBy: -1, Judge: "none"}
	grammar := MoveGrammar(e.setup.MaxChars)
	nones := 0
	for t := 1; t <= e.setup.MaxTurns; t++ {
		seat := (t - 1) % 2
		me := e.setup.Characters[seat]
		ans, err := rt.Ask(ctx, engine.Question{
			Seat:    seat,
			Text:    fmt.Sprintf("Turn %d of %d. It is your turn, %s. Reply with one action: %s.", t, e.setup.MaxTurns, me.Name, shortHelp),
			Grammar: grammar,
			Data:    TurnPrompt{Turn: t, MaxTurns: e.setup.MaxTurns},
			Parse: func(text string) (any, error) {
				return ParseMove(text, e.setup.MaxChars)
			},
			Default: "none",
		})
		if err != nil {
			return err
		}
		m := ans.Move.(Move)
		e.terms.Turns = append(e.terms.Turns, TurnRecord{Turn: t, Seat: seat, Move: m, Defaulted: ans.Defaulted, Invalid: ans.Invalid})
		data := TurnEvent{Turn: t, Seat: seat, Move: m}
		rt.Broadcast(engine.Only(seat), seat, narrate("You", m), data)
		rt.Broadcast(engine.Only(1-seat), seat, narrate(displayName(me, s.Relationship), m), data)
		if m.Kind == ActLeave {
			e.terms.End, e.terms.LeftBy = "left", seat
			break
		}
		if m.Kind == ActNone {
			nones++
		} else {
			nones = 0
		}
		if nones > e.setup.MaxNone {
			e.terms.End = "silence"
			break
		}
	}
	rt.Phase("The conversation is over ("+strings.ReplaceAll(e.terms.End, "_", " ")+").", nil)
	return e.score(ctx)
}

// History is the omniscient account of an episode the judge reads.
func (e *Episode) History() History { return History{Setup: e.setup, Terms: e.terms} }

// score fills the outcome: from the judge when one is configured,
// otherwise "unjudged" with zero rewards.
func (e *Episode) score(ctx context.Context) error {
	metrics := map[string]float64{"turns": float64(len(e.terms.Turns)), "judged": 0}
	e.outcome = engine.Outcome{Rewards: []float64{0, 0}, Result: "unjudged", Metrics: metrics}
	if e.judge != nil {
		out, terms, err := e.judge.Score(ctx, e.History())
		if err != nil {
			return err
		}
		e.terms, e.outcome = terms, out
	}
	e.outcome.Terms = e.terms
	return nil
}
