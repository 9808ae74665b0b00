package loop_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/loop"
	"github.com/omar-selfplay/omar/runfiles"
)

// Train the built-in model on Deal or No Deal for two iterations, from Go (the
// default run has a league; its held-out evaluation is left out here).
func Example() {
	dir, _ := os.MkdirTemp("", "omar-run")
	defer os.RemoveAll(dir)

	o := loop.Options{}.Defaults() // the built-in run (make run)
	o.Iterations, o.Rollout.Episodes, o.Eval.Every = 2, 4, 0
	o.Rollout.LlamaLib = llamatest.LibDir() // where the llama.cpp libraries are
	run, err := loop.Open(filepath.Join(dir, "run"), o, loop.Fresh, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer run.Close()
	run.Hooks.Iteration = func(m *runfiles.Metrics) {
		fmt.Printf("iteration %d: %d episodes, trained: %v\n", m.Iteration, m.Episodes, m.TrainedTokens > 0)
	}
	if err := run.Train(context.Background()); err != nil {
		fmt.Println(err)
	}
	// Output:
	// iteration 1: 4 episodes, trained: true
	// iteration 2: 4 episodes, trained: true
}
