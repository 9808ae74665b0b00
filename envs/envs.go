// Package envs is the catalogue of omar's environments: every game the
// command line, the training loop and the arena can name by id.
package envs

import (
	"fmt"
	"sort"
	"strings"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/games/calendar"
	"github.com/omar-selfplay/omar/games/casino"
	"github.com/omar-selfplay/omar/games/craigslist"
	"github.com/omar-selfplay/omar/games/dealornodeal"
	"github.com/omar-selfplay/omar/games/jobinterview"
	"github.com/omar-selfplay/omar/games/marketplace"
	"github.com/omar-selfplay/omar/games/sealedbid"
	"github.com/omar-selfplay/omar/games/testbed"
	"github.com/omar-selfplay/omar/internal/suggest"
	"github.com/omar-selfplay/omar/sotopia"
	"github.com/omar-selfplay/omar/werewolf"
)

// all lists every environment. Each environment package adds itself here
// with one line; the known-optimum test beds (package testbed) come last.
var all = append([]engine.Game{
	werewolf.New(),
	sotopia.New(),
	dealornodeal.New(),
	casino.New(),
	craigslist.New(),
	jobinterview.New(),
	calendar.New(),
	marketplace.New(),
	sealedbid.New(),
}, testbed.Games()...)

// All returns every environment, in catalogue order.
func All() []engine.Game { return append([]engine.Game(nil), all...) }

// Negotiation lists the ids (without version) of the six negotiation
// games, in the order of docs/mission.md's tables.
var Negotiation = []string{"dealornodeal", "casino", "craigslist", "jobinterview", "calendar", "marketplace"}

// Find returns the game whose id is id, or whose id without its version
// suffix is id.
func Find(id string) (engine.Game, error) {
	var ids, names []string
	for _, g := range all {
		name, _ := engine.SplitID(g.ID())
		if g.ID() == id || name == id {
			return g, nil
		}
		ids, names = append(ids, g.ID()), append(names, name)
	}
	sort.Strings(ids)
	hint := ""
	if best := suggest.Closest(id, append(names, ids...)); best != "" {
		hint = fmt.Sprintf("did you mean %s? ", best)
	}
	return nil, fmt.Errorf("unknown environment %q (%shave %s)", id, hint, strings.Join(ids, ", "))
}
