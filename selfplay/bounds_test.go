package selfplay

import (
	"strings"
	"testing"
)

// TestOptionsBounds: counts that size goroutines and token buffers are
// refused above their bounds, by name.
func TestOptionsBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"parallel", func(o *Options) { o.Parallel = maxParallel + 1 }, "parallel"},
		{"group size", func(o *Options) { o.GroupSize = maxParallel + 1 }, "group size"},
		{"max tokens", func(o *Options) { o.MaxTokens = 1<<20 + 1 }, "max_tokens"},
		{"context", func(o *Options) { o.Context = 1<<24 + 1 }, "context"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{}.Defaults()
			tc.edit(&o)
			if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error naming %q", err, tc.want)
			}
		})
	}
}
