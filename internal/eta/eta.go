// Package eta estimates the time a training run has left from the times
// its phases took: each phase's mean duration so far, the part of the
// current phase not yet spent, the phases left in the iteration, and
// every iteration and held-out evaluation still to come. Until a phase
// has been measured once the estimate is unknown, not zero.
package eta

import "time"

// Phases are a training iteration's phases in the order a run enters them;
// "eval" is the held-out evaluation, counted apart (not every iteration
// has one).
var Phases = []string{"rollout", "score", "update", "swap"}

// Eval is the evaluation's phase name.
const Eval = "eval"

// Estimator accumulates phase times. The zero value is ready; it is not
// safe for concurrent use.
type Estimator struct {
	total map[string]time.Duration
	count map[string]int
	cur   string
	start time.Time
}

// Enter records that the run entered phase at now, ending the phase it
// was in.
func (e *Estimator) Enter(phase string, now time.Time) {
	e.end(now)
	e.cur, e.start = phase, now
}

// Finish ends the current phase at now (an iteration's end).
func (e *Estimator) Finish(now time.Time) {
	e.end(now)
	e.cur = ""
}

func (e *Estimator) end(now time.Time) {
	if e.cur == "" {
		return
	}
	if e.total == nil {
		e.total, e.count = map[string]time.Duration{}, map[string]int{}
	}
	e.total[e.cur] += now.Sub(e.start)
	e.count[e.cur]++
}

// mean is a phase's mean duration and whether it was measured.
func (e *Estimator) mean(phase string) (time.Duration, bool) {
	n := e.count[phase]
	if n == 0 {
		return 0, false
	}
	return e.total[phase] / time.Duration(n), true
}

// Left estimates the time left at now when iterations more iterations
// follow the current one (the current one's remaining phases are counted
// apart) and evals evaluations are still to be played. ok is false until
// every phase that is left has been measured once.
func (e *Estimator) Left(now time.Time, iterations, evals int) (left time.Duration, ok bool) {
	var perIteration time.Duration
	for _, p := range Phases {
		m, ok := e.mean(p)
		if !ok {
			return 0, false
		}
		perIteration += m
	}
	left = time.Duration(iterations) * perIteration
	if evals > 0 {
		m, ok := e.mean(Eval)
		if !ok {
			return 0, false
		}
		left += time.Duration(evals) * m
		if e.cur == Eval { // the evaluation under way is one of them
			left -= min(m, now.Sub(e.start))
		}
	}
	// The current phase's remainder, then the iteration's later phases.
	after := false
	for _, p := range Phases {
		m, _ := e.mean(p)
		switch {
		case p == e.cur:
			left += max(0, m-now.Sub(e.start))
			after = true
		case after:
			left += m
		}
	}
	return left, true
}
