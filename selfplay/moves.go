package selfplay

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/omar-selfplay/omar/inference"
)

// moves gathers the requests of one episode's simultaneous move (several
// seats asked at once: Werewolf's votes, a sealed-bid auction) and sends
// them to each backend together, in seat order. Sent one by one from the
// seats' goroutines, they would reach a batching backend in whatever order
// the goroutines ran, some in one decode step and some in the next, and
// the sampled tokens would depend on that timing: which sequences share a
// decode changes the logits' last bits (llama.cpp's matrix kernels differ
// with the batch's shape), and now and then that flips a sampled token.
//
// The engine announces every seat of a move before any of them acts
// (engine.Preparer); a request is held until every announced seat has
// either submitted or withdrawn.
type moves struct {
	gen     generator
	episode int

	mu      sync.Mutex
	pending int // seats announced and not yet submitted or withdrawn
	queue   []*asked
}

// asked is one seat's request waiting for its move's other seats.
type asked struct {
	ctx    context.Context
	seat   int
	player *Player
	req    inference.Request
	done   chan result
}

// enter is a seat's entry into Act: the seat is announced unless Prepare
// already did (*prepared), which is then reset for the next move.
func (m *moves) enter(p *Player, prepared *bool) {
	if !*prepared {
		m.announce(p)
	}
	*prepared = false
}

// announce says that a seat of p will submit or withdraw.
func (m *moves) announce(p *Player) {
	m.gen.prepare(p)
	m.mu.Lock()
	m.pending++
	m.mu.Unlock()
}

// withdraw takes back an announcement whose request will not come.
func (m *moves) withdraw(p *Player) {
	m.gen.unprepare(p)
	m.mu.Lock()
	m.pending--
	batch := m.takeLocked()
	m.mu.Unlock()
	m.send(batch)
}

// generate submits an announced seat's request and waits for its response.
func (m *moves) generate(ctx context.Context, seat int, p *Player, req inference.Request) (inference.Response, error) {
	a := &asked{ctx: ctx, seat: seat, player: p, req: req, done: make(chan result, 1)}
	m.mu.Lock()
	m.pending--
	m.queue = append(m.queue, a)
	batch := m.takeLocked()
	m.mu.Unlock()
	m.send(batch)
	select {
	case r := <-a.done:
		return r.resp, r.err
	case <-ctx.Done():
		return inference.Response{}, ctx.Err()
	}
}

// takeLocked returns the move's requests once no announced seat is left.
func (m *moves) takeLocked() []*asked {
	if m.pending > 0 || len(m.queue) == 0 {
		return nil
	}
	batch := m.queue
	m.queue = nil
	return batch
}

// send passes a move's requests on, in seat order: to a backend that takes
// several requests in one submission as one call per backend, else (or
// through the batching aggregator) one call per request.
func (m *moves) send(batch []*asked) {
	slices.SortFunc(batch, func(a, b *asked) int { return cmp.Compare(a.seat, b.seat) })
	for len(batch) > 0 {
		be := batch[0].player.Backend
		var group, rest []*asked
		for _, a := range batch {
			if a.player.Backend == be {
				group = append(group, a)
			} else {
				rest = append(rest, a)
			}
		}
		batch = rest
		if each, ok := be.(inference.EachGenerator); ok && !m.gen.intercepts(group[0].player) {
			go m.sendEach(each, group)
			continue
		}
		for _, a := range group {
			go func() {
				resp, err := m.gen.generate(a.ctx, m.episode, a.player, a.req)
				a.done <- result{resp: resp, err: err}
			}()
		}
	}
}

func (m *moves) sendEach(each inference.EachGenerator, group []*asked) {
	ctxs := make([]context.Context, len(group))
	reqs := make([]inference.Request, len(group))
	for i, a := range group {
		ctxs[i], reqs[i] = a.ctx, a.req
	}
	m.gen.count(1, len(reqs))
	resps, errs := each.GenerateEach(ctxs, reqs)
	for i, a := range group {
		a.done <- result{resp: resps[i], err: errs[i]}
	}
}
