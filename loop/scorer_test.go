package loop

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/omar-selfplay/omar/train"
)

// gatedTrainer scores a sequence as its first token, one Evaluate call at a
// time through gate, and records the groups it was given.
type gatedTrainer struct {
	fakeTrainer
	gate    chan struct{}
	entered chan struct{} // one value as each gated call starts
	mu      sync.Mutex
	groups  [][]int32
	fail    bool
}

func (g *gatedTrainer) Evaluate(ctx context.Context, seqs []train.Sequence) ([]train.Score, error) {
	if g.gate != nil {
		g.entered <- struct{}{}
		<-g.gate
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var firsts []int32
	out := make([]train.Score, len(seqs))
	for i, s := range seqs {
		firsts = append(firsts, s.Tokens[0])
		out[i] = train.Score{Values: []float32{float32(s.Tokens[0])}}
	}
	g.groups = append(g.groups, firsts)
	if g.fail {
		return nil, errors.New("boom")
	}
	return out, nil
}

func seqOf(first int32) train.Sequence { return train.Sequence{Tokens: []int32{first, 1}} }

func TestScorer(t *testing.T) {
	ctx := context.Background()
	firstValues := func(eps []scoredEpisode) (scored, left []int32) {
		for _, e := range eps {
			for j, q := range e.seqs {
				if e.scores == nil {
					left = append(left, q.Tokens[0])
				} else {
					scored = append(scored, int32(e.scores[j].Values[0]))
				}
			}
		}
		return scored, left
	}
	t.Run("episode order", func(t *testing.T) {
		g := &gatedTrainer{}
		s := startScorer(ctx, g, 4)
		// Episodes as they end: 2, then 0, then 3 (no policy seat), then 1.
		s.add(2, []train.Sequence{seqOf(4)})
		s.add(0, []train.Sequence{seqOf(1), seqOf(2)})
		s.add(3, nil)
		s.add(1, []train.Sequence{seqOf(3)})
		eps, _, err := s.wait()
		scored, left := firstValues(eps)
		if err != nil || !slices.Equal(scored, []int32{1, 2, 3, 4}) || len(left) != 0 {
			t.Errorf("scores %v, left %v, %v; want 1, 2, 3, 4 in episode order", scored, left, err)
		}
		// Scored as they came, one group per episode.
		if want := [][]int32{{4}, {1, 2}, {3}}; !slices.EqualFunc(g.groups, want, slices.Equal) {
			t.Errorf("groups %v, want %v", g.groups, want)
		}
	})
	t.Run("hand off", func(t *testing.T) {
		g := &gatedTrainer{gate: make(chan struct{}), entered: make(chan struct{}, 3)}
		s := startScorer(ctx, g, 3)
		s.add(1, []train.Sequence{seqOf(2)})
		s.add(2, []train.Sequence{seqOf(3), seqOf(4)})
		s.add(0, []train.Sequence{seqOf(1)})
		<-g.entered           // the first episode to end is being scored
		s.handoff.Store(true) // as handOff does first
		g.gate <- struct{}{}  // the episode being scored finishes
		eps, _, _ := s.handOff()
		scored, left := firstValues(eps)
		if !slices.Equal(scored, []int32{2}) || !slices.Equal(left, []int32{1, 3, 4}) || eps[0].index != 0 || eps[2].index != 2 {
			t.Errorf("scored %v, left %v; want episode 1 scored and 0 and 2 left, in episode order", scored, left)
		}
	})
	t.Run("error", func(t *testing.T) {
		g := &gatedTrainer{fail: true}
		s := startScorer(ctx, g, 2)
		s.add(0, []train.Sequence{seqOf(1)})
		s.add(1, []train.Sequence{seqOf(2)})
		if _, _, err := s.wait(); err == nil {
			t.Error("a failing trainer: no error")
		}
		if len(g.groups) != 1 {
			t.Errorf("scored %d groups after the error, want 1", len(g.groups))
		}
	})
}
