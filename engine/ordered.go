package engine

import (
	"context"
	"fmt"
	"sync"
)

// RunOrdered calls play(ctx, i) for every i in [first, first+n), at most
// parallel at a time, and hands the results to yield in index order, one
// call at a time.
//
// A finished play keeps its slot until yield has returned for it, so the
// results waiting for yield plus the plays in flight never exceed
// parallel, however the plays' finishing order and however slow yield is:
// memory stays bounded under any consumer. (Releasing the slot when play
// returns instead lets a slow consumer or one long episode pile up every
// later result.) Since slots free in index order, play i starts only after
// yield has returned for i-parallel.
//
// The first error of play or yield cancels the context passed to the
// plays still running, waits for them and is returned; a cancelled ctx
// returns its error. done is the number of results yield accepted.
func RunOrdered[T any](ctx context.Context, first, n, parallel int, play func(ctx context.Context, i int) (T, error), yield func(T) error) (done int, err error) {
	if n < 0 || parallel < 1 {
		return 0, fmt.Errorf("engine: run ordered: %d items, parallel %d (want n ≥ 0, parallel ≥ 1)", n, parallel)
	}
	if n == 0 {
		return 0, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		once    sync.Once
		failure error
	)
	fail := func(err error) {
		once.Do(func() {
			failure = err
			cancel()
		})
	}
	type result struct {
		v   T
		err error
	}
	slots := min(parallel, n)
	// ring[k%slots] carries the result of item k; it is free again once
	// item k-slots has been yielded, which is also when k may start, so a
	// send never blocks.
	ring := make([]chan result, slots)
	for j := range ring {
		ring[j] = make(chan result, 1)
	}
	free := make(chan struct{}, slots)
	for range slots {
		free <- struct{}{}
	}
	var wg sync.WaitGroup
	// The spawner is itself in wg, so its wg.Go calls never race with
	// wg.Wait.
	wg.Go(func() {
		for k := range n {
			select {
			case <-free:
			case <-ctx.Done():
				return
			}
			wg.Go(func() {
				v, err := play(ctx, first+k)
				if err != nil {
					fail(err)
				}
				ring[k%slots] <- result{v, err}
			})
		}
	})
consume:
	for k := range n {
		var r result
		select {
		case r = <-ring[k%slots]:
		case <-ctx.Done():
			fail(ctx.Err()) // a no-op when a play's failure cancelled it
			break consume
		}
		if r.err != nil {
			break
		}
		if err := yield(r.v); err != nil {
			fail(err)
			break
		}
		done++
		free <- struct{}{}
	}
	cancel()
	wg.Wait()
	return done, failure
}
