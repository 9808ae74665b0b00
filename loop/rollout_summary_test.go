package loop

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/omar-selfplay/omar/selfplay"
)

// TestRolloutSummary: the summary gives the throughput, the degenerate
// turns when the guard counted any, and the files written.
func TestRolloutSummary(t *testing.T) {
	r := &RolloutReport{Stats: selfplay.Stats{Episodes: 4, GeneratedTokens: 200, Wall: 2 * time.Second},
		Env: "casino_v1", Trajectories: 8, Occupancy: 3, Degenerate: &GuardCounts{Turns: 10, Flagged: 1}}
	var b strings.Builder
	r.WriteSummary(&b, "out")
	for _, want := range []string{
		"4 episodes of casino_v1, 8 trajectories, 200 generated tokens in 2.0s (100 tok/s, 3.0 sequences per decode step)\n",
		"  degenerate turns 1 of 10 (10.0%)",
		"wrote " + filepath.Join("out", "trajectories.jsonl") + ", " + filepath.Join("out", "episodes.jsonl") + " and " + filepath.Join("out", "stats.json") + "\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("got\n%s\nwant %q", b.String(), want)
		}
	}
}
