package loop

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/omar-selfplay/omar/train"
)

// scorer runs the trainer's scoring pass (Evaluate) over each episode's
// sequences while the rollout plays the following episodes: the trainer
// on one core beside the rollout's, instead of after it. Episodes arrive
// in episode order and are scored one at a time, so every sequence is
// scored in the same group whatever the timing: the same numbers run to
// run. The trainer is used by no one else until handOff returns.
type scorer struct {
	tr   Trainer
	ctx  context.Context
	in   chan []train.Sequence
	done chan struct{}
	// handoff asks the scorer to stop after the episode it is scoring;
	// rest are the episodes it left.
	handoff atomic.Bool
	out     []train.Score
	rest    [][]train.Sequence
	busy    time.Duration
	err     error
}

// startScorer starts scoring for up to episodes episodes.
func startScorer(ctx context.Context, tr Trainer, episodes int) *scorer {
	s := &scorer{tr: tr, ctx: ctx, in: make(chan []train.Sequence, episodes), done: make(chan struct{})}
	go s.run()
	return s
}

func (s *scorer) run() {
	defer close(s.done)
	for seqs := range s.in {
		if s.err != nil {
			continue
		}
		if s.handoff.Load() {
			s.rest = append(s.rest, seqs)
			continue
		}
		start := time.Now()
		sc, err := s.tr.Evaluate(s.ctx, seqs)
		s.busy += time.Since(start)
		if err == nil && len(sc) != len(seqs) {
			err = fmt.Errorf("trainer scored %d of %d sequences", len(sc), len(seqs))
		}
		if err != nil {
			s.err = err
			continue
		}
		s.out = append(s.out, sc...)
	}
}

// add queues one episode's sequences; it never blocks (the queue holds
// every episode of the iteration).
func (s *scorer) add(seqs []train.Sequence) {
	if len(seqs) > 0 {
		s.in <- seqs
	}
}

// handOff stops the scorer after the episode it is scoring and returns
// the scores so far and the episodes left (in order), for the caller to
// score with the trainer's full thread count once the rollout is over.
func (s *scorer) handOff() ([]train.Score, [][]train.Sequence, time.Duration, error) {
	s.handoff.Store(true)
	close(s.in)
	<-s.done
	return s.out, s.rest, s.busy, s.err
}
