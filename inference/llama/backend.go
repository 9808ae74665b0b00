package llama

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/internal/sysmem"
	"github.com/omar-selfplay/omar/llamacpp"
)

// ErrClosed is returned by a Backend after Close.
var ErrClosed = errors.New("llama: backend closed")

// Backend is the llama.cpp inference.Backend and inference.Tokenizer.
type Backend struct {
	opts  Options
	model *llamacpp.Model
	// ownsModel: Close frees the model (not for one context of several).
	ownsModel bool
	vocab     *llamacpp.Vocab
	// contexts are the llama contexts of a Backend with several
	// (Options.Contexts, contexts.go), which routes calls to them and
	// has no context or loop of its own; nil otherwise.
	contexts []*Backend
	lctx     *llamacpp.LlamaContext
	nCtx     int // KV cells per sequence
	tmpl     *chatTemplate

	submit    chan []*job
	sessionCh chan sessionMsg
	swaps     chan *swap
	quit      chan struct{}
	done      chan struct{} // closed when the loop has exited
	once      sync.Once

	// mu keeps the model alive for Tokenizer calls from other goroutines:
	// they hold it shared, Close takes it exclusively before freeing.
	mu     sync.RWMutex
	closed bool

	version      atomic.Int64 // policy version, bumped by SetAdapter
	swapsWaiting atomic.Int32 // swaps the loop holds until running sequences finish
	stats        statsCounters

	// releases are the key prefixes Release was given since the loop
	// last looked (release.go).
	releaseMu sync.Mutex
	releases  []string

	// Owned by the loop goroutine.
	batch    *llamacpp.Batch
	masks    *maskCache // grammar masks by state, shared by the contexts of one model; nil: none
	scratch  []*scratch // one per sampling goroutine
	inBatch  []*job     // reused by step: no allocation per decode
	sampling []*job
	groups   []string // adapter keys of a mixed step
	pieces   [][]byte // text of every token (specials render empty)
	specials []string // texts of the control and end-of-generation tokens
	eog      []bool   // end-of-generation tokens
	slots    []*slot
	queue    []*job
	sessions []*session // open sessions of the deterministic schedule
	adapter  *llamacpp.Adapter
	adapters adapterSet // named adapters (adapters.go)
	clock    uint64
}

var (
	_ inference.Backend  = (*Backend)(nil)
	_ inference.Releaser = (*Backend)(nil)
)
var _ inference.Tokenizer = (*Backend)(nil)

// New loads the libraries (once per process), the model and a context with
// o.Parallel sequence slots, and starts the decode loop.
func New(o Options) (*Backend, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	// Checked before llama.cpp allocates anything: the file and its
	// hyperparameters, then the context and memory o asks of the model.
	if err := llamacpp.CheckModelFile(o.Model); err != nil {
		return nil, err
	}
	shape, err := readShape(o.Model)
	if err != nil {
		return nil, fmt.Errorf("llama: %w", err)
	}
	if err := checkShape(o, shape, sysmem.Available); err != nil {
		return nil, err
	}
	// A NaN or Inf weight passes llama.cpp's loader, then aborts the
	// process in grammar sampling: refuse it here, naming the tensor.
	if err := gguf.CheckFinite(o.Model); err != nil {
		return nil, fmt.Errorf("llama: %s: %w", o.Model, err)
	}
	if err := llamacpp.Load(o.LibDir); err != nil {
		return nil, err
	}
	mo := llamacpp.ModelOptions{}.Defaults()
	mo.GPULayers = o.GPULayers
	m, err := llamacpp.LoadModel(o.Model, mo)
	if err != nil {
		return nil, err
	}
	if m.HasEncoder() {
		m.Close()
		return nil, fmt.Errorf("llama: %s is an encoder-decoder model; only decoder-only models are supported", o.Model)
	}
	if o.contexts() == 1 {
		b, err := newContext(o, m, true, nil)
		if err != nil {
			m.Close()
		}
		return b, err
	}
	return newContexts(o, m)
}

// newContext makes a llama context for o on the loaded model m and starts
// its decode loop; owner says whether closing the Backend frees m. The
// token tables are tablesOf's when given (another context on m), else
// looked up.
func newContext(o Options, m *llamacpp.Model, owner bool, tablesOf *Backend) (*Backend, error) {
	co := llamacpp.ContextOptions{}.Defaults()
	co.NCtx = o.Context * o.Parallel
	co.NSeqMax = o.Parallel
	co.NBatch = o.Batch
	co.Threads, co.ThreadsBatch = o.Threads, o.ThreadsBatch
	co.FlashAttention = o.FlashAttention
	co.TypeK, co.TypeV = o.KVType, o.KVType
	lctx, err := llamacpp.NewLlamaContext(m, co)
	if err != nil {
		return nil, err
	}
	batch, err := llamacpp.NewBatch(o.Batch, 1)
	if err != nil {
		lctx.Close()
		return nil, err
	}
	b := &Backend{
		// llama.cpp may round the cache up; the option is the contract.
		opts: o, model: m, vocab: m.Vocab(), lctx: lctx, nCtx: min(o.Context, lctx.NCtxSeq()),
		submit: make(chan []*job), sessionCh: make(chan sessionMsg), swaps: make(chan *swap), quit: make(chan struct{}), done: make(chan struct{}),
		batch: batch,
	}
	if tablesOf != nil {
		// The same model: its tables are read-only and shared.
		b.tmpl, b.pieces, b.eog, b.specials = tablesOf.tmpl, tablesOf.pieces, tablesOf.eog, tablesOf.specials
		b.masks = tablesOf.masks
	} else {
		b.tables()
		budget := o.GrammarCacheBytes
		if budget == 0 {
			budget = defaultGrammarCacheBytes
		}
		b.masks = newMaskCache(budget)
	}
	for range min(runtime.GOMAXPROCS(0), o.Parallel) {
		nv := m.Vocab().NTokens()
		b.scratch = append(b.scratch, &scratch{cand: llamacpp.NewCandidates(nv), exps: make([]float64, nv)})
	}
	for i := range o.Parallel {
		b.slots = append(b.slots, &slot{seq: int32(i)})
	}
	if o.Adapter != "" {
		a, err := llamacpp.LoadAdapter(m, o.Adapter)
		if err == nil {
			err = lctx.SetAdapters([]*llamacpp.Adapter{a}, []float32{o.AdapterScale})
		}
		if err != nil {
			b.free()
			return nil, err
		}
		b.adapter = a
	}
	b.ownsModel = owner // from here on: a failure above leaves m to the caller
	go b.loop()
	return b, nil
}

// tables looks up the chat template and every token's text and
// end-of-generation flag once, instead of two C calls per sampled token.
func (b *Backend) tables() {
	m := b.model
	gguf, _ := m.ChatTemplate("")
	b.tmpl = newChatTemplate(b.vocab, gguf, b.opts.ChatTemplate)
	nv := m.Vocab().NTokens()
	b.pieces, b.eog = make([][]byte, nv), make([]bool, nv)
	for t := range int32(nv) {
		b.pieces[t] = []byte(b.vocab.Piece(t, false))
		b.eog[t] = b.vocab.IsEOG(t)
		if b.eog[t] || b.vocab.IsControl(t) {
			if text := b.vocab.Piece(t, true); text != "" {
				b.specials = append(b.specials, text)
			}
		}
	}
}

// Model is the loaded model (for information; do not close it).
func (b *Backend) Model() *llamacpp.Model { return b.model }

// ContextPerSequence is the number of tokens one sequence may hold.
func (b *Backend) ContextPerSequence() int { return b.nCtx }

// PolicyVersion identifies the current adapter: 0 at start, +1 for every
// SetAdapter.
func (b *Backend) PolicyVersion() int {
	if b.contexts != nil {
		return b.contexts[0].PolicyVersion()
	}
	return int(b.version.Load())
}

// Close stops the loop (pending and running requests fail with ErrClosed)
// and frees the context, adapter and model.
func (b *Backend) Close() error {
	b.once.Do(func() {
		close(b.quit)
		for _, c := range b.contexts {
			c.Close()
		}
		<-b.done
		b.mu.Lock()
		b.closed = true
		if b.contexts == nil {
			b.free()
		} else {
			b.model.Close()
		}
		b.mu.Unlock()
	})
	return nil
}

func (b *Backend) free() {
	b.batch.Close()
	if b.adapter != nil || len(b.adapters.named) > 0 {
		_ = b.lctx.SetAdapters(nil, nil)
	}
	if b.adapter != nil {
		b.adapter.Close()
		b.adapter = nil
	}
	b.closeAdapters()
	b.lctx.Close()
	if b.ownsModel {
		b.model.Close()
	}
}

// Generate decodes the requests together with those of concurrent callers
// and returns one response per request, in order. A request that cannot run
// (prompt longer than the context, invalid grammar, empty prompt) makes
// Generate return an error naming it; the other requests still complete.
// Invalid sampling settings (inference.Sampling.Validate) fail the whole
// call before anything runs.
// When ctx ends, unfinished requests are dropped between steps and ctx's
// error is returned.
func (b *Backend) Generate(ctx context.Context, reqs []inference.Request) ([]inference.Response, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	jobs := make([]*job, len(reqs))
	for i, r := range reqs {
		// Out-of-range sampling reaches C asserts: refuse the call
		// before any request runs.
		if err := r.Sampling.Validate(); err != nil {
			return nil, fmt.Errorf("llama: request %d (key %q): %w", i, r.Key, err)
		}
		jobs[i] = &job{req: r, ctx: ctx, done: make(chan struct{})}
	}
	if err := b.dispatch(ctx, ctx, nil, jobs); err != nil {
		return nil, err
	}
	out := make([]inference.Response, len(reqs))
	var errs []error
	for i, j := range jobs {
		select {
		case <-j.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if j.err != nil {
			errs = append(errs, fmt.Errorf("request %d (key %q): %w", i, j.req.Key, j.err))
			continue
		}
		out[i] = j.resp
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("llama: %w", errors.Join(errs...))
	}
	return out, nil
}

// GenerateEach implements inference.EachGenerator: the requests are queued
// in one submission, in order (so the same calls are decoded in the same
// steps whatever the callers' timing), request i under ctxs[i]. A request
// with invalid sampling settings fails alone.
func (b *Backend) GenerateEach(ctxs []context.Context, reqs []inference.Request) ([]inference.Response, []error) {
	sctx := context.Background()
	if len(ctxs) > 0 {
		sctx = ctxs[0]
	}
	return b.generateEach(sctx, ctxs, reqs, nil)
}

// generateEach submits the requests as the session sess's (nil: the one
// sctx carries, if any).
func (b *Backend) generateEach(sctx context.Context, ctxs []context.Context, reqs []inference.Request, sess *session) ([]inference.Response, []error) {
	if len(ctxs) != len(reqs) {
		panic(fmt.Sprintf("llama: GenerateEach with %d contexts for %d requests", len(ctxs), len(reqs)))
	}
	out := make([]inference.Response, len(reqs))
	errs := make([]error, len(reqs))
	jobs := make([]*job, 0, len(reqs))
	idx := make([]int, 0, len(reqs))
	for i, r := range reqs {
		if err := r.Sampling.Validate(); err != nil {
			errs[i] = fmt.Errorf("llama: request %d (key %q): %w", i, r.Key, err)
			continue
		}
		jobs = append(jobs, &job{req: r, ctx: ctxs[i], done: make(chan struct{})})
		idx = append(idx, i)
	}
	if len(jobs) == 0 {
		return out, errs
	}
	// The submission itself is not cancelled: each request is, by its
	// own context, between steps.
	if err := b.dispatch(sctx, context.Background(), sess, jobs); err != nil {
		for _, i := range idx {
			errs[i] = err
		}
		return out, errs
	}
	for k, j := range jobs {
		i := idx[k]
		select {
		case <-j.done:
		case <-j.ctx.Done():
			errs[i] = j.ctx.Err()
			continue
		}
		if j.err != nil {
			errs[i] = fmt.Errorf("llama: request %d (key %q): %w", i, j.req.Key, j.err)
			continue
		}
		out[i] = j.resp
	}
	return out, errs
}

// Tokenize implements inference.Tokenizer.
func (b *Backend) Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return nil, ErrClosed
	}
	return b.vocab.Tokenize(text, addSpecial, parseSpecial)
}

// SpecialTexts implements inference.SpecialTexter: the texts of the
// vocabulary's control and end-of-generation tokens.
func (b *Backend) SpecialTexts() []string { return slices.Clone(b.specials) }

// Detokenize implements inference.Tokenizer: special tokens are rendered as
// their text, so it inverts Tokenize(text, false, true).
func (b *Backend) Detokenize(tokens []int32) (string, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return "", ErrClosed
	}
	return b.vocab.Detokenize(tokens, false, true)
}

// ChatTemplate implements inference.Tokenizer with the model's own template.
func (b *Backend) ChatTemplate(msgs []inference.Message, addAssistant bool) (string, error) {
	return b.applyTemplate(msgs, addAssistant)
}

func (b *Backend) applyTemplate(msgs []inference.Message, addAssistant bool) (string, error) {
	return b.tmpl.render(b.opts.Model, msgs, inference.ChatOptions{AddAssistant: addAssistant})
}

// EOG implements inference.Tokenizer (from a table made at New, so it
// works after Close too).
func (b *Backend) EOG(token int32) bool { return token >= 0 && int(token) < len(b.eog) && b.eog[token] }

// swap is a request to change the adapter between steps.
type swap struct {
	name  string // LoadAdapter's name; "" for SetAdapter
	path  string
	scale float32
	reply chan swapResult
}

type swapResult struct {
	version int
	err     error
}

// SetAdapter replaces the LoRA adapter (path "" removes it) and returns the
// new policy version. The swap waits until the sequences that are running
// finish (requests arriving meanwhile wait), so every response was produced
// by one policy; it then clears the KV cache, whose entries were computed
// under the old weights.
func (b *Backend) SetAdapter(ctx context.Context, path string, scale float32) (int, error) {
	if path != "" && scale == 0 {
		return 0, errors.New("llama: adapter scale 0")
	}
	if b.contexts != nil {
		// Every context swaps; they count the same versions.
		err := b.eachContext(func(c *Backend) error {
			_, err := c.SetAdapter(ctx, path, scale)
			return err
		})
		return b.PolicyVersion(), err
	}
	s := &swap{path: path, scale: scale, reply: make(chan swapResult, 1)}
	select {
	case b.swaps <- s:
	case <-b.quit:
		return 0, ErrClosed
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	select {
	case r := <-s.reply:
		return r.version, r.err
	case <-b.quit:
		return 0, ErrClosed
	}
}

// Stats are cumulative counters of the decode loop.
type Stats struct {
	Steps           int64 // llama_decode calls
	DecodedTokens   int64 // tokens sent through llama_decode (prompt + generated)
	GeneratedTokens int64 // tokens sampled
	ReusedTokens    int64 // prompt tokens served from the KV cache
	// SharedTokens are the part of ReusedTokens another key's sequence
	// left in the slot (the common prefix of a finished seat's stream) or
	// that Copies copied into it from another sequence's cache.
	SharedTokens, Copies int64
	// EvictedLive and EvictedReleased count slots whose cached tokens
	// were dropped for another key's sequence: of a key not released
	// (a live seat that will have to decode its prefix again) and of a
	// released one (a finished episode's, which costs nothing).
	EvictedLive, EvictedReleased int64
	// DecodeTime is the time spent inside llama_decode; StepTime the time
	// of whole steps (batch building, decode, sampling, bookkeeping).
	// With several contexts, every counter is their sum, the times too
	// (so they may exceed the wall time).
	DecodeTime, StepTime time.Duration
	// SessionWait is the time the loop held running sequences back while
	// a session's caller prepared its next submission (schedule.go).
	SessionWait time.Duration
	// ScheduleBypasses counts the times a request from no session waited
	// so long for the sessions that it was decoded out of turn: the run
	// is then not reproducible to the bit (schedule.go).
	ScheduleBypasses int64
}

type statsCounters struct {
	steps, decoded, generated, reused, shared, copies atomic.Int64
	evictedLive, evictedReleased                      atomic.Int64
	decodeNS, stepNS, sessionWaitNS                   atomic.Int64
	bypasses                                          atomic.Int64
}

// Stats returns the counters so far.
func (b *Backend) Stats() Stats {
	if b.contexts != nil {
		return b.sumStats()
	}
	return Stats{
		Steps: b.stats.steps.Load(), DecodedTokens: b.stats.decoded.Load(),
		GeneratedTokens: b.stats.generated.Load(), ReusedTokens: b.stats.reused.Load(), SharedTokens: b.stats.shared.Load(), Copies: b.stats.copies.Load(),
		EvictedLive: b.stats.evictedLive.Load(), EvictedReleased: b.stats.evictedReleased.Load(),
		DecodeTime: time.Duration(b.stats.decodeNS.Load()), StepTime: time.Duration(b.stats.stepNS.Load()),
		SessionWait: time.Duration(b.stats.sessionWaitNS.Load()), ScheduleBypasses: b.stats.bypasses.Load(),
	}
}
