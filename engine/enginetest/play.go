package enginetest

import (
	"context"
	"testing"

	"github.com/omar-selfplay/omar/engine"
)

// PlayScripted plays episode seed of g under params p with the scripted
// policies agents (engine.ScriptedCast: by seat, one for every seat, none
// for the game's default) and returns its record; any error fails t.
func PlayScripted(t testing.TB, g engine.Game, seed uint64, p engine.Params, agents ...string) *engine.Record {
	t.Helper()
	cast, err := engine.ScriptedCast(g, agents, seed)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := engine.Play(context.Background(), g, seed, p, cast, engine.DefaultOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}
