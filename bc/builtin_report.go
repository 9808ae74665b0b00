package bc

import (
	"crypto/sha256"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/omar-selfplay/omar/chart"
	"github.com/omar-selfplay/omar/model"
	"github.com/omar-selfplay/omar/model/builtin"
)

// WriteSummary writes the loss plot of a built model beside it (OUT with
// the extension .loss.svg) and a summary of the build to w: the corpus,
// the training, and whether out equals the embedded built-in model byte
// for byte (a rebuild with the recipe's defaults should).
func (r *BuildReport) WriteSummary(w io.Writer, out string, steps int) error {
	b, err := os.ReadFile(out)
	if err != nil {
		return err
	}
	sum := fmt.Sprintf("%x", sha256.Sum256(b))
	plot := strings.TrimSuffix(out, filepath.Ext(out)) + ".loss.svg"
	if err := os.WriteFile(plot, chart.Loss("built-in model: training loss", r.Losses), 0o644); err != nil {
		return err
	}
	st := r.Corpus
	fmt.Fprintf(w, "corpus: %d episodes (%d skipped), %d trajectories in %s\n", st.Episodes, st.Skipped, st.Trajectories, r.CorpusTime.Round(1e6))
	if len(st.Tokens) > 0 {
		// How the corpus divides among the games (before their weights,
		// which repeat or thin out an environment's sequences).
		var parts []string
		for _, id := range slices.Sorted(maps.Keys(st.Tokens)) {
			parts = append(parts, fmt.Sprintf("%s %s (%s)", id, model.Count(uint64(st.Tokens[id])), model.Count(uint64(st.TrainedTokens[id]))))
		}
		fmt.Fprintf(w, "corpus tokens (replies): %s\n", strings.Join(parts, ", "))
	}
	var known []float64
	for _, l := range r.Losses {
		if !math.IsNaN(l) {
			known = append(known, l)
		}
	}
	if n := len(known); n > 0 {
		fmt.Fprintf(w, "trained %d parameters for %d steps (%d resumed, %d of the cloning stage reused from the work directory) in %s; loss %.4f → %.4f\n",
			r.Params, steps, r.ResumedSteps, r.ReusedSteps, r.TrainTime.Round(1e6), known[0], known[n-1])
		if missing := len(r.Losses) - n; missing > 0 {
			fmt.Fprintf(w, "the losses of %d steps trained by an older version before a resume were not kept; the plot leaves them out\n", missing)
		}
	}
	for i, d := range r.Dagger {
		pct := func(n int) float64 { return 100 * float64(n) / float64(max(1, d.Turns)) }
		fmt.Fprintf(w, "dagger round %d: %d episodes (%d skipped); the model's reply was the expert's in %d of %d turns (%.1f%%), the same kind of move in %.1f%%; %d sequences\n",
			i+1, d.Episodes, d.Skipped, d.Agreed, d.Turns, pct(d.Agreed), pct(d.SameMove), d.Sequences)
	}
	same := "differs from"
	if sum == builtin.SHA256 {
		same = "equals"
	}
	_, err = fmt.Fprintf(w, "wrote %s (sha256 %s, %s the embedded built-in model) and %s\n", out, sum, same, plot)
	return err
}
