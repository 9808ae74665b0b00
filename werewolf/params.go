package werewolf

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/omar-selfplay/omar/engine"
)

// Roles.
const (
	Werewolf = "werewolf"
	Seer     = "seer"
	Doctor   = "doctor"
	Witch    = "witch"
	Guard    = "guard"
	Villager = "villager"
)

// Teams (engine.Seat.Team).
const (
	TeamWerewolves = "werewolves"
	TeamVillagers  = "villagers"
)

// roleOrder fixes the order roles are listed and dealt in: never iterate a
// RoleCounts map for anything that affects output.
var roleOrder = []string{Werewolf, Seer, Doctor, Witch, Guard, Villager}

// teamOf is the team of a role.
func teamOf(role string) string {
	if role == Werewolf {
		return TeamWerewolves
	}
	return TeamVillagers
}

// Player-count limits. Below four players the default set of roles leaves
// no villager; above twenty a day is too long for useful self-play.
const (
	MinPlayers = 4
	MaxPlayers = 20
)

// RoleCounts maps a role to how many seats have it. In params it may be
// written as an object ({"werewolf": 2, "seer": 1, …}) or as a list of role
// names (["werewolf", "werewolf", "seer", …]).
type RoleCounts map[string]int

// UnmarshalJSON accepts an object of counts or a list of role names.
func (rc *RoleCounts) UnmarshalJSON(b []byte) error {
	var list []string
	if err := json.Unmarshal(b, &list); err == nil {
		m := RoleCounts{}
		for _, r := range list {
			m[strings.ToLower(strings.TrimSpace(r))]++
		}
		*rc = m
		return nil
	}
	var m map[string]int
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("werewolf: roles must be an object of counts or a list of role names: %w", err)
	}
	out := RoleCounts{}
	for r, n := range m {
		out[strings.ToLower(strings.TrimSpace(r))] += n
	}
	*rc = out
	return nil
}

// Total is the number of seats the counts describe.
func (rc RoleCounts) Total() int {
	n := 0
	for _, r := range roleOrder {
		n += rc[r]
	}
	return n
}

// String lists the counts in role order, e.g. "2 werewolves, 1 seer, …".
func (rc RoleCounts) String() string {
	var parts []string
	for _, r := range roleOrder {
		if n := rc[r]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, plural(r, n)))
		}
	}
	return strings.Join(parts, ", ")
}

func plural(role string, n int) string {
	if n == 1 {
		return role
	}
	if role == Werewolf {
		return "werewolves"
	}
	if role == Witch {
		return "witches"
	}
	return role + "s"
}

// DefaultRoles is the role set for n players when only the player count is
// given: (n+1)/4 werewolves (2 for the default 7), one seer, one doctor, and
// villagers for the rest.
func DefaultRoles(n int) RoleCounts {
	w := max((n+1)/4, 1)
	return RoleCounts{Werewolf: w, Seer: 1, Doctor: 1, Villager: n - w - 2}
}

// Shaping is the optional per-event reward table (off by default). Each
// entry is added to the seat's terminal reward, and the sum is clipped to
// the declared range [-1, 1].
type Shaping struct {
	Enabled bool `json:"enabled"`
	// Kill goes to every living werewolf for each night kill by the pack.
	Kill float64 `json:"kill"`
	// CorrectVote goes to a villager-team player for each day vote cast
	// against a werewolf.
	CorrectVote float64 `json:"correct_vote"`
	// Save goes to the doctor, guard or witch whose protection or potion
	// stopped the werewolves' kill.
	Save float64 `json:"save"`
	// SeerFind goes to the seer for each inspection that finds a werewolf.
	SeerFind float64 `json:"seer_find"`
}

// Params are the game's parameters. Decode them with DecodeParams.
type Params struct {
	// Players is the number of seats. With Roles empty the roles are
	// DefaultRoles(Players) (7 when 0); with Roles given it must be 0 or
	// equal to their total.
	Players int        `json:"players,omitempty"`
	Roles   RoleCounts `json:"roles,omitempty"`
	// Witch and Guard turn one default villager into a witch or a guard;
	// they may not be combined with an explicit Roles.
	Witch bool `json:"witch,omitempty"`
	Guard bool `json:"guard,omitempty"`
	// MaxCycles caps the game: after this many night+day cycles without a
	// winner it is a draw.
	MaxCycles int `json:"max_cycles"`
	// KillRounds is how many simultaneous choice rounds the werewolves get
	// per night to reach consensus (each round's choices are shown to the
	// pack before the next).
	KillRounds int `json:"kill_rounds"`
	// Gamma discounts the team reward of an eliminated player:
	// reward × Gamma^(end cycle − elimination cycle).
	Gamma float64 `json:"gamma"`
	// SpeechMaxChars bounds one speech (day speeches and team chat).
	SpeechMaxChars int     `json:"speech_max_chars"`
	Shaping        Shaping `json:"shaping"`
}

// Defaults are the default parameters (roles are resolved by Resolve).
func Defaults() Params {
	return Params{
		MaxCycles:      10,
		KillRounds:     2,
		Gamma:          0.9,
		SpeechMaxChars: 400,
		Shaping:        Shaping{Kill: 0.1, CorrectVote: 0.1, Save: 0.2, SeerFind: 0.1},
	}
}

// DecodeParams decodes p over the defaults, resolves the roles and
// validates the result.
func DecodeParams(p engine.Params) (Params, error) {
	out := Defaults()
	if err := engine.DecodeParams(p, &out); err != nil {
		return Params{}, fmt.Errorf("werewolf: %w", err)
	}
	if err := out.Resolve(); err != nil {
		return Params{}, err
	}
	return out, out.Validate()
}

// Resolve fills Players and Roles from each other and the witch/guard
// options.
func (p *Params) Resolve() error {
	if len(p.Roles) > 0 {
		if p.Witch || p.Guard {
			return fmt.Errorf("werewolf: witch/guard options cannot be combined with an explicit roles list; add the role to roles instead")
		}
		if p.Players == 0 {
			p.Players = p.Roles.Total()
		}
		return nil
	}
	if p.Players == 0 {
		p.Players = 7
	}
	if p.Players < MinPlayers || p.Players > MaxPlayers {
		return fmt.Errorf("werewolf: players %d outside [%d, %d]", p.Players, MinPlayers, MaxPlayers)
	}
	rc := DefaultRoles(p.Players)
	for _, opt := range []struct {
		on   bool
		role string
	}{{p.Witch, Witch}, {p.Guard, Guard}} {
		if !opt.on {
			continue
		}
		if rc[Villager] == 0 {
			return fmt.Errorf("werewolf: no villager left to become the %s with %d players", opt.role, p.Players)
		}
		rc[Villager]--
		rc[opt.role]++
	}
	p.Roles = rc
	return nil
}

// Validate checks resolved parameters.
func (p Params) Validate() error {
	var unknown []string
	for r := range p.Roles {
		if !isRole(r) {
			unknown = append(unknown, r)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("werewolf: unknown roles %q (have %s)", unknown, strings.Join(roleOrder, ", "))
	}
	for _, r := range roleOrder {
		if p.Roles[r] < 0 {
			return fmt.Errorf("werewolf: negative count %d for %s", p.Roles[r], r)
		}
	}
	for _, r := range []string{Seer, Doctor, Witch, Guard} {
		if p.Roles[r] > 1 {
			return fmt.Errorf("werewolf: at most one %s (got %d)", r, p.Roles[r])
		}
	}
	n, w := p.Roles.Total(), p.Roles[Werewolf]
	if p.Players != n {
		return fmt.Errorf("werewolf: players %d but the roles add up to %d", p.Players, n)
	}
	if n < MinPlayers || n > MaxPlayers {
		return fmt.Errorf("werewolf: players %d outside [%d, %d]", n, MinPlayers, MaxPlayers)
	}
	if w < 1 {
		return fmt.Errorf("werewolf: at least one werewolf is needed")
	}
	if 2*w >= n {
		return fmt.Errorf("werewolf: %d werewolves of %d players would win at once; werewolves must be fewer than the others", w, n)
	}
	if p.MaxCycles < 1 || p.MaxCycles > 100 {
		return fmt.Errorf("werewolf: max_cycles %d outside [1, 100]", p.MaxCycles)
	}
	if p.KillRounds < 1 || p.KillRounds > 5 {
		return fmt.Errorf("werewolf: kill_rounds %d outside [1, 5]", p.KillRounds)
	}
	if math.IsNaN(p.Gamma) || p.Gamma < 0 || p.Gamma > 1 {
		return fmt.Errorf("werewolf: gamma %v outside [0, 1]", p.Gamma)
	}
	if p.SpeechMaxChars < 40 || p.SpeechMaxChars > 4000 {
		return fmt.Errorf("werewolf: speech_max_chars %d outside [40, 4000]", p.SpeechMaxChars)
	}
	s := p.Shaping
	for _, e := range []struct {
		name string
		v    float64
	}{{"kill", s.Kill}, {"correct_vote", s.CorrectVote}, {"save", s.Save}, {"seer_find", s.SeerFind}} {
		if math.IsNaN(e.v) || e.v < 0 || e.v > 1 {
			return fmt.Errorf("werewolf: shaping %s %v outside [0, 1]", e.name, e.v)
		}
	}
	return nil
}

func isRole(r string) bool {
	for _, x := range roleOrder {
		if x == r {
			return true
		}
	}
	return false
}
