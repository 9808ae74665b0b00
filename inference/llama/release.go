package llama

import "strings"

// Release implements inference.Releaser: the slots of keys starting with
// one of prefixes become released (see pickSlot). It only records the
// prefixes; the loop goroutine, which owns the slots, applies them before
// it next admits requests, so a Release that returns before a Generate
// call is in effect for that call's requests. An empty prefix is ignored
// (it would release every key).
func (b *Backend) Release(prefixes ...string) {
	if b.contexts != nil {
		for _, c := range b.contexts {
			c.Release(prefixes...)
		}
		return
	}
	b.releaseMu.Lock()
	defer b.releaseMu.Unlock()
	for _, p := range prefixes {
		if p != "" {
			b.releases = append(b.releases, p)
		}
	}
}

// applyReleases marks the slots of the prefixes given to Release since the
// last call. A slot whose request is still running is marked too: when it
// finishes its tokens are only cache. Called by the loop goroutine.
func (b *Backend) applyReleases() {
	b.releaseMu.Lock()
	ps := b.releases
	b.releases = nil
	b.releaseMu.Unlock()
	if len(ps) == 0 {
		return
	}
	for _, s := range b.slots {
		if s.key == "" || s.released {
			continue
		}
		for _, p := range ps {
			if strings.HasPrefix(s.key, p) {
				s.released = true
				break
			}
		}
	}
}
