package arena

import (
	"slices"
	"strconv"

	"github.com/omar-selfplay/omar/engine"
)

// Side is the part of a game a player takes in a pairing; the opponent
// plays every other seat. A game with one seat per role has one side per
// role (buyer, seller). Werewolf deals its roles per episode, so its sides
// are the two teams: "werewolves" (every werewolf seat) and "villagers"
// (all the others). A game whose seats share a role (a three-bidder
// auction) has one side per seat name.
type Side struct {
	Name string
	// Keys match seats as selfplay.Options.Agents keys do: a seat name,
	// "seat<N>" or a role.
	Keys []string
	// Complement makes the side every seat that Keys do not match.
	Complement bool
}

// Has reports whether seat belongs to the side.
func (s Side) Has(seat engine.Seat) bool {
	hit := slices.Contains(s.Keys, seat.Name) || slices.Contains(s.Keys, "seat"+strconv.Itoa(seat.Index)) ||
		seat.Role != "" && slices.Contains(s.Keys, seat.Role)
	return hit != s.Complement
}

// Agents is the selfplay Agents map that puts player on the side and
// opponent everywhere else.
func (s Side) Agents(player, opponent string) map[string]string {
	in, out := player, opponent
	if s.Complement {
		in, out = opponent, player
	}
	m := map[string]string{"*": out}
	for _, k := range s.Keys {
		m[k] = in
	}
	return m
}

// teamSides are the sides of games whose roles are dealt per episode, by
// game name (engine.SplitID).
var teamSides = map[string][]Side{
	"werewolf": {
		{Name: "werewolves", Keys: []string{"werewolf"}},
		{Name: "villagers", Keys: []string{"werewolf"}, Complement: true},
	},
}

// Sides returns the sides of g for parameters p: the named ones, or all
// (Env.Sides).
func Sides(g engine.Game, p engine.Params, names []string) ([]Side, error) {
	name, _ := engine.SplitID(g.ID())
	all := teamSides[name]
	if all == nil {
		specs, err := g.Seats(p)
		if err != nil {
			return nil, err
		}
		byRole := true
		var roles []string
		for _, s := range specs {
			if s.Role == "" || slices.Contains(roles, s.Role) {
				byRole = false
			}
			roles = append(roles, s.Role)
		}
		for _, s := range specs {
			if byRole {
				all = append(all, Side{Name: s.Role, Keys: []string{s.Role}})
			} else {
				all = append(all, Side{Name: s.Name, Keys: []string{s.Name}})
			}
		}
	}
	if len(names) == 0 {
		return all, nil
	}
	return checkSides(all, names)
}
