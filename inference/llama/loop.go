package llama

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/llamacpp"
)

// slot is one sequence of the llama context.
type slot struct {
	seq      int32
	key      string
	tokens   []int32 // tokens whose KV entries the sequence holds, positions 0..len-1
	adapter  string  // the adapter key tokens were decoded under (adapters.go)
	lastUsed uint64
	job      *job // running request, nil when idle
	// released: the key's sequence is finished (Backend.Release); its
	// tokens stay only until a slot is needed for another key.
	released bool
}

// job is one request inside the loop.
type job struct {
	req inference.Request
	// ctx is the caller's: the request carries it into the loop goroutine
	// (as net/http.Request does) so a cancelled caller's sequence is dropped
	// between steps.
	ctx  context.Context
	done chan struct{}
	// sess is the deterministic-schedule session the job came from (nil:
	// none); arrived the loop's clock when it was queued.
	sess    *session
	arrived uint64
	resp    inference.Response
	err     error

	slot     *slot
	adapter  string  // the adapter key the sequence decodes under
	pending  []int32 // tokens still to decode (prompt suffix, then the last sampled token)
	chain    *llamacpp.Sampler
	grammar  *grammarState // the grammar sampler when masks come by state (grammar.go); else it is in chain
	rng      *rand.Rand    // the seeded draw; nil: greedy (temperature 0)
	invTemp  float64
	text     []byte
	logitIdx int // batch index of this step's logits, -1 when none
	sent     int // tokens of pending put in this step's batch
	next     [1]int32
	logits   []float32 // this step's logits (a view into the context)
	drawn    drawn
}

// drawn is the outcome of one draw.
type drawn struct {
	token               int32
	logprob, rawLogprob float32
	none                bool                     // no candidate had any probability
	err                 error                    // the draw failed: the request ends with it
	top                 []inference.TokenLogprob // Request.TopLogprobs (toplogprobs.go)
	allowed             inference.AllowedTokens  // the grammar's set when small (Response.Allowed)
}

func (j *job) finish(err error) {
	j.err = err
	if j.sess != nil {
		j.sess.outstanding--
	}
	j.chain.Close()
	j.chain = nil
	if j.grammar != nil {
		j.grammar.sampler.Close()
		j.grammar = nil
	}
	if j.slot != nil {
		j.slot.job = nil
		j.slot = nil
	}
	close(j.done)
}

// loop owns the llama context: it admits requests into free slots, runs
// one decode per step over all running sequences, samples, and retires
// finished requests.
func (b *Backend) loop() {
	defer close(b.done)
	var swaps []*swap // waiting for the running sequences to finish, in order
	for {
		// Block only when there is nothing to do, then take whatever else
		// arrived without waiting.
		if b.running() == 0 && len(b.queue) == 0 && len(swaps) == 0 {
			if _, alive := b.receive(&swaps, true, nil); !alive {
				return
			}
		}
		for {
			took, alive := b.receive(&swaps, false, nil)
			if !alive {
				return
			}
			if !took {
				break
			}
		}
		// The deterministic schedule: nothing is decoded while a session's
		// caller prepares its next submission (schedule.go).
		if b.owing() && !b.outsiderRunning() {
			t := time.Now()
			var valve <-chan time.Time
			for b.owing() {
				if queued, _ := b.outsiders(); valve == nil && queued {
					valve = time.After(outsiderWait)
				}
				took, alive := b.receive(&swaps, true, valve)
				if !alive {
					return
				}
				if !took {
					b.stats.bypasses.Add(1)
					break
				}
			}
			if b.running() > 0 {
				b.stats.sessionWaitNS.Add(int64(time.Since(t)))
			}
		}
		b.applyReleases()
		b.dropCancelled()
		if b.waitsForSession() {
			continue // a cancelled request left its session waiting
		}
		b.swapsWaiting.Store(int32(len(swaps)))
		if len(swaps) > 0 {
			// No admissions until the running sequences are done, so every
			// response comes from one policy.
			if b.running() > 0 {
				b.step()
				continue
			}
			for _, s := range swaps {
				b.applySwap(s)
			}
			swaps = swaps[:0]
			b.swapsWaiting.Store(0)
		}
		b.admit()
		if b.waitsForSession() {
			continue // a request failed at admission
		}
		if b.running() > 0 {
			b.step()
		}
	}
}

// receive takes one message into the loop's state: a submission, a
// session opening or closing, or a swap (appended to swaps). With wait it
// waits for one or for timeout (a nil timeout never fires); without, it
// returns at once when none is there. took reports whether one was taken;
// alive is false when the backend was closed (the loop has shut down).
func (b *Backend) receive(swaps *[]*swap, wait bool, timeout <-chan time.Time) (took, alive bool) {
	var (
		js []*job
		m  *sessionMsg
		sw *swap
	)
	if wait {
		select {
		case js = <-b.submit:
		case msg := <-b.sessionCh:
			m = &msg
		case sw = <-b.swaps:
		case <-b.quit:
			b.shutdown()
			return false, false
		case <-timeout:
			return false, true
		}
	} else {
		select {
		case js = <-b.submit:
		case msg := <-b.sessionCh:
			m = &msg
		case sw = <-b.swaps:
		case <-b.quit:
			b.shutdown()
			return false, false
		default:
			return false, true
		}
	}
	switch {
	case m != nil:
		b.handleSession(*m)
	case sw != nil:
		*swaps = append(*swaps, sw)
	default:
		b.enqueue(js)
	}
	return true, true
}

func (b *Backend) running() int {
	n := 0
	for _, s := range b.slots {
		if s.job != nil {
			n++
		}
	}
	return n
}

func (b *Backend) shutdown() {
	for _, j := range b.queue {
		j.finish(ErrClosed)
	}
	b.queue = nil
	for _, s := range b.slots {
		if s.job != nil {
			s.job.finish(ErrClosed)
		}
	}
}

// dropCancelled retires requests whose caller has gone. Their slots keep
// exactly the tokens already decoded, so the cache stays consistent.
func (b *Backend) dropCancelled() {
	q := b.queue[:0]
	for _, j := range b.queue {
		if err := j.ctx.Err(); err != nil {
			j.finish(err)
			continue
		}
		q = append(q, j)
	}
	b.queue = q
	for _, s := range b.slots {
		if s.job != nil {
			if err := s.job.ctx.Err(); err != nil {
				s.job.finish(err)
			}
		}
	}
}

func (b *Backend) applySwap(s *swap) {
	if s.name != "" {
		s.reply <- swapResult{version: b.PolicyVersion(), err: b.applyNamed(s)}
		return
	}
	var next *llamacpp.Adapter
	if s.path != "" {
		a, err := llamacpp.LoadAdapter(b.model, s.path)
		if err != nil {
			s.reply <- swapResult{version: b.PolicyVersion(), err: err}
			return
		}
		next = a
	}
	var err error
	if next != nil {
		err = b.lctx.SetAdapters([]*llamacpp.Adapter{next}, []float32{s.scale})
	} else {
		err = b.lctx.SetAdapters(nil, nil)
	}
	if err != nil {
		next.Close()
		// The context may hold anything now: the next group sets it.
		b.adapters.active = "\x00unknown"
		s.reply <- swapResult{version: b.PolicyVersion(), err: err}
		return
	}
	if b.adapter != nil {
		b.adapter.Close()
	}
	b.adapter = next
	b.adapters.active, b.adapters.scale, b.adapters.scaleSet = "", s.scale, true
	// Cached keys and values were computed with the old weights (those of
	// named adapters are dropped too: a swap is rare, and the base
	// weights' key may have been folded into the current adapter's).
	b.lctx.Memory().Clear(false)
	for _, sl := range b.slots {
		sl.tokens = sl.tokens[:0]
		sl.key, sl.adapter, sl.released = "", "", false
	}
	v := b.version.Add(1)
	s.reply <- swapResult{version: int(v)}
}

// order is the job's session order; -1 without a session.
func (j *job) order() int {
	if j.sess == nil {
		return -1
	}
	return j.sess.order
}

// admit moves queued requests into slots, in arrival order. A request waits
// while its key's slot is busy (one sequence per key) or no slot is free.
func (b *Backend) admit() {
	if len(b.sessions) > 0 {
		// Sessions' submissions of one wait go in session order.
		slices.SortStableFunc(b.queue, func(x, y *job) int {
			if c := cmp.Compare(x.arrived, y.arrived); c != 0 {
				return c
			}
			return cmp.Compare(x.order(), y.order())
		})
	}
	q := b.queue[:0]
	for _, j := range b.queue {
		if err := b.prepare(j); err != nil {
			j.finish(err)
			continue
		}
		if b.awaitPrefix(j) {
			q = append(q, j)
			continue
		}
		s := b.pickSlot(j)
		if s == nil {
			q = append(q, j)
			continue
		}
		if err := b.start(j, s); err != nil {
			j.finish(err)
		}
	}
	b.queue = q
}

// prepare validates a request before it takes a slot.
func (b *Backend) prepare(j *job) error {
	r := &j.req
	if len(r.Prompt) == 0 && len(r.Messages) > 0 {
		// Message-level callers (judges, data generation) get the model's
		// chat template; trainable callers send their own token streams.
		text, err := b.applyTemplate(r.Messages, true)
		if err != nil {
			return err
		}
		if r.Prompt, err = b.vocab.Tokenize(text, false, true); err != nil {
			return err
		}
	}
	switch {
	case len(r.Prompt) == 0:
		return errors.New("empty prompt")
	case len(r.Prompt) > b.nCtx:
		return fmt.Errorf("%w: prompt of %d tokens, a sequence holds %d", inference.ErrContextFull, len(r.Prompt), b.nCtx)
	case r.MaxTokens < 0:
		return fmt.Errorf("max tokens %d < 0", r.MaxTokens)
	}
	n := int32(b.vocab.NTokens())
	for i, t := range r.Prompt {
		if t < 0 || t >= n {
			return fmt.Errorf("prompt token %d at %d outside the vocabulary of %d", t, i, n)
		}
	}
	var err error
	j.adapter, err = b.resolveAdapter(r.Adapter)
	return err
}

// pickSlot returns the idle slot of j's key, else (for a keyed request) the
// idle slot of a released sequence whose cached tokens share the longest
// prefix with j's prompt under j's adapter, else an empty idle slot, else
// the least recently used idle slot of a released key, else the least
// recently used idle slot; nil when the key's slot is busy or every slot
// is. Released slots go before live ones: with many episodes in flight,
// plain LRU evicted live seats waiting for their turn (older than the last
// turn of an episode just finished), and they then decoded their whole
// conversation again. A finished seat's slot goes first to a new seat
// whose prompt starts as its did — the same game and role's briefing —
// which then decodes only where the two differ (start).
func (b *Backend) pickSlot(j *job) *slot {
	key := j.req.Key
	var empty, lru, lruReleased, shared *slot
	best := 0
	for _, s := range b.slots {
		if key != "" && s.key == key {
			if s.job != nil {
				return nil
			}
			return s
		}
		if s.job != nil {
			continue
		}
		if len(s.tokens) == 0 && empty == nil {
			empty = s
		}
		if key != "" && s.released && s.adapter == j.adapter {
			if n := commonPrefix(s.tokens, j.req.Prompt); n > best || n == best && n > 0 && s.lastUsed < shared.lastUsed {
				shared, best = s, n
			}
		}
		if s.released && (lruReleased == nil || s.lastUsed < lruReleased.lastUsed) {
			lruReleased = s
		}
		if lru == nil || s.lastUsed < lru.lastUsed {
			lru = s
		}
	}
	switch {
	case shared != nil:
		return shared
	case empty != nil:
		return empty
	case lruReleased != nil:
		return lruReleased
	}
	return lru
}

// start binds j to s: it keeps the longest prefix of s's cached tokens
// that j's prompt shares, when they were decoded under j's adapter —
// keys and values depend only on the tokens, their positions and the
// weights, whichever sequence they were decoded for — (at least one prompt
// token is decoded, for the logits), drops the rest, and builds the
// sampler chain.
func (b *Backend) start(j *job, s *slot) error {
	if err := b.samplers(j); err != nil {
		return err
	}
	keep := 0
	// A keyless request (a judge's, a one-off generation) decodes its
	// whole prompt, as it always has: the same call gives the same
	// logprobs to the bit (decoding a prompt's tail behind a cached
	// prefix rounds differently).
	if j.req.Key != "" && s.adapter == j.adapter {
		keep = commonPrefix(s.tokens, j.req.Prompt)
		if keep == len(j.req.Prompt) {
			keep--
		}
	}
	other := s.key != j.req.Key || j.req.Key == ""
	if other && len(s.tokens) > 0 && s.key != "" {
		if s.released {
			b.stats.evictedReleased.Add(1)
		} else {
			b.stats.evictedLive.Add(1)
		}
	}
	mem := b.lctx.Memory()
	if o, n := b.copySource(j, s, keep); o != nil {
		// Another sequence holds a longer prefix of the prompt: copy its
		// cache into s (llama.cpp copies at the next decode, before it
		// runs; without a unified cache the whole stream).
		if err := mem.SeqRm(s.seq, -1, -1); err != nil {
			return err
		}
		s.tokens, keep = s.tokens[:0], 0
		if err := mem.SeqCp(o.seq, s.seq, -1, -1); err == nil {
			s.tokens = append(s.tokens, o.tokens...)
			keep, other = n, true
			b.stats.copies.Add(1)
		}
	}
	if keep < len(s.tokens) {
		if err := mem.SeqRm(s.seq, int32(keep), -1); err != nil {
			// A cache that cannot drop a tail drops the whole sequence.
			if err := mem.SeqRm(s.seq, -1, -1); err != nil {
				return err
			}
			keep = 0
		}
		s.tokens = s.tokens[:keep]
	}
	b.clock++
	s.key, s.adapter, s.lastUsed, s.job, s.released = j.req.Key, j.adapter, b.clock, j, false
	j.slot = s
	j.pending = j.req.Prompt[keep:]
	j.resp = inference.Response{ReusedTokens: keep, PolicyVersion: b.PolicyVersion()}
	b.stats.reused.Add(int64(keep))
	if other {
		b.stats.shared.Add(int64(keep))
	}
	return nil
}

// minCopyTokens is the least number of prompt tokens worth a copy of
// another sequence's cache, or a wait for one: without a unified cache
// llama.cpp copies a whole stream (every cell of the sequence's context),
// a few times cheaper than decoding this many tokens of the built-in
// model.
const minCopyTokens = 32

// copySource returns the slot of another key (idle, or running with the
// prefix already decoded) whose cached tokens share with j's prompt at
// least minCopyTokens more than the have tokens s keeps, with the prefix
// to keep after copying it; nil when there is none or j is keyless.
func (b *Backend) copySource(j *job, s *slot, have int) (*slot, int) {
	if j.req.Key == "" {
		return nil, 0
	}
	var best *slot
	n := have
	for _, o := range b.slots {
		if o == s || o.key == "" || o.adapter != j.adapter {
			continue
		}
		if c := min(commonPrefix(o.tokens, j.req.Prompt), len(j.req.Prompt)-1); c > n {
			best, n = o, c
		}
	}
	if best == nil || n < have+minCopyTokens {
		return nil, 0
	}
	return best, n
}

// awaitPrefix reports whether keyed j, which has no slot of its own,
// should wait for a running sequence still decoding a prompt that shares
// at least minCopyTokens more with j's than any cached tokens do: the
// seats of episodes started together read the same briefing, and all but
// the first then copy it (start) instead of decoding it side by side.
func (b *Backend) awaitPrefix(j *job) bool {
	key := j.req.Key
	if key == "" {
		return false
	}
	have, soon := 0, 0
	for _, s := range b.slots {
		if s.key == key {
			return false
		}
		if s.key == "" || s.adapter != j.adapter {
			continue
		}
		have = max(have, commonPrefix(s.tokens, j.req.Prompt))
		if s.job != nil && len(s.tokens) < len(s.job.req.Prompt) {
			soon = max(soon, commonPrefix(s.job.req.Prompt, j.req.Prompt))
		}
	}
	return min(soon, len(j.req.Prompt)-1) >= have+minCopyTokens
}

func commonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// samplers builds j's filter chain in llama.cpp (grammar, top-k, top-p,
// min-p); temperature and the seeded draw happen in Go over what the chain
// leaves, so the log-probability reported is exactly that of the
// distribution drawn from, and the common unfiltered case never copies the
// logits.
func (b *Backend) samplers(j *job) error {
	sp := j.req.Sampling
	chain, err := llamacpp.NewSamplerChain()
	if err != nil {
		return err
	}
	if j.req.Grammar != "" {
		g, err := llamacpp.NewGrammarSampler(b.vocab, j.req.Grammar, "root")
		if err != nil {
			chain.Close()
			return err
		}
		if j.grammar = b.newGrammarState(g, j.req.Grammar); j.grammar == nil {
			chain.Add(g)
		}
	}
	if sp.Temperature > 0 {
		if sp.TopK > 0 {
			chain.Add(llamacpp.NewTopKSampler(sp.TopK))
		}
		if sp.TopP > 0 && sp.TopP < 1 {
			chain.Add(llamacpp.NewTopPSampler(sp.TopP, 1))
		}
		if sp.MinP > 0 {
			chain.Add(llamacpp.NewMinPSampler(sp.MinP, 1))
		}
	}
	if chain.Len() == 0 {
		chain.Close()
		chain = nil
	}
	j.chain = chain
	if sp.Temperature > 0 {
		j.rng = rand.New(rand.NewPCG(sp.Seed, 0x6f6d61722d6c6c61)) // "omar-lla"
		j.invTemp = 1 / float64(sp.Temperature)
	}
	return nil
}

// step runs one decode over the running sequences and samples: all of
// them when they share an adapter (the common case), else those of one
// adapter, in slices of adapterSlice steps per adapter.
func (b *Backend) step() {
	t0 := time.Now()
	defer func() { b.stats.stepNS.Add(int64(time.Since(t0))) }()
	var first *job
	mixed := false
	for _, s := range b.slots {
		if j := s.job; j != nil {
			if first == nil {
				first = j
			} else if j.adapter != first.adapter {
				mixed = true
				break
			}
		}
	}
	if first == nil {
		return
	}
	as := &b.adapters
	if !mixed {
		as.slice = 0
		b.stepAdapter(first.adapter)
		return
	}
	keys := b.groups[:0]
	for _, s := range b.slots {
		if j := s.job; j != nil && !slices.Contains(keys, j.adapter) {
			keys = append(keys, j.adapter)
		}
	}
	slices.Sort(keys)
	b.groups = keys
	k := as.active
	if as.slice >= adapterSlice || !slices.Contains(keys, k) {
		// The next adapter after the active one, in name order.
		i, found := slices.BinarySearch(keys, as.active)
		if found {
			i++
		}
		k, as.slice = keys[i%len(keys)], 0
	}
	as.slice++
	b.stepAdapter(k)
}

// adapterSlice is how many steps in a row the loop decodes the sequences
// of one adapter while those of others wait. The first decode after the
// context's adapters change costs about two plain decodes of the tiny
// model (llama.cpp plans the graph again), so alternating every step made
// a mixed batch 3× slower than one adapter; in slices of 4 the switches
// cost a quarter of that, and no sequence waits more than (adapters − 1)
// × 4 steps.
const adapterSlice = 4

// stepAdapter runs one decode over the running sequences of one adapter key
// and samples.
func (b *Backend) stepAdapter(key string) {
	if err := b.useAdapter(key); err != nil {
		// Nothing was decoded: the slots' caches are as they were.
		for _, s := range b.slots {
			if j := s.job; j != nil && j.adapter == key {
				j.finish(fmt.Errorf("set adapter: %w", err))
			}
		}
		return
	}
	b.batch.Clear()
	budget := b.batch.Cap()
	inBatch := b.inBatch[:0]
	add := func(j *job, n int) {
		s := j.slot
		pos := len(s.tokens)
		for i := range n {
			last := i == n-1 && n == len(j.pending)
			idx, err := b.batch.Add(j.pending[i], int32(pos+i), s.seq, last)
			if err != nil {
				panic("llama: batch overflow: " + err.Error()) // budget accounting is wrong
			}
			if last {
				j.logitIdx = idx
			}
		}
		j.sent = n
		budget -= n
		inBatch = append(inBatch, j)
	}
	// Generating sequences first (one token each), then prompt chunks in
	// slot order with what is left of the batch.
	for _, s := range b.slots {
		if j := s.job; j != nil && j.adapter == key {
			j.logitIdx, j.sent = -1, 0
			if len(j.pending) == 1 && budget > 0 {
				add(j, 1)
			}
		}
	}
	for _, s := range b.slots {
		if j := s.job; j != nil && j.adapter == key && j.sent == 0 && len(j.pending) > 1 && budget > 0 {
			add(j, min(budget, len(j.pending)))
		}
	}
	b.inBatch = inBatch
	if len(inBatch) == 0 {
		return
	}
	td := time.Now()
	err := b.lctx.Decode(b.batch)
	b.stats.decodeNS.Add(int64(time.Since(td)))
	if err != nil {
		if errors.Is(err, llamacpp.ErrNoKVSlot) {
			err = fmt.Errorf("%w: %w", inference.ErrContextFull, err)
		}
		mem := b.lctx.Memory()
		for _, j := range inBatch {
			s := j.slot
			_ = mem.SeqRm(s.seq, -1, -1)
			s.tokens = s.tokens[:0]
			s.key = ""
			j.finish(err)
		}
		return
	}
	b.stats.steps.Add(1)
	b.stats.decoded.Add(int64(b.batch.Len()))
	sampling := b.sampling[:0]
	for _, j := range inBatch {
		s := j.slot
		s.tokens = append(s.tokens, j.pending[:j.sent]...)
		j.pending = j.pending[j.sent:]
		if j.logitIdx >= 0 {
			// Fetched here, in order: llama_get_logits_ith synchronises the
			// context and is not safe to call from several threads.
			var err error
			if j.logits, err = b.lctx.Logits(j.logitIdx); err != nil {
				j.finish(err)
				continue
			}
			sampling = append(sampling, j)
		}
	}
	b.sampling = sampling
	b.drawAll(sampling)
	for _, j := range sampling {
		b.record(j)
	}
}

// drawAll draws the next token of every sampling job. Each job touches only
// its own samplers and a scratch buffer, so with enough work the jobs are
// split over goroutines: with a large vocabulary the per-token passes over
// the logits cost as much as a decode step.
func (b *Backend) drawAll(js []*job) {
	work := minSampleWork
	if b.opts.sampleWork > 0 {
		work = b.opts.sampleWork
	}
	workers := min(len(b.scratch), len(js), len(js)*len(b.pieces)/work)
	if workers <= 1 {
		for _, j := range js {
			b.draw(j, b.scratch[0])
		}
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(js); i += workers {
				b.draw(js[i], b.scratch[w])
			}
		})
	}
	wg.Wait()
}

// minSampleWork is the number of logits per goroutine below which
// splitting the draws costs more than it saves.
const minSampleWork = 65536

// scratch is one sampling goroutine's buffers.
type scratch struct {
	cand       *llamacpp.Candidates
	candLogits []float32
	masked     []float32 // the logits under a grammar's mask
	key        []byte    // a grammar state's cache key
	exps       []float64
}

// draw samples j's next token from j.logits into j.drawn.
func (b *Backend) draw(j *job, sc *scratch) {
	logits := j.logits
	d := &j.drawn
	*d = drawn{}
	rawMax, rawSum := maxSumExp(logits, 1, sc.exps)
	rawLSE := rawMax + math.Log(rawSum)
	var tok int32
	var lp float64
	if j.chain == nil && j.grammar == nil {
		// Every token is a candidate: work on the logits in place.
		if j.rng == nil {
			tok, lp = int32(argmax(logits)), 0
		} else {
			m, s := rawMax, rawSum
			if j.invTemp != 1 {
				m, s = maxSumExp(logits, j.invTemp, sc.exps)
			}
			i := draw(sc.exps[:len(logits)], s, j.rng.Float64())
			tok, lp = int32(i), float64(logits[i])*j.invTemp-m-math.Log(s)
		}
	} else {
		// The candidates the grammar leaves (by its cached mask, or by
		// the grammar sampler at the head of the chain), then what the
		// filters keep.
		var mask []uint64
		in := logits
		if j.grammar != nil {
			var err error
			if mask, err = b.grammarMask(j, sc, len(logits)); err != nil {
				d.err = err
				return
			}
			sc.masked = maskLogits(sc.masked, logits, mask)
			in = sc.masked
		}
		var cd []llamacpp.TokenData
		ls := in
		if j.chain != nil {
			c := sc.cand
			c.Fill(in)
			c.Apply(j.chain)
			cd = c.Data()
			ls = sc.candLogits[:0]
			for _, t := range cd {
				ls = append(ls, t.Logit)
			}
			sc.candLogits = ls
		}
		id := func(i int) int32 {
			if cd == nil {
				return int32(i)
			}
			return cd[i].ID
		}
		if j.rng == nil {
			i := argmax(ls)
			if len(ls) == 0 || math.IsInf(float64(ls[i]), -1) {
				d.none = true // the grammar allows no token at all
				return
			}
			tok, lp = id(i), 0
		} else {
			m, s := maxSumExp(ls, j.invTemp, sc.exps)
			if math.IsInf(m, -1) || s == 0 {
				d.none = true
				return
			}
			i := draw(sc.exps[:len(ls)], s, j.rng.Float64())
			tok, lp = id(i), float64(ls[i])*j.invTemp-m-math.Log(s)
		}
		if mask != nil {
			if !allowed(mask, tok) {
				// Only non-finite logits get here; accepting the token
				// would abort inside llama.cpp.
				d.err = fmt.Errorf("llama: drew token %d, which the grammar forbids (are the logits finite?)", tok)
				return
			}
			j.grammar.sampler.Accept(tok)
			d.allowed = allowedSet(mask, logits, rawLSE)
		}
		if j.chain != nil {
			j.chain.Accept(tok)
		}
	}
	d.token, d.logprob, d.rawLogprob = tok, float32(lp), float32(float64(logits[tok])-rawLSE)
	if n := j.req.TopLogprobs; n > 0 {
		d.top = topLogprobs(logits, n, rawLSE)
	}
}

// record appends j's drawn token to its response and decides whether j is
// finished.
func (b *Backend) record(j *job) {
	j.logits = nil
	d := j.drawn
	if d.err != nil {
		j.finish(d.err)
		return
	}
	if d.none {
		// No token is allowed: the reply ends here.
		b.retire(j, inference.StopEOG)
		return
	}
	tok := d.token
	r := &j.resp
	r.Tokens = append(r.Tokens, tok)
	r.Logprobs = append(r.Logprobs, d.logprob)
	r.RawLogprobs = append(r.RawLogprobs, d.rawLogprob)
	if d.top != nil {
		r.TopLogprobs = append(r.TopLogprobs, d.top)
	}
	if d.allowed.IDs != nil && r.Allowed == nil {
		r.Allowed = make([]inference.AllowedTokens, len(r.Tokens)-1, cap(r.Tokens))
	}
	if r.Allowed != nil {
		r.Allowed = append(r.Allowed, d.allowed)
	}
	b.stats.generated.Add(1)

	prev := len(j.text)
	j.text = append(j.text, b.pieces[tok]...)
	switch {
	case b.eog[tok] && !b.opts.ignoreEOG:
		b.retire(j, inference.StopEOG)
	case slices.Contains(j.req.StopTokens, tok):
		b.retire(j, inference.StopString)
	case hasStop(j.text, prev, j.req.Stop):
		b.retire(j, inference.StopString)
	case j.req.MaxTokens > 0 && len(r.Tokens) >= j.req.MaxTokens:
		b.retire(j, inference.StopLength)
	case len(j.slot.tokens) >= b.nCtx:
		// The sampled token has no cell left to be decoded into.
		b.retire(j, inference.StopFull)
	default:
		// Not appended to pending: that may share the caller's Prompt array.
		j.next[0] = tok
		j.pending = j.next[:]
	}
}

// hasStop reports whether a stop string ends inside the bytes added since
// prev (earlier text was already checked).
func hasStop(text []byte, prev int, stops []string) bool {
	for _, s := range stops {
		if s == "" {
			continue
		}
		from := max(0, prev-len(s)+1)
		if bytes.Contains(text[from:], []byte(s)) {
			return true
		}
	}
	return false
}

// retire completes j; its slot keeps the decoded tokens for prefix reuse.
func (b *Backend) retire(j *job, stop inference.StopReason) {
	j.resp.Stop = stop
	j.resp.Text = string(j.text)
	b.clock++
	j.slot.lastUsed = b.clock
	j.finish(nil)
}

// draw picks index i with probability exps[i]/sum, for u uniform in [0, 1).
func draw(exps []float64, sum, u float64) int {
	target := u * sum
	acc := 0.0
	last := 0
	for i, e := range exps {
		if e == 0 {
			continue
		}
		acc += e
		last = i
		if acc > target {
			return i
		}
	}
	return last // rounding: the last token with any mass
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}
