package arena

import "github.com/omar-selfplay/omar/players"

// Player is one contestant of an evaluation: a player the players package
// opened (or the caller made, such as a run's current policy). The alias
// keeps the arena's signatures short; the type and its specs live in
// players.
type Player = players.Player
