package main

import (
	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/envs"
)

// games lists every environment the CLI knows (package envs).
var games = envs.All()

// findGame returns the game whose id (with or without its version) is id.
func findGame(id string) (engine.Game, error) { return envs.Find(id) }
