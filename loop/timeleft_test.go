package loop

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/internal/eta"
)

// TestTimeLeft: the estimate is "measuring" until an iteration's phases
// have been timed, then a duration.
func TestTimeLeft(t *testing.T) {
	r, err := Open(filepath.Join(t.TempDir(), "run"), fakeOptions(3), Fresh, fakeParts(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	tl := r.TimeLeft()
	if got := tl.Label(1, false); got != "eta measuring" {
		t.Errorf("before any phase: %q", got)
	}
	for _, p := range eta.Phases {
		tl.Enter(p)
	}
	tl.Finish()
	if got := tl.Label(1, true); !strings.HasPrefix(got, "eta ") || got == "eta measuring" {
		t.Errorf("after an iteration: %q, want a duration", got)
	}
}
