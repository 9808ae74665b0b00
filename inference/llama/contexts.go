package llama

import (
	"context"
	"errors"
	"hash/fnv"
	"sync"

	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/llamacpp"
)

// A Backend with Options.Contexts > 1 is a router over that many llama
// contexts on one loaded model, each a Backend of its own with its decode
// loop and its share of the slots. The model's weights are shared; each
// context has its own KV cache. Every call is decoded by one context:
// a session's by the context the session was opened on (order mod
// Contexts), anything else by its request key's hash, so a key's cached
// prefix is always in the context that decodes its next request. Adapter
// swaps, named adapters and releases go to every context.

// newContexts makes o.Contexts contexts on m and the Backend that routes
// to them; it owns m.
func newContexts(o Options, m *llamacpp.Model) (*Backend, error) {
	each := o.perContext()
	b := &Backend{opts: o, model: m, ownsModel: true, vocab: m.Vocab(), quit: make(chan struct{}), done: make(chan struct{})}
	close(b.done) // no loop of its own
	var first *Backend
	for range o.contexts() {
		c, err := newContext(each, m, false, first)
		if err != nil {
			for _, c := range b.contexts {
				c.Close()
			}
			m.Close()
			return nil, err
		}
		b.contexts = append(b.contexts, c)
		first = b.contexts[0]
	}
	b.nCtx, b.tmpl, b.pieces, b.eog, b.specials = first.nCtx, first.tmpl, first.pieces, first.eog, first.specials
	return b, nil
}

// dispatch hands jobs to the decode loop: to b's own as the jobs of
// session sess (nil: the session of b that sctx carries, if any), or, on
// a Backend over several contexts, to the contexts route picks. It fails
// only when the backend is closed or cctx ends first.
func (b *Backend) dispatch(sctx, cctx context.Context, sess *session, jobs []*job) error {
	if b.contexts == nil {
		if sess == nil {
			sess = b.sessionOf(sctx)
		}
		for _, j := range jobs {
			j.sess = sess
		}
		select {
		case b.submit <- jobs:
			return nil
		case <-b.quit:
			return ErrClosed
		case <-cctx.Done():
			return cctx.Err()
		}
	}
	if c := b.sessionContext(sctx); c != nil {
		return c.dispatch(sctx, cctx, nil, jobs)
	}
	groups := make([][]*job, len(b.contexts))
	for _, j := range jobs {
		k := keyContext(j.req.Key, len(b.contexts))
		groups[k] = append(groups[k], j)
	}
	for k, g := range groups {
		if len(g) == 0 {
			continue
		}
		if err := b.contexts[k].dispatch(sctx, cctx, nil, g); err != nil {
			return err
		}
	}
	return nil
}

// sessionContext is the context of b whose session ctx carries, or nil.
func (b *Backend) sessionContext(ctx context.Context) *Backend {
	s, ok := inference.SessionOf(ctx).(*Session)
	if !ok || s.sched != b {
		return nil
	}
	return s.b
}

// keyContext is the context (of n) that decodes the requests with key
// outside any session.
func keyContext(key string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// eachContext runs f on every context at once and joins the errors.
func (b *Backend) eachContext(f func(c *Backend) error) error {
	errs := make([]error, len(b.contexts))
	var wg sync.WaitGroup
	for i, c := range b.contexts {
		wg.Go(func() { errs[i] = f(c) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// sumStats adds up the contexts' counters.
func (b *Backend) sumStats() Stats {
	var t Stats
	for _, c := range b.contexts {
		s := c.Stats()
		t.Steps += s.Steps
		t.DecodedTokens += s.DecodedTokens
		t.GeneratedTokens += s.GeneratedTokens
		t.ReusedTokens += s.ReusedTokens
		t.SharedTokens += s.SharedTokens
		t.Copies += s.Copies
		t.EvictedLive += s.EvictedLive
		t.EvictedReleased += s.EvictedReleased
		t.DecodeTime += s.DecodeTime
		t.StepTime += s.StepTime
		t.SessionWait += s.SessionWait
		t.ScheduleBypasses += s.ScheduleBypasses
	}
	return t
}
