package runfiles

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestReadMetricsTornLastLine: a metrics.jsonl whose last line a kill cut
// short reads back its whole lines; a bad line before the last is named.
func TestReadMetricsTornLastLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), MetricsFile)
	if err := os.WriteFile(path, []byte("{\"iteration\":1}\n{\"iteration\":2}\n{\"itera"), 0o644); err != nil {
		t.Fatal(err)
	}
	ms, err := ReadMetrics(path)
	if err != nil || len(ms) != 2 || ms[1].Iteration != 2 {
		t.Fatalf("got %d metrics, %v; want iterations 1 and 2", len(ms), err)
	}
	if err := os.WriteFile(path, []byte("{\"iteration\":1}\n{\"itera\n{\"iteration\":2}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadMetrics(path); err == nil || !strings.Contains(err.Error(), MetricsFile+":2:") {
		t.Errorf("a bad middle line: got %v, want an error naming line 2", err)
	}
}

func TestLine(t *testing.T) {
	m := Metrics{Iteration: 3, Reward: map[string]float64{"seller": .5, "buyer": .25}, Seconds: map[string]float64{"iteration": 2.04}}
	want := "iteration 3/10: reward buyer 0.250, seller 0.500; kl_ref 0.000, value loss 0.0000, clip 0.00, degenerate 0.00; 2.0s"
	if got := m.Line(10); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	m.Staleness, m.StalenessMax = 0.5, 2
	if got := m.Line(10); !strings.HasSuffix(got, " (staleness 0.50, max 2)") {
		t.Errorf("got %q, want the staleness at the end", got)
	}
}

// TestAll: an overwrite removes every name a run writes, once, and never
// the directory itself.
func TestAll(t *testing.T) {
	all := All()
	for _, want := range []string{ConfigFile, MetricsFile, CheckpointDir, RewardPlot, ClusterStoreDir, TensorBoardDir} {
		if !slices.Contains(all, want) {
			t.Errorf("All lacks %s", want)
		}
	}
	seen := map[string]bool{}
	for _, f := range all {
		if seen[f] || f == "" || f == "." || strings.Contains(f, "/") {
			t.Errorf("All: %q (a duplicate, empty, or not a name in the directory)", f)
		}
		seen[f] = true
	}
}
