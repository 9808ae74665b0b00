package loop

import (
	"strings"
	"testing"
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
	err = DecodeYAML(strings.NewReader("threads: "+huge+"\n"), &ro)
	if err == nil || len(err.Error()) > 2048 {
		t.Errorf("DecodeYAML: got a %d-byte error, want one of at most 2048 bytes", len(errString(err)))
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
