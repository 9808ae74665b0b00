package loop

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/omar-selfplay/omar/runfiles"
)

// TestClearRunDir: a directory whose run never finished an iteration (a
// failed start) is reused without --overwrite; one that did is refused.
func TestClearRunDir(t *testing.T) {
	for _, tt := range []struct {
		name    string
		files   map[string]string
		refused bool
	}{
		{"empty", nil, false},
		{"failed start", map[string]string{runfiles.ConfigFile: "x", runfiles.ModelFile: "m", runfiles.CheckpointDir + "/": ""}, false},
		{"empty metrics", map[string]string{runfiles.ConfigFile: "x", runfiles.MetricsFile: ""}, false},
		{"an iteration", map[string]string{runfiles.ConfigFile: "x", runfiles.MetricsFile: "{\"iteration\":1}\n"}, true},
		{"a checkpoint", map[string]string{runfiles.ConfigFile: "x", runfiles.CheckpointDir + "/state.json": "{}"}, true},
		{"other files only", map[string]string{"notes.txt": "mine"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range tt.files {
				p := filepath.Join(dir, name)
				os.MkdirAll(filepath.Dir(p), 0o755)
				if name[len(name)-1] != '/' {
					os.WriteFile(p, []byte(body), 0o644)
				}
			}
			err := clearRunDir(dir, false)
			var prev *PreviousRunError
			if got := errors.As(err, &prev); got != tt.refused {
				t.Fatalf("refused %v (%v), want %v", got, err, tt.refused)
			}
			if tt.refused {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(dir, runfiles.ConfigFile)); err == nil {
				t.Errorf("the failed start's config.yaml is left")
			}
		})
	}
}
