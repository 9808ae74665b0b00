package loop

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/omar-selfplay/omar/train"
)

// scorer runs the trainer's scoring pass (Evaluate) over each episode's
// sequences while the rollout plays the following episodes: the trainer
// on one core beside the rollout's, instead of after it. Episodes are
// scored one at a time in the order they arrive — the order they end in,
// when the runner hands them over as they end — each as one group, so
// every sequence is scored in the same group whatever the timing: the
// same numbers run to run. The trainer is used by no one else until
// handOff returns.
type scorer struct {
	tr   Trainer
	ctx  context.Context
	in   chan scoredEpisode
	done chan struct{}
	// handoff asks the scorer to stop after the episode it is scoring;
	// the episodes it has not scored come back without scores.
	handoff atomic.Bool
	out     []scoredEpisode
	busy    time.Duration
	err     error
}

// scoredEpisode is one episode's sequences and, once scored, their scores.
type scoredEpisode struct {
	index  int
	seqs   []train.Sequence
	scores []train.Score // nil until scored
}

// startScorer starts scoring for up to episodes episodes.
func startScorer(ctx context.Context, tr Trainer, episodes int) *scorer {
	s := &scorer{tr: tr, ctx: ctx, in: make(chan scoredEpisode, episodes), done: make(chan struct{})}
	go s.run()
	return s
}

func (s *scorer) run() {
	defer close(s.done)
	for e := range s.in {
		if s.err != nil || s.handoff.Load() {
			s.out = append(s.out, e)
			continue
		}
		start := time.Now()
		sc, err := s.tr.Evaluate(s.ctx, e.seqs)
		s.busy += time.Since(start)
		if err == nil && len(sc) != len(e.seqs) {
			err = fmt.Errorf("trainer scored %d of %d sequences", len(sc), len(e.seqs))
		}
		if err != nil {
			s.err = err
		} else {
			e.scores = sc
		}
		s.out = append(s.out, e)
	}
}

// add queues the sequences of the episode with the given index; it never
// blocks (the queue holds every episode of the iteration).
func (s *scorer) add(index int, seqs []train.Sequence) {
	if len(seqs) > 0 {
		s.in <- scoredEpisode{index: index, seqs: seqs}
	}
}

// stop ends a scorer whose iteration failed: it stops after the episode
// being scored and leaves the others. A nil scorer does nothing.
func (s *scorer) stop() {
	if s != nil {
		s.handOff()
	}
}

// handOff stops the scorer after the episode it is scoring and returns
// every episode it was given, in episode order, those it did not score
// without scores, for the caller to score with the trainer's full thread
// count once the rollout is over.
func (s *scorer) handOff() ([]scoredEpisode, time.Duration, error) {
	s.handoff.Store(true)
	return s.wait()
}

// wait scores everything queued and returns the episodes in episode
// order, and the time the scorer spent.
func (s *scorer) wait() ([]scoredEpisode, time.Duration, error) {
	close(s.in)
	<-s.done
	slices.SortFunc(s.out, func(a, b scoredEpisode) int { return a.index - b.index })
	return s.out, s.busy, s.err
}
