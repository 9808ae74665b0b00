package loop_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/loop"
)

// Train the built-in tiny model by self-play on Craigslist for two
// iterations, from Go.
func Example() {
	dir, _ := os.MkdirTemp("", "omar-run")
	defer os.RemoveAll(dir)

	o := loop.Options{}.Defaults() // the built-in run: tiny model, Craigslist
	o.Iterations = 2
	o.Rollout.Episodes = 4
	o.Rollout.LlamaLib = llamatest.LibDir() // where the llama.cpp libraries are
	run, err := loop.Open(filepath.Join(dir, "run"), o, loop.Fresh, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer run.Close()
	run.Hooks.Iteration = func(m *loop.Metrics) {
		fmt.Printf("iteration %d: %d episodes, %d tokens trained\n", m.Iteration, m.Episodes, m.TrainedTokens)
	}
	if err := run.Train(context.Background()); err != nil {
		fmt.Println(err)
	}
	// Output:
	// iteration 1: 4 episodes, 418 tokens trained
	// iteration 2: 4 episodes, 728 tokens trained
}
