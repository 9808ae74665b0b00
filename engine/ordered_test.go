package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// heldCounter tracks how many results exist that yield has not returned
// for yet (in flight or finished), and the most at any time.
type heldCounter struct {
	mu        sync.Mutex
	held, max int
}

func (h *heldCounter) add(d int) {
	h.mu.Lock()
	h.held += d
	h.max = max(h.max, h.held)
	h.mu.Unlock()
}

func TestRunOrdered(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		first, n, parallel   int
		slowYield, slowFirst bool
	}{
		{name: "one at a time", first: 0, n: 20, parallel: 1},
		{name: "parallel", first: 5, n: 50, parallel: 4},
		{name: "more slots than items", first: 0, n: 3, parallel: 8},
		{name: "slow yield", first: 0, n: 40, parallel: 3, slowYield: true},
		// The first item finishes last: every later one waits for it
		// holding its slot, so nothing beyond parallel piles up.
		{name: "slow head", first: 0, n: 30, parallel: 4, slowFirst: true},
		{name: "none", first: 0, n: 0, parallel: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h heldCounter
			rng := rand.New(rand.NewPCG(uint64(tc.n), 1))
			delays := make([]time.Duration, tc.n)
			for k := range delays {
				delays[k] = time.Duration(rng.IntN(300)) * time.Microsecond
			}
			if tc.slowFirst && tc.n > 0 {
				delays[0] = 20 * time.Millisecond
			}
			var got []int
			done, err := RunOrdered(context.Background(), tc.first, tc.n, tc.parallel,
				func(ctx context.Context, i int) (int, error) {
					h.add(1)
					time.Sleep(delays[i-tc.first])
					return i, nil
				},
				func(i int) error {
					if tc.slowYield {
						time.Sleep(time.Millisecond)
					}
					got = append(got, i)
					h.add(-1)
					return nil
				})
			if err != nil {
				t.Fatal(err)
			}
			want := make([]int, tc.n)
			for k := range want {
				want[k] = tc.first + k
			}
			if !slices.Equal(got, want) {
				t.Errorf("yielded %v, want %v", got, want)
			}
			if done != tc.n {
				t.Errorf("done = %d, want %d", done, tc.n)
			}
			if h.max > tc.parallel {
				t.Errorf("at most %d results held at once, want ≤ parallel %d", h.max, tc.parallel)
			}
		})
	}
}

func TestRunOrderedErrors(t *testing.T) {
	boom := errors.New("boom")
	t.Run("play error cancels the others", func(t *testing.T) {
		var cancelled atomic.Int64
		done, err := RunOrdered(context.Background(), 0, 100, 4,
			func(ctx context.Context, i int) (int, error) {
				if i == 6 {
					return 0, boom
				}
				if i == 5 {
					// Runs until cancelled: only the failure can end it.
					<-ctx.Done()
					cancelled.Add(1)
					return 0, ctx.Err()
				}
				return i, nil
			},
			func(int) error { return nil })
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v, want %v", err, boom)
		}
		// Item 5 never finishes, so only items 0..4 can have been
		// yielded (the failure may cancel before all of them were).
		if done < 2 || done > 5 {
			t.Errorf("done = %d, want 2..5 (item 6 starts once item 2 was yielded)", done)
		}
		if cancelled.Load() == 0 {
			t.Error("the play in flight did not see its context cancelled")
		}
	})
	t.Run("yield error", func(t *testing.T) {
		var started atomic.Int64
		done, err := RunOrdered(context.Background(), 0, 100, 2,
			func(ctx context.Context, i int) (int, error) { started.Add(1); return i, nil },
			func(i int) error {
				if i == 3 {
					return boom
				}
				return nil
			})
		if !errors.Is(err, boom) || done != 3 {
			t.Fatalf("done, err = %d, %v, want 3, %v", done, err, boom)
		}
		// Item k starts only after k-2 was yielded: 0..3 yielded or
		// refused, so at most 0..5 ever started.
		if s := started.Load(); s > 6 {
			t.Errorf("%d plays started, want ≤ 6", s)
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done, err := RunOrdered(ctx, 0, 1000, 3,
			func(ctx context.Context, i int) (int, error) {
				if i == 10 {
					cancel()
				}
				select {
				case <-ctx.Done():
					return 0, ctx.Err()
				case <-time.After(100 * time.Microsecond):
					return i, nil
				}
			},
			func(int) error { return nil })
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if done > 10 {
			t.Errorf("done = %d, want ≤ 10", done)
		}
	})
	t.Run("bad arguments", func(t *testing.T) {
		for _, a := range [][2]int{{-1, 1}, {3, 0}} {
			if _, err := RunOrdered(context.Background(), 0, a[0], a[1],
				func(context.Context, int) (int, error) { return 0, nil }, func(int) error { return nil }); err == nil {
				t.Errorf("n=%d parallel=%d: no error", a[0], a[1])
			}
		}
	})
}
