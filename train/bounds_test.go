package train

import (
	"runtime"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/internal/cpuuse"
)

// TestOptionsBounds: every integer option that feeds a loop count or an
// allocation size is refused above its bound, naming the field, and
// accepted at it.
func TestOptionsBounds(t *testing.T) {
	maxThreads := cpuuse.ThreadsPerCore * runtime.NumCPU()
	tests := []struct {
		name string
		edit func(*Options)
		want string // substring of the error; "" = valid
	}{
		{"threads at the bound", func(o *Options) { o.Threads = maxThreads }, ""},
		{"threads 100000", func(o *Options) { o.Threads = 100000 }, "threads 100000: want 1.."},
		{"threads over the bound", func(o *Options) { o.Threads = maxThreads + 1 }, "threads"},
		{"epochs at the bound", func(o *Options) { o.Epochs = MaxEpochs }, ""},
		{"epochs 1e9", func(o *Options) { o.Epochs = 1e9 }, "epochs 1000000000: want 1..100"},
		{"minibatch", func(o *Options) { o.MiniBatch = MaxMiniBatch + 1 }, "minibatch"},
		{"batch tokens", func(o *Options) { o.BatchTokens = MaxBatchTokens + 1 }, "batch tokens"},
		{"batch tokens at the bound", func(o *Options) { o.BatchTokens = MaxBatchTokens }, ""},
		{"lora rank", func(o *Options) { o.LoRARank = MaxLoRARank + 1 }, "lora rank"},
		{"warmup steps", func(o *Options) { o.WarmupSteps = 1<<31 + 1 }, "warmup steps"},
		{"total steps", func(o *Options) { o.TotalSteps = 1<<31 + 1 }, "total steps"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{}.Defaults()
			tt.edit(&o)
			err := o.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("got %v, want valid", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
