package recipes

import (
	"fmt"
	"path/filepath"
	"testing"
)

// TestCascadeSelection replays a cascade's evaluations under each rule:
// which are marked best, and which checkpoint each stage starts from —
// also when the cascade is resumed after any line from which a stage's
// start is known (every line of the earlier stages read back).
func TestCascadeSelection(t *testing.T) {
	evals := []struct {
		stage, it int
		partial   bool
		mean      float64
	}{
		{1, 1, true, 0.30}, {1, 2, false, 0.20}, // stage 1's best is inside it
		{2, 1, true, 0.10}, {2, 2, false, 0.25}, // stage 2 below stage 1's best
		{3, 2, false, 0.05},
	}
	cases := []struct {
		rule   string
		best   []bool
		starts []string // of stages 1..4
	}{
		{SelectEncountered, []bool{true, false, true, true, true},
			[]string{"base", "stage 1, iteration 1", "stage 2", "stage 3"}},
		{SelectGlobalBest, []bool{true, false, false, false, false},
			[]string{"base", "stage 1, iteration 1", "stage 1, iteration 1", "stage 1, iteration 1"}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			var done []CascadeStageResult
			for i, e := range evals {
				r := CascadeStageResult{Stage: e.stage, Iteration: e.it, Partial: e.partial, Mean: e.mean, Selection: c.rule}
				if r.Best = r.Mean > bestMean(done, r.Stage, c.rule); r.Best {
					r.Adapter = fmt.Sprintf("stage-%d/adapter-%d.gguf", e.stage, e.it)
				}
				if r.Best != c.best[i] {
					t.Errorf("evaluation %d (stage %d, mean %.2f): best %v, want %v", i, e.stage, e.mean, r.Best, c.best[i])
				}
				done = append(done, r)
			}
			for k := 1; k <= len(c.starts); k++ {
				earlier := 0 // lines of stages before k
				for _, r := range done {
					if r.Stage < k {
						earlier++
					}
				}
				// Resumed after any line n that holds them.
				for n := earlier; n <= len(done); n++ {
					got := cascadeStart(done[:n], k, c.rule, "c")
					if got.label != c.starts[k-1] {
						t.Errorf("stage %d resumed after %d lines starts from %q, want %q", k, n, got.label, c.starts[k-1])
					}
					if want := k > 1; (got.adapter != "") != want {
						t.Errorf("stage %d: start %+v", k, got)
					}
				}
			}
		})
	}
}

// TestCascadeRuleResumed: a resumed cascade keeps the rule its lines were
// written under; lines from before the rules had names (no selection, no
// adapter) are global_best's, their best stage's adapter.gguf.
func TestCascadeRuleResumed(t *testing.T) {
	old := []CascadeStageResult{{Stage: 1, Mean: 0.3, Best: true}, {Stage: 2, Mean: 0.2}}
	cases := []struct {
		name string
		o    CascadeOptions
		done []CascadeStageResult
		want string
	}{
		{"fresh, default", CascadeOptions{}, nil, SelectEncountered},
		{"fresh, global_best", CascadeOptions{Selection: SelectGlobalBest}, nil, SelectGlobalBest},
		{"old lines", DefaultCascade(), old, SelectGlobalBest},
		{"encountered lines, global_best config", CascadeOptions{Selection: SelectGlobalBest},
			[]CascadeStageResult{{Stage: 1, Best: true, Selection: SelectEncountered}}, SelectEncountered},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := cascadeRule(c.o, c.done); got != c.want {
				t.Errorf("got %s, want %s", got, c.want)
			}
		})
	}
	got := cascadeStart(old, 3, cascadeRule(DefaultCascade(), old), "c")
	if want := filepath.Join("c", "stage-1", "adapter.gguf"); got.adapter != want || got.label != "stage 1" {
		t.Errorf("old lines: stage 3 starts from %+v, want %s", got, want)
	}
}
