package loop

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/omar-selfplay/omar/internal/tensorboard/tbtest"
	"github.com/omar-selfplay/omar/runfiles"
)

// TestTensorBoardEqualsMetrics: a run with logging.tensorboard writes one
// event per iteration whose scalars, read back by a reader written from
// the format's definitions, are every number of that iteration's
// metrics.jsonl line.
func TestTensorBoardEqualsMetrics(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	o := fakeOptions(3)
	o.Logging.TensorBoard = runfiles.TensorBoardDir
	r, err := Open(dir, o, Fresh, fakeParts(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// The run's end lists what it wrote: the event files too, no best
	// adapter (it does not evaluate) and no comparison (none ran).
	var listed []string
	for _, f := range r.Outputs(false) {
		listed = append(listed, f.What)
		if f.What == "tensorboard" && f.Path != filepath.Join(dir, runfiles.TensorBoardDir) {
			t.Errorf("tensorboard listed at %s", f.Path)
		}
	}
	if !slices.Contains(listed, "metrics") || !slices.Contains(listed, "tensorboard") || slices.Contains(listed, "best") || slices.Contains(listed, "full report") {
		t.Errorf("the run's outputs are %v", listed)
	}
	files, _ := filepath.Glob(filepath.Join(dir, runfiles.TensorBoardDir, "events.out.tfevents.*"))
	if len(files) != 1 {
		t.Fatalf("event files: %v, want one", files)
	}
	evs, err := tbtest.ReadEvents(files[0])
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, runfiles.MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []map[string]any
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, line)
	}
	if len(evs) != 1+len(lines) || len(lines) != 3 {
		t.Fatalf("%d events for %d metrics lines, want a header and one per line", len(evs), len(lines))
	}
	for i, line := range lines {
		ev := evs[i+1]
		if want := int64(line["iteration"].(float64)); ev.Step != want {
			t.Errorf("event %d: step %d, want %d", i+1, ev.Step, want)
		}
		want := TensorBoardScalars(line)
		for _, must := range []string{"critic/rewards/mean", "actor/pg_loss", "actor/entropy", "actor/grad_norm", "timing_s/update"} {
			if _, ok := want[must]; !ok {
				t.Errorf("iteration %d: no %s among %d scalars", i+1, must, len(want))
			}
		}
		if len(ev.Values) != len(want) {
			t.Errorf("iteration %d: %d scalars in the event file, %d numbers in metrics.jsonl", i+1, len(ev.Values), len(want))
		}
		for tag, v := range want {
			got, ok := ev.Values[tag]
			if !ok || got != float32(v) && !(math.IsNaN(v) && math.IsNaN(float64(got))) {
				t.Errorf("iteration %d %s: got %v (present %v), want %v", i+1, tag, got, ok, float32(v))
			}
		}
	}
}
