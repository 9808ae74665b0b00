package train

import (
	"math"
	"strings"
	"testing"
)

func TestLRFactor(t *testing.T) {
	sched := func(name string, warmup, total int, min float32) Options {
		return Options{LR: 1e-3, LRSchedule: name, WarmupSteps: warmup, TotalSteps: total, MinLRRatio: min}
	}
	tests := []struct {
		name string
		o    Options
		step int
		want float64
	}{
		{"constant", sched("", 0, 0, 0), 1, 1},
		{"constant late", sched(ScheduleConstant, 0, 0, 0), 1000, 1},
		{"warmup first", sched(ScheduleConstant, 4, 0, 0), 1, 0.25},
		{"warmup last", sched(ScheduleConstant, 4, 0, 0), 4, 1},
		{"warmup then constant", sched(ScheduleConstant, 4, 0, 0), 5, 1},
		{"step 0 counts as 1", sched(ScheduleConstant, 4, 0, 0), 0, 0.25},
		{"cosine warmup", sched(ScheduleCosine, 10, 110, 0.1), 5, 0.5},
		{"cosine start", sched(ScheduleCosine, 10, 110, 0.1), 10, 1},
		{"cosine half", sched(ScheduleCosine, 10, 110, 0.1), 60, 0.55},
		{"cosine quarter", sched(ScheduleCosine, 0, 100, 0), 25, 0.5 * (1 + math.Cos(math.Pi/4))},
		{"cosine end", sched(ScheduleCosine, 10, 110, 0.1), 110, 0.1},
		{"cosine floor", sched(ScheduleCosine, 10, 110, 0.1), 500, 0.1},
		{"linear half", sched(ScheduleLinear, 0, 100, 0.2), 50, 0.6},
		{"linear end", sched(ScheduleLinear, 0, 100, 0.2), 100, 0.2},
		{"linear floor", sched(ScheduleLinear, 0, 100, 0.2), 101, 0.2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.o.validateSchedule(); err != nil {
				t.Fatal(err)
			}
			if got := tt.o.LRFactor(tt.step); math.Abs(got-tt.want) > 1e-6 {
				t.Errorf("LRFactor(%d): got %g, want %g", tt.step, got, tt.want)
			}
			if got, want := tt.o.LearningRate(tt.step), float32(1e-3*tt.want); math.Abs(float64(got-want)) > 1e-9 {
				t.Errorf("LearningRate(%d): got %g, want %g", tt.step, got, want)
			}
		})
	}
}

// FuzzLRFactor: for every valid schedule the factor rises during the
// warm-up, never exceeds 1, never decays below MinLRRatio, and never rises
// after the warm-up.
func FuzzLRFactor(f *testing.F) {
	f.Add("cosine", 10, 100, float32(0.1))
	f.Add("linear", 0, 1, float32(0))
	f.Add("constant", 3, 0, float32(1))
	f.Add("", 0, 0, float32(0.5))
	f.Fuzz(func(t *testing.T, name string, warmup, total int, min float32) {
		o := Options{LR: 1, LRSchedule: name, WarmupSteps: warmup % 1000, TotalSteps: total % 5000, MinLRRatio: min}
		if o.validateSchedule() != nil {
			return
		}
		prev := 0.0
		for n := 1; n <= o.TotalSteps+o.WarmupSteps+3; n++ {
			f := o.LRFactor(n)
			if !(f > 0 && f <= 1) && !(f == 0 && o.decays() && o.MinLRRatio == 0 && n >= o.TotalSteps) {
				t.Fatalf("%+v: LRFactor(%d) = %g outside (0, 1]", o, n, f)
			}
			if n > o.WarmupSteps && o.decays() && f < float64(o.MinLRRatio)-1e-9 {
				t.Fatalf("%+v: LRFactor(%d) = %g below the floor", o, n, f)
			}
			if n <= o.WarmupSteps && f <= prev {
				t.Fatalf("%+v: warm-up LRFactor(%d) = %g not above %g", o, n, f, prev)
			}
			if n > o.WarmupSteps+1 && f > prev+1e-12 {
				t.Fatalf("%+v: LRFactor(%d) = %g rose after the warm-up (from %g)", o, n, f, prev)
			}
			prev = f
		}
	})
}

// TestEntropyCoefAt: the bonus falls linearly to 0 at EntropyDecaySteps and
// stays there; without a decay it is constant.
func TestEntropyCoefAt(t *testing.T) {
	for _, tc := range []struct {
		coef        float32
		decay, step int
		want        float32
	}{
		{0.2, 0, 0, 0.2},
		{0.2, 0, 1000, 0.2},
		{0.2, 40, 0, 0.2},
		{0.2, 40, 10, 0.15},
		{0.2, 40, 40, 0},
		{0.2, 40, 400, 0},
	} {
		o := Options{EntropyCoef: tc.coef, EntropyDecaySteps: tc.decay}
		if got := o.EntropyCoefAt(tc.step); math.Abs(float64(got-tc.want)) > 1e-7 {
			t.Errorf("coef %g decay %d at step %d: got %g, want %g", tc.coef, tc.decay, tc.step, got, tc.want)
		}
	}
	o := Options{}.Defaults()
	o.EntropyDecaySteps = -1
	if err := o.Validate(); err == nil {
		t.Error("entropy decay steps -1: got no error")
	}
	o = Options{}.Defaults()
	o.LogprobsOver = "tokens"
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "logprobs_over") {
		t.Errorf("logprobs_over tokens: got %v, want an error naming the key", err)
	}
}
