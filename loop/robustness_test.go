package loop

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/internal/strictyaml"
)

// TestConfigErrorsBounded: a 5 MB config value is refused without being
// echoed whole — by Validate and by the YAML decoder.
func TestConfigErrorsBounded(t *testing.T) {
	huge := strings.Repeat("x", 5<<20)
	o := Options{}.Defaults()
	o.ModelPreset = huge
	err := o.Validate()
	if err == nil || !strings.Contains(err.Error(), "model_preset") || len(err.Error()) > 2048 {
		t.Errorf("Validate: got a %d-byte error, want one naming model_preset in at most 2048 bytes", len(errString(err)))
	}
	var ro RolloutOptions
	err = strictyaml.Decode(strings.NewReader("threads: "+huge+"\n"), &ro)
	if err == nil || len(err.Error()) > 2048 {
		t.Errorf("strictyaml.Decode: got a %d-byte error, want one of at most 2048 bytes", len(errString(err)))
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestResumeWithoutCheckpoint: a run that stopped before its first
// checkpoint (a full disk, an interrupt) says how to go on when resumed.
func TestResumeWithoutCheckpoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if _, err := Open(dir, fakeOptions(2), Fresh, fakeParts(t)); err != nil {
		t.Fatal(err)
	}
	o, err := ReadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir, o, Resume, fakeParts(t))
	if err == nil || !strings.Contains(err.Error(), "no checkpoint") || !strings.Contains(err.Error(), "--overwrite") {
		t.Errorf("got %v, want an error saying there is no checkpoint and naming --overwrite", err)
	}
}
