package selfplay

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/seeds"
)

// TestTrajectorySeedJSON: a trajectory's seed is written as a decimal
// string, exact past 2^53 for JavaScript and pandas readers, and a file
// written before, with a number, still reads.
func TestTrajectorySeedJSON(t *testing.T) {
	const big = uint64(1)<<63 + 1
	b, err := json.Marshal(Trajectory{Env: "x_v1", Seed: seeds.JSON(big)})
	if err != nil || !strings.Contains(string(b), `"seed":"9223372036854775809"`) {
		t.Fatalf("%s, %v: want the seed as a string", b, err)
	}
	for _, line := range []string{string(b), strings.Replace(string(b), `"9223372036854775809"`, "9223372036854775809", 1)} {
		ts, err := ReadTrajectories(strings.NewReader(line + "\n"))
		if err != nil || len(ts) != 1 || uint64(ts[0].Seed) != big {
			t.Errorf("%s: read %v, %v", line, ts, err)
		}
	}
}

// TestReadTrajectoriesTorn: a torn last line (a killed writer) is skipped
// and the whole lines before it read; a bad line in the middle is an error
// naming its line.
func TestReadTrajectoriesTorn(t *testing.T) {
	b, err := json.Marshal(Trajectory{Env: "x_v1"})
	if err != nil {
		t.Fatal(err)
	}
	good := string(b) + "\n"
	ts, err := ReadTrajectories(strings.NewReader(good + good + `{"env":"x_v1","tok`))
	if err != nil || len(ts) != 2 {
		t.Errorf("torn last line: %d trajectories, %v; want 2 and no error", len(ts), err)
	}
	_, err = ReadTrajectories(strings.NewReader(good + "{\"env\":\n" + good))
	if err == nil || !strings.Contains(err.Error(), "trajectories:2:") {
		t.Errorf("a bad middle line: %v; want an error naming line 2", err)
	}
}
