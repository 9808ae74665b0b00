package loop

import (
	"time"

	"github.com/omar-selfplay/omar/internal/eta"
)

// TimeLeft estimates the time a run has left from its phases' times
// (internal/eta), counting the held-out evaluations still to play, which
// a prediction from the iteration count alone would not. Feed it from
// the run's hooks: Enter as each phase starts, Finish at each iteration's
// end. It is not safe for concurrent use.
type TimeLeft struct {
	run *Run
	est eta.Estimator
}

// TimeLeft returns an estimator of r's time left, with nothing measured.
func (r *Run) TimeLeft() *TimeLeft { return &TimeLeft{run: r} }

// Enter records that the run entered phase now.
func (t *TimeLeft) Enter(phase string) { t.est.Enter(phase, time.Now()) }

// Finish records that the current iteration ended now.
func (t *TimeLeft) Finish() { t.est.Finish(time.Now()) }

// Label is the time left during iteration it (after it, when done) for a
// person: "eta 12m3s", or "eta measuring" until every phase left has been
// timed once.
func (t *TimeLeft) Label(it int, done bool) string {
	iters, evals := t.run.opts.Iterations-it, t.run.EvalsAfter(it-1)
	if done {
		evals = t.run.EvalsAfter(it)
	} else {
		iters-- // the current one's remaining phases are counted apart
	}
	d, ok := t.est.Left(time.Now(), max(0, iters), evals)
	if !ok {
		return "eta measuring"
	}
	return "eta " + d.Round(time.Second).String()
}
