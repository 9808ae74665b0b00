package loop

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/runfiles"
)

// TestWriteEnd: a completed run that does not evaluate ends with its
// iterations and the files it wrote, without a comparison.
func TestWriteEnd(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	r, err := Open(dir, fakeOptions(1), Fresh, fakeParts(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := r.WriteEnd(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{"\ndone: 1 iterations in " + dir + "\n", "  metrics      " + filepath.Join(dir, runfiles.MetricsFile) + "\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("got\n%s\nwant %q", got, want)
		}
	}
	if strings.Contains(got, "full report") || strings.Contains(got, "paired") {
		t.Errorf("a run that does not evaluate was compared:\n%s", got)
	}
}
