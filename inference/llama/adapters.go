package llama

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/llamacpp"
)

// A llama context applies one set of LoRA adapters to a whole decode, so
// sequences decoded with different adapters cannot share a llama_decode.
// The loop groups the running sequences by adapter and decodes one group
// per step, a few steps in a row (adapterSlice) before it switches the
// context to the next group: the first decode after a switch costs about
// two plain ones. A sequence's cached keys and values are only reused
// under the adapter they were computed with (slot.adapter). With one
// adapter nothing switches and a step decodes every sequence, as before.

// Adapter keys of a job and a slot: "" is the backend's current adapter
// (New's Options.Adapter or the last SetAdapter, possibly none),
// inference.AdapterBase the base weights, any other key a registered name.

// namedAdapter is an adapter registered with LoadAdapter.
type namedAdapter struct {
	adapter *llamacpp.Adapter
	path    string
	scale   float32
}

// adapterSet is the loop goroutine's adapter state. The loop reads named
// without locking (it is the only writer); writes and reads from other
// goroutines hold mu.
type adapterSet struct {
	mu    sync.Mutex
	named map[string]*namedAdapter
	// active is the key of the adapters the context holds now.
	active string
	// scale is the current adapter's scale once a swap set it (before,
	// Options.AdapterScale).
	scale    float32
	scaleSet bool
	// slice counts the steps decoded with the active adapter while
	// sequences of other adapters waited.
	slice int
	// switches counts the context's adapter changes.
	switches atomic.Int64
}

// LoadAdapter registers the LoRA adapter at path under name, with scale, so
// that requests with Adapter: name decode with it while requests without a
// name keep the backend's current adapter. Registering a name again
// replaces its adapter; path "" removes the name. Like SetAdapter it waits
// for the running sequences to finish, so no reply mixes two adapters; the
// cached prefixes of the name's sequences are dropped, those of other
// adapters are kept. The policy version does not change.
func (b *Backend) LoadAdapter(ctx context.Context, name, path string, scale float32) error {
	switch {
	case name == "" || name == inference.AdapterBase:
		return fmt.Errorf("llama: adapter name %q is reserved", name)
	case path != "" && scale == 0:
		return fmt.Errorf("llama: adapter %q: scale 0", name)
	}
	if b.contexts != nil {
		return b.eachContext(func(c *Backend) error { return c.LoadAdapter(ctx, name, path, scale) })
	}
	s := &swap{name: name, path: path, scale: scale, reply: make(chan swapResult, 1)}
	select {
	case b.swaps <- s:
	case <-b.quit:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case r := <-s.reply:
		return r.err
	case <-b.quit:
		return ErrClosed
	}
}

// Adapters lists the registered adapter names, sorted.
func (b *Backend) Adapters() []string {
	if b.contexts != nil {
		return b.contexts[0].Adapters()
	}
	b.adapters.mu.Lock()
	defer b.adapters.mu.Unlock()
	names := make([]string, 0, len(b.adapters.named))
	for n := range b.adapters.named {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// applyNamed registers, replaces or removes a named adapter (loop
// goroutine, no sequence running).
func (b *Backend) applyNamed(s *swap) error {
	var next *llamacpp.Adapter
	if s.path != "" {
		a, err := llamacpp.LoadAdapter(b.model, s.path)
		if err != nil {
			return err
		}
		next = a
	}
	as := &b.adapters
	old := as.named[s.name]
	if old == nil && next == nil {
		return fmt.Errorf("llama: no adapter named %q", s.name)
	}
	if as.active == s.name {
		// Never leave the context pointing at an adapter about to be
		// freed: fall back to the current adapter.
		if err := b.useAdapter(""); err != nil {
			next.Close()
			return err
		}
	}
	b.dropSlots(s.name)
	as.mu.Lock()
	if as.named == nil {
		as.named = map[string]*namedAdapter{}
	}
	if next == nil {
		delete(as.named, s.name)
	} else {
		as.named[s.name] = &namedAdapter{adapter: next, path: s.path, scale: s.scale}
	}
	as.mu.Unlock()
	if old != nil {
		old.adapter.Close()
	}
	return nil
}

// dropSlots forgets the cache of every idle slot computed under key.
func (b *Backend) dropSlots(key string) {
	mem := b.lctx.Memory()
	for _, sl := range b.slots {
		if sl.adapter == key && len(sl.tokens) > 0 {
			_ = mem.SeqRm(sl.seq, -1, -1)
			sl.tokens = sl.tokens[:0]
			sl.key = ""
		}
	}
}

// resolveAdapter maps a request's Adapter to the key its sequence decodes
// under. The base weights are the current adapter when there is none, so
// base requests then batch with unnamed ones.
func (b *Backend) resolveAdapter(name string) (string, error) {
	switch {
	case name == "":
		return "", nil
	case name == inference.AdapterBase:
		if b.adapter == nil {
			return "", nil
		}
		return inference.AdapterBase, nil
	case b.adapters.named[name] != nil:
		return name, nil
	}
	return "", fmt.Errorf("no adapter named %q (register it with LoadAdapter)", name)
}

// useAdapter makes the context decode with the adapters of key.
func (b *Backend) useAdapter(key string) error {
	as := &b.adapters
	if as.active == key {
		return nil
	}
	var err error
	switch key {
	case "":
		if b.adapter == nil {
			err = b.lctx.SetAdapters(nil, nil)
		} else {
			err = b.lctx.SetAdapters([]*llamacpp.Adapter{b.adapter}, []float32{b.currentScale()})
		}
	case inference.AdapterBase:
		err = b.lctx.SetAdapters(nil, nil)
	default:
		na := as.named[key]
		if na == nil {
			return fmt.Errorf("no adapter named %q", key)
		}
		err = b.lctx.SetAdapters([]*llamacpp.Adapter{na.adapter}, []float32{na.scale})
	}
	if err != nil {
		return err
	}
	as.active = key
	as.switches.Add(1)
	return nil
}

// AdapterSwitches counts how often the decode loop changed the context's
// adapters between the groups of a step (a cost of mixing adapters in one
// backend; 0 while every sequence uses one adapter).
func (b *Backend) AdapterSwitches() int64 {
	n := b.adapters.switches.Load()
	for _, c := range b.contexts {
		n += c.AdapterSwitches()
	}
	return n
}

func (b *Backend) currentScale() float32 {
	if b.adapters.scaleSet {
		return b.adapters.scale
	}
	return b.opts.AdapterScale
}

// closeAdapters frees the named adapters; the context must no longer use
// them.
func (b *Backend) closeAdapters() {
	b.adapters.mu.Lock()
	defer b.adapters.mu.Unlock()
	for n, na := range b.adapters.named {
		na.adapter.Close()
		delete(b.adapters.named, n)
	}
}
