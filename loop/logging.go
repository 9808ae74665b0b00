package loop

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"

	"github.com/omar-selfplay/omar/internal/tensorboard"
)

// LoggingOptions are a run's logs beside metrics.jsonl.
type LoggingOptions struct {
	// TensorBoard is a directory for TensorBoard event files (relative
	// paths are inside the run directory); "" writes none. Each iteration
	// writes the scalars of its metrics.jsonl line under the names verl's
	// and TRL's users know (TensorBoardScalars, docs/training.md).
	TensorBoard string `yaml:"tensorboard"`
}

// tensorBoardNames maps metrics.jsonl's scalar keys to the names a
// TensorBoard run of verl uses where verl logs the same quantity, else
// to omar/<key>. Map-valued metrics get their key appended
// (reward.buyer → env/reward/buyer).
var tensorBoardNames = map[string]string{
	"reward_mean":      "critic/rewards/mean",
	"reward":           "env/reward",
	"eval_mean":        "val/reward/mean",
	"eval":             "val/reward",
	"policy_loss":      "actor/pg_loss",
	"value_loss":       "critic/vf_loss",
	"kl":               "actor/ppo_kl",
	"kl_ref":           "actor/kl_loss",
	"entropy":          "actor/entropy",
	"clip_frac":        "actor/pg_clipfrac",
	"grad_norm":        "actor/grad_norm",
	"advantage_mean":   "critic/advantages/mean",
	"advantage_std":    "critic/advantages/std",
	"value_mean":       "critic/values/mean",
	"logprob_gap":      "training/rollout_probs_diff_mean",
	"seconds":          "timing_s",
	"tokens_per_s":     "perf/throughput",
	"generated_tokens": "response_length/sum",
	"invalid_rate":     "env/invalid_rate",
	"default_rate":     "env/default_rate",
	"degenerate_rate":  "env/degenerate_rate",
}

// TensorBoardScalars returns every number of an iteration's metrics.jsonl
// line under its TensorBoard name: the line's own keys, renamed
// (tensorBoardNames), map values under name/key. Counts and nested
// structures (the league's table, the guard's reasons) are left out
// unless they are plain numbers.
func TensorBoardScalars(line map[string]any) map[string]float64 {
	out := map[string]float64{}
	for k, v := range line {
		name, ok := tensorBoardNames[k]
		if !ok {
			name = "omar/" + k
		}
		switch v := v.(type) {
		case float64:
			out[name] = v
		case map[string]any:
			keys := make([]string, 0, len(v))
			for sub := range v {
				keys = append(keys, sub)
			}
			sort.Strings(keys)
			for _, sub := range keys {
				if f, ok := v[sub].(float64); ok {
					out[name+"/"+sub] = f
				}
			}
		}
	}
	delete(out, "omar/iteration") // the step
	return out
}

// logScalars writes an iteration's metrics.jsonl line to the TensorBoard
// event file, opening it on first use. It decodes the line as written, so
// the scalars are exactly the file's numbers.
func (r *Run) logScalars(it int, metricsLine []byte) error {
	dir := r.opts.Logging.TensorBoard
	if dir == "" {
		return nil
	}
	var line map[string]any
	if err := json.Unmarshal(metricsLine, &line); err != nil {
		return err
	}
	if r.tb == nil {
		if !filepath.IsAbs(dir) {
			dir = r.Path(dir)
		}
		w, err := tensorboard.Create(dir)
		if err != nil {
			return fmt.Errorf("logging.tensorboard: %w", err)
		}
		r.tb = w
		r.closers = append(r.closers, w)
	}
	return r.tb.Scalars(int64(it), TensorBoardScalars(line))
}
