package train

import (
	"fmt"
	"math"
)

// Learning-rate schedules (Options.LRSchedule).
const (
	ScheduleConstant = "constant"
	ScheduleCosine   = "cosine"
	ScheduleLinear   = "linear"
)

// validateSchedule checks the schedule fields.
func (o Options) validateSchedule() error {
	switch o.LRSchedule {
	case "", ScheduleConstant, ScheduleCosine, ScheduleLinear:
	default:
		return fmt.Errorf("train: lr schedule %q (want constant, cosine or linear)", o.LRSchedule)
	}
	switch {
	case o.WarmupSteps < 0 || o.WarmupSteps > 1<<31:
		return fmt.Errorf("train: warmup steps %d: want 0..%d", o.WarmupSteps, 1<<31)
	case o.TotalSteps < 0 || o.TotalSteps > 1<<31:
		return fmt.Errorf("train: total steps %d: want 0..%d", o.TotalSteps, 1<<31)
	case !(o.MinLRRatio >= 0 && o.MinLRRatio <= 1): // also NaN
		return fmt.Errorf("train: min lr ratio %g outside [0, 1]", o.MinLRRatio)
	case o.decays() && o.TotalSteps <= o.WarmupSteps:
		return fmt.Errorf("train: lr schedule %s needs total steps (%d) > warmup steps (%d)", o.LRSchedule, o.TotalSteps, o.WarmupSteps)
	}
	return nil
}

func (o Options) decays() bool {
	return o.LRSchedule == ScheduleCosine || o.LRSchedule == ScheduleLinear
}

// LRFactor is the multiplier of LR and ValueLR for optimizer step n
// (1 = the first step): n/WarmupSteps during the warm-up (the first step
// already moves, the WarmupSteps-th reaches the full rate), then 1
// (constant) or a cosine or linear decay that reaches MinLRRatio at
// TotalSteps and stays there. It depends on the step alone, so a resumed
// run continues the schedule where the checkpoint left it.
func (o Options) LRFactor(n int) float64 {
	if n < 1 {
		n = 1
	}
	if n <= o.WarmupSteps {
		return float64(n) / float64(o.WarmupSteps)
	}
	if !o.decays() {
		return 1
	}
	p := math.Min(float64(n-o.WarmupSteps)/float64(o.TotalSteps-o.WarmupSteps), 1)
	lo := float64(o.MinLRRatio)
	if o.LRSchedule == ScheduleLinear {
		return lo + (1-lo)*(1-p)
	}
	return lo + (1-lo)*0.5*(1+math.Cos(math.Pi*p))
}

// LearningRate is the learning rate of optimizer step n under the schedule:
// LR·LRFactor(n).
func (o Options) LearningRate(n int) float32 {
	return float32(float64(o.LR) * o.LRFactor(n))
}
