package main

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/loop"
)

// TestSelfplayFlags: omar selfplay's option flags land in the fields they
// name and leave the others at their values; a bad number is an error
// naming its flag.
func TestSelfplayFlags(t *testing.T) {
	parse := func(args ...string) (loop.Options, error) {
		fs := flag.NewFlagSet("selfplay", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		of := newOptionFlags(fs, loop.Options{}.Defaults())
		bindSelfplay(of)
		o := loop.Options{}.Defaults()
		if err := fs.Parse(args); err != nil {
			return o, err
		}
		return o, of.Apply(&o)
	}
	o, err := parse("--eval-temperature", "0", "--lr", "0.002", "--iterations", "7")
	if err != nil {
		t.Fatal(err)
	}
	if o.Eval.Temperature == nil || *o.Eval.Temperature != 0 || o.Train.LR != 0.002 || o.Iterations != 7 {
		t.Errorf("eval temperature %v, lr %v, iterations %d", o.Eval.Temperature, o.Train.LR, o.Iterations)
	}
	if o.Rollout.Temperature != 1 {
		t.Errorf("--eval-temperature changed the rollouts' temperature to %v", o.Rollout.Temperature)
	}
	if o, _ := parse(); o.Eval.Temperature != nil {
		t.Errorf("without the flag the evaluations' temperature is %v, want the rollouts' (nil)", *o.Eval.Temperature)
	}
	if _, err := parse("--eval-temperature", "cold"); err == nil || !strings.Contains(err.Error(), "--eval-temperature") {
		t.Errorf("a bad temperature: %v", err)
	}
	o, _ = parse("--eval-temperature", "-1")
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "eval.temperature") {
		t.Errorf("a negative temperature validates: %v", err)
	}
}

func TestSetYAML(t *testing.T) {
	tests := []struct {
		kv      string
		check   func(o *loop.Options) bool
		wantErr string
	}{
		{"train.lr=1e-4", func(o *loop.Options) bool { return o.Train.LR == float32(1e-4) }, ""},
		{"rollout.env=casino", func(o *loop.Options) bool { return o.Rollout.Env == "casino" }, ""},
		{"rollout.max_legal=-1", func(o *loop.Options) bool { return o.Rollout.MaxLegal == -1 }, ""},
		{"rollout.agents={seat0: scripted}", func(o *loop.Options) bool { return o.Rollout.Agents["seat0"] == "scripted" }, ""},
		{"iterations=7", func(o *loop.Options) bool { return o.Iterations == 7 }, ""},
		{"train.lrr=1", nil, `unknown key "lrr"`},
		{"train.lr=abc", nil, "is not a number"},
		{"nokey", nil, "want KEY=VALUE"},
		{"train..lr=1", nil, "want dotted YAML keys"},
		{"=1", nil, "want KEY=VALUE"},
	}
	for _, tc := range tests {
		t.Run(tc.kv, func(t *testing.T) {
			o := loop.Options{}.Defaults()
			err := setYAML(&o, tc.kv)
			switch {
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("got error %v, want one containing %q", err, tc.wantErr)
			case tc.wantErr == "" && err != nil:
				t.Errorf("got error %v", err)
			case tc.check != nil && !tc.check(&o):
				t.Errorf("the key was not set: %+v", o)
			}
		})
	}
	// Other keys keep their values: a set nests, it does not replace a
	// section.
	o := loop.Options{}.Defaults()
	want := o.Train.Epochs
	if err := setYAML(&o, "train.lr=0.5"); err != nil || o.Train.Epochs != want {
		t.Errorf("train.epochs %d after setting train.lr (err %v), want %d", o.Train.Epochs, err, want)
	}
}
