package loop

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

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
	firstValues := func(sc []train.Score) []float32 {
		var v []float32
		for _, s := range sc {
			v = append(v, s.Values[0])
		}
		return v
	}
	t.Run("wait", func(t *testing.T) {
		g := &gatedTrainer{}
		s := startScorer(ctx, g, 3)
		s.add([]train.Sequence{seqOf(1), seqOf(2)})
		s.add(nil) // an episode without policy seats
		s.add([]train.Sequence{seqOf(3)})
		sc, _, err := s.wait()
		if err != nil || !slices.Equal(firstValues(sc), []float32{1, 2, 3}) {
			t.Errorf("scores %v, %v; want 1, 2, 3 in order", firstValues(sc), err)
		}
		if len(g.groups) != 2 || !slices.Equal(g.groups[0], []int32{1, 2}) {
			t.Errorf("groups %v, want one per episode", g.groups)
		}
	})
	t.Run("hand off", func(t *testing.T) {
		g := &gatedTrainer{gate: make(chan struct{}), entered: make(chan struct{}, 3)}
		s := startScorer(ctx, g, 3)
		s.add([]train.Sequence{seqOf(1)})
		s.add([]train.Sequence{seqOf(2)})
		s.add([]train.Sequence{seqOf(3), seqOf(4)})
		<-g.entered           // the first episode is being scored
		s.handoff.Store(true) // as handOff does first
		g.gate <- struct{}{}  // the episode being scored finishes
		sc, rest, _, _ := s.handOff()
		if !slices.Equal(firstValues(sc), []float32{1}) || len(rest) != 2 || rest[1][1].Tokens[0] != 4 {
			t.Errorf("scored %v, left %d episodes; want 1 scored and 2 left in order", firstValues(sc), len(rest))
		}
	})
	t.Run("error", func(t *testing.T) {
		g := &gatedTrainer{fail: true}
		s := startScorer(ctx, g, 2)
		s.add([]train.Sequence{seqOf(1)})
		s.add([]train.Sequence{seqOf(2)})
		if _, _, err := s.wait(); err == nil {
			t.Error("a failing trainer: no error")
		}
		if len(g.groups) != 1 {
			t.Errorf("scored %d groups after the error, want 1", len(g.groups))
		}
	})
}

// wait scores everything queued and returns the scores in the order the
// sequences were added, and the time the scorer spent.
func (s *scorer) wait() ([]train.Score, time.Duration, error) {
	close(s.in)
	<-s.done
	return s.out, s.busy, s.err
}
