package main

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
	"github.com/omar-selfplay/omar/sotopia"
	"github.com/omar-selfplay/omar/werewolf"
)

// games lists every environment the CLI knows. Each environment package
// adds itself here with one line.
var games = []engine.Game{
	werewolf.New(),
	sotopia.New(),
	dealornodeal.New(),
	casino.New(),
	craigslist.New(),
	jobinterview.New(),
	calendar.New(),
	marketplace.New(),
	sealedbid.New(),
}

// findGame returns the game whose id is id, or whose id without its
// version suffix is id.
func findGame(id string) (engine.Game, error) {
	var ids []string
	for _, g := range games {
		name, _ := engine.SplitID(g.ID())
		if g.ID() == id || name == id {
			return g, nil
		}
		ids = append(ids, g.ID())
	}
	sort.Strings(ids)
	return nil, fmt.Errorf("unknown environment %q (have %s)", id, strings.Join(ids, ", "))
}
