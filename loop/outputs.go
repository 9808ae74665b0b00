package loop

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/omar-selfplay/omar/arena"
	"github.com/omar-selfplay/omar/runfiles"
)

// WriteEnd writes the end of a completed run for a person: when the run
// evaluates, the held-out comparison of the policy before → after
// (Compare; an interrupt skips it, the run being complete), then the
// iterations done and every file the run wrote (Outputs).
func (r *Run) WriteEnd(ctx context.Context, w io.Writer) error {
	compared := false
	if r.opts.Eval.Every > 0 {
		fmt.Fprintln(w)
		rep, err := r.Compare(ctx, arena.Hooks{})
		if err == nil {
			compared, err = true, rep.Summary(w)
		}
		if err != nil && ctx.Err() == nil {
			return err
		}
	}
	fmt.Fprintf(w, "\ndone: %d iterations in %s\n", r.state.Iteration, r.dir)
	for _, f := range r.Outputs(compared) {
		fmt.Fprintf(w, "  %-12s %s\n", f.What, f.Path)
	}
	return nil
}

// Output is a file or directory a run wrote, with what it is.
type Output struct{ What, Path string }

// Outputs are the files and directories a completed run wrote that exist,
// in the order a person looks for them: metrics, reward plot, adapter,
// model, episodes, checkpoint; the best adapter when the run evaluates;
// TensorBoard's event files when it writes them; and, when compared (its
// Compare ran), the before/after report and its picture.
func (r *Run) Outputs(compared bool) []Output {
	out := []Output{
		{"metrics", r.Path(runfiles.MetricsFile)},
		{"reward plot", r.Path(runfiles.RewardPlot)},
		{"adapter", r.Path(runfiles.AdapterFile)},
		{"model", r.Path(runfiles.ModelFile)},
		{"episodes", r.Path(runfiles.EpisodesFile)},
		{"checkpoint", r.Path(runfiles.CheckpointDir)},
	}
	if r.opts.Eval.Every > 0 {
		out = append(out, Output{"best", r.Path(runfiles.BestDir)})
	}
	if tb := r.opts.Logging.TensorBoard; tb != "" {
		if !filepath.IsAbs(tb) {
			tb = r.Path(tb)
		}
		out = append(out, Output{"tensorboard", tb})
	}
	if compared {
		out = append(out, Output{"full report", filepath.Join(r.Path(runfiles.CompareDir), arena.MarkdownFile)},
			Output{"its picture", filepath.Join(r.Path(runfiles.CompareDir), arena.SVGFile)})
	}
	kept := out[:0]
	for _, f := range out {
		if _, err := os.Stat(f.Path); err == nil {
			kept = append(kept, f)
		}
	}
	return kept
}
