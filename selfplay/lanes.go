package selfplay

import (
	"context"
	"fmt"
	"sync"

	"github.com/omar-selfplay/omar/inference"
)

// scheduler returns the backend every model player of the runner decodes
// on when it keeps a deterministic schedule (inference.Scheduler) and no
// aggregator sits in front of it; nil otherwise.
func (r *Runner) scheduler() inference.Scheduler {
	if r.opts.BatchWindow > 0 || r.opts.FreeSchedule {
		return nil
	}
	var be inference.Backend
	for _, p := range append([]*Player{r.policy, r.frozen}, r.named()...) {
		if p == nil {
			continue
		}
		if be != nil && p.Backend != be {
			return nil
		}
		be = p.Backend
	}
	s, _ := be.(inference.Scheduler)
	return s
}

// runLanes plays episodes first … first+n−1 on min(Parallel, n) lanes:
// lane k plays episodes first+k, first+k+lanes, … one after another
// through its own session of sched, so which sequences the backend decodes
// together, and so every token and logprob, does not depend on timing.
// Results are handed to yield in episode order by this goroutine; a lane
// never waits for yield (it must not hold its session while blocked on
// anything but the backend), so results that finish early wait in memory.
// finished (when not nil) sees each result on its lane as the episode
// ends. The first error of a play or of yield cancels the rest.
func (r *Runner) runLanes(ctx context.Context, sched inference.Scheduler, first, n int, key string, gen generator, finished func(*EpisodeResult), yield func(*EpisodeResult) error) (done int, err error) {
	if n <= 0 {
		if n < 0 {
			return 0, fmt.Errorf("selfplay: %d episodes", n)
		}
		return 0, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	var (
		mu      sync.Mutex
		failure error // the first play's error
	)
	fail := func(err error) {
		mu.Lock()
		if failure == nil {
			failure = err
		}
		mu.Unlock()
		cancel()
	}
	type played struct {
		res *EpisodeResult
		err error
	}
	out := make([]chan played, n)
	for i := range out {
		out[i] = make(chan played, 1)
	}
	lanes := min(r.opts.Parallel, n)
	// Every session is open before any lane plays: the backend waits for
	// all of them from the start. A single lane plays in the caller's
	// session of sched when it has one (an arena worker's, held across
	// its episodes): a session opened per call would join the schedule at
	// whatever step the call began.
	sessions := make([]inference.Session, lanes)
	own := true
	if outer := inference.SessionOf(ctx); lanes == 1 && outer != nil && outer.Scheduler() == sched {
		sessions[0], own = outer, false
	} else {
		for k := range sessions {
			sessions[k] = sched.Session(k)
		}
	}
	for k := range lanes {
		wg.Go(func() {
			if own {
				defer sessions[k].Close()
			}
			// Every call the lane's episodes make to the backend under
			// this context is the session's: its seats' moves, and a
			// judge scoring an episode on the same backend.
			lctx := inference.WithSession(ctx, sessions[k])
			for i := k; i < n; i += lanes {
				if ctx.Err() != nil {
					return
				}
				res, err := r.play(lctx, first+i, key, gen)
				if err == nil && finished != nil {
					finished(res)
				}
				out[i] <- played{res, err}
				if err != nil {
					fail(err)
					return
				}
			}
		})
	}
	// firstErr is the error to report: the first play's error (the others
	// may only be the cancellation it caused), else err.
	firstErr := func(err error) error {
		mu.Lock()
		defer mu.Unlock()
		if failure != nil {
			return failure
		}
		return err
	}
	for i := range n {
		var p played
		select {
		case p = <-out[i]:
		case <-ctx.Done():
			return done, firstErr(ctx.Err())
		}
		if p.err != nil {
			return done, firstErr(p.err)
		}
		if err := yield(p.res); err != nil {
			return done, err
		}
		done++
	}
	return done, nil
}
