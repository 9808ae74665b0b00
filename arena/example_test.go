package arena_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/omar-selfplay/omar/arena"
	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/scripted"
	"github.com/omar-selfplay/omar/players"
	"github.com/omar-selfplay/omar/selfplay"
)

// A training loop evaluates its live policy mid-run: the players wrap the
// loop's own backend. Here a rule-based backend stands in for the loop's
// llama backend; with llama, the current policy is the backend with
// Adapter "" (its current adapter) and the starting point the same backend
// with Adapter inference.AdapterBase, and both decode together.
func Example() {
	backend, err := scripted.New(scripted.Options{Rule: func(r inference.Request) string {
		last := r.Messages[len(r.Messages)-1].Content
		if strings.Contains(last, "ACCEPT") {
			return "ACCEPT" // take any offer on the table
		}
		return "PROPOSE: price=100"
	}})
	if err != nil {
		panic(err)
	}
	current := arena.Player{
		Name: "current", Version: "iteration 7",
		Model: &selfplay.Player{Label: "policy", Backend: backend, Tokenizer: backend},
	}
	o := arena.Options{}.Defaults()
	o.Envs = []arena.Env{{Name: "craigslist", Params: engine.Params{"rounds": 3, "structured_only": true}}}
	o.Episodes = 16
	rep, err := arena.Evaluate(context.Background(), o, "", // "": no results file, no resume
		[]arena.Player{current, players.Scripted("strategic")},
		[]arena.Player{players.Scripted("naive")}, arena.Hooks{})
	if err != nil {
		panic(err)
	}
	for _, c := range rep.Cells {
		fmt.Printf("%s as %s: reward %.2f, deals %.2f\n", c.Player, c.Side, c.Reward.Mean, c.Results["deal"])
	}
	// Output:
	// current as buyer: reward 0.54, deals 1.00
	// scripted:strategic as buyer: reward 0.99, deals 1.00
	// current as seller: reward 0.00, deals 1.00
	// scripted:strategic as seller: reward 0.87, deals 1.00
}
