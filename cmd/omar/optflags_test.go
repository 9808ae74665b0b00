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
		of := newOptionFlags[loop.Options](fs)
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
