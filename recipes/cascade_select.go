package recipes

import (
	"cmp"
	"path/filepath"
	"strconv"

	"github.com/omar-selfplay/omar/runfiles"
)

// cascadeRule is the selection rule a cascade continues with: the one its
// evaluations so far were made under (lines without one were written
// under global_best, before the rules had names), else o's.
func cascadeRule(o CascadeOptions, done []CascadeStageResult) string {
	if len(done) > 0 {
		return cmp.Or(done[0].Selection, SelectGlobalBest)
	}
	return cmp.Or(o.Selection, SelectEncountered)
}

// cascadeCheckpoint is what a stage starts from: an adapter file (empty:
// the base model) and how the stage log names it.
type cascadeCheckpoint struct {
	adapter, label string
}

// cascadeStart is the checkpoint stage k (from 1) starts from, by rule,
// given the evaluations done (those of stage k and later are not looked
// at): under encountered the best evaluation of stage k−1, under
// global_best the best of all evaluations of stages 1..k−1 (in both, the
// last line marked best among them). Stage 1 starts from the base model.
func cascadeStart(done []CascadeStageResult, k int, rule, dir string) cascadeCheckpoint {
	for i := len(done) - 1; i >= 0; i-- {
		r := done[i]
		if r.Stage >= k || !r.Best || rule == SelectEncountered && r.Stage != k-1 {
			continue
		}
		adapter := r.Adapter
		if adapter == "" { // a line from before Adapter was recorded
			adapter = filepath.Join(dir, "stage-"+strconv.Itoa(r.Stage), runfiles.AdapterFile)
		}
		return cascadeCheckpoint{adapter: adapter, label: r.checkpointName()}
	}
	return cascadeCheckpoint{label: "base"}
}

// bestMean is the mean an evaluation of stage k (from 1) must beat to be
// the best by rule: the highest of stage k's evaluations (encountered) or
// of all of them (global_best); −1 when there are none.
func bestMean(done []CascadeStageResult, k int, rule string) float64 {
	best := -1.0
	for _, r := range done {
		if rule != SelectEncountered || r.Stage == k {
			best = max(best, r.Mean)
		}
	}
	return best
}

// checkpointName names the adapter r evaluated: "stage 2" (its end) or
// "stage 2, iteration 4" (inside it).
func (r CascadeStageResult) checkpointName() string {
	name := "stage " + strconv.Itoa(r.Stage)
	if r.Partial {
		name += ", iteration " + strconv.Itoa(r.Iteration)
	}
	return name
}
