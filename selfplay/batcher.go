package selfplay

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/omar-selfplay/omar/inference"
)

// batcher collects the requests of concurrent seats into one Generate
// call. It calls the backend as soon as every episode in flight has a
// request outstanding (nothing else can arrive), or when the oldest queued
// request has waited the window. Calls run concurrently with the
// collection of the next batch, so a batching backend sees a steady stream.
type batcher struct {
	backend inference.Backend
	window  time.Duration
	running *atomic.Int64 // episodes in flight
	stats   *stats

	mu    sync.Mutex
	queue []*queued
	// outstanding counts, per episode, its requests queued or inside a
	// Generate call; waiting is the number of episodes with any.
	outstanding map[int]int
	waiting     int
	// preparing counts seats that entered Act and are rendering their
	// prompt: the siblings of a simultaneous move are on their way.
	preparing int
	timer     *time.Timer
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

type queued struct {
	episode int
	req     inference.Request
	done    chan result
}

type result struct {
	resp inference.Response
	err  error
}

func newBatcher(b inference.Backend, window time.Duration, running *atomic.Int64, st *stats) *batcher {
	ctx, cancel := context.WithCancel(context.Background())
	return &batcher{backend: b, window: window, running: running, stats: st, ctx: ctx, cancel: cancel, outstanding: map[int]int{}}
}

// prepare announces a request that is being rendered; generate or
// unprepare must follow.
func (b *batcher) prepare() {
	b.mu.Lock()
	b.preparing++
	b.mu.Unlock()
}

// unprepare withdraws an announced request that will not come.
func (b *batcher) unprepare() {
	b.mu.Lock()
	b.preparing--
	b.maybeFlushLocked()
	b.mu.Unlock()
}

// generate queues req of an episode (announced by prepare) and waits for
// its response.
func (b *batcher) generate(ctx context.Context, episode int, req inference.Request) (inference.Response, error) {
	q := &queued{episode: episode, req: req, done: make(chan result, 1)}
	b.mu.Lock()
	b.preparing--
	b.queue = append(b.queue, q)
	if b.outstanding[episode] == 0 {
		b.waiting++
	}
	b.outstanding[episode]++
	if len(b.queue) == 1 {
		b.timer = time.AfterFunc(b.window, b.flushTimer)
	}
	b.maybeFlushLocked()
	b.mu.Unlock()
	select {
	case r := <-q.done:
		return r.resp, r.err
	case <-ctx.Done():
		return inference.Response{}, ctx.Err()
	}
}

// poke re-checks the flush condition after an episode ended.
func (b *batcher) poke() {
	b.mu.Lock()
	b.maybeFlushLocked()
	b.mu.Unlock()
}

func (b *batcher) flushTimer() {
	b.mu.Lock()
	b.flushLocked()
	b.mu.Unlock()
}

// maybeFlushLocked flushes when every episode in flight waits on the
// backend and no seat is still rendering its prompt.
func (b *batcher) maybeFlushLocked() {
	if len(b.queue) > 0 && b.preparing == 0 && int64(b.waiting) >= b.running.Load() {
		// A short grace lets the siblings of a simultaneous move whose
		// goroutines have not entered Act yet join the batch.
		if b.timer != nil {
			b.timer.Stop()
		}
		b.timer = time.AfterFunc(min(b.window, grace), b.flushTimer)
	}
}

// grace is how long a complete batch waits for late siblings.
const grace = 200 * time.Microsecond

func (b *batcher) flushLocked() {
	if len(b.queue) == 0 {
		return
	}
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	batch := b.queue
	b.queue = nil
	b.stats.calls.Add(1)
	b.stats.requests.Add(int64(len(batch)))
	b.wg.Go(func() {
		reqs := make([]inference.Request, len(batch))
		for i, q := range batch {
			reqs[i] = q.req
		}
		resps, err := b.backend.Generate(b.ctx, reqs)
		if err == nil && len(resps) != len(reqs) {
			err = fmt.Errorf("selfplay: backend returned %d responses for %d requests", len(resps), len(reqs))
		}
		b.mu.Lock()
		for _, q := range batch {
			b.outstanding[q.episode]--
			if b.outstanding[q.episode] == 0 {
				delete(b.outstanding, q.episode)
				b.waiting--
			}
		}
		b.mu.Unlock()
		for i, q := range batch {
			if err != nil {
				q.done <- result{err: err}
			} else {
				q.done <- result{resp: resps[i]}
			}
		}
	})
}

// close cancels calls still running and waits for them.
func (b *batcher) close() {
	b.cancel()
	b.wg.Wait()
}
