package train

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime/debug"
	"slices"

	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/llamacpp"
)

// lora is one adapted matrix: A [n_in, r], B [r, n_out].
type lora struct {
	layer     int
	module    string
	a, b      llamacpp.Tensor
	nIn, nOut int
	pa, pb    int // indices into Trainer.params
}

type loraKey struct {
	layer  int
	module string
}

// param is one trainable tensor with its gradient accumulator and AdamW
// moments.
type param struct {
	name    string
	t, grad llamacpp.Tensor
	m, v    llamacpp.Tensor
	group   int // groupAdapter, groupValue, groupDecay or groupNoDecay
	n       int // elements
}

// Parameter groups: each has its own AdamW parameters (learning rate and
// weight decay).
const (
	groupAdapter = iota // LoRA A and B: LR, WeightDecay
	groupValue          // value head: ValueLR, WeightDecay
	groupDecay          // full mode, matrices and embeddings: LR, WeightDecay
	groupNoDecay        // full mode, norms and biases: LR, no decay
	nGroups
)

// Trainer trains a LoRA adapter and a value head on a frozen GGUF model or,
// with Options.Full, every weight of the model. It is not safe for
// concurrent use: one goroutine drives it.
type Trainer struct {
	opts  Options
	hp    hparams
	model string

	backends []llamacpp.Backend // primary first, CPU last
	sched    llamacpp.Sched
	// schedSize is the scheduler's graph capacity.
	schedSize int

	wctx llamacpp.Context // base weights
	wbuf llamacpp.Buffer
	w    weights
	// wT holds transposed copies of the frozen matrices (LoRA mode, see
	// Options.OutProdBackward), keyed by the matrix.
	wT map[llamacpp.Tensor]llamacpp.Tensor
	// baseNames are the GGUF tensors loaded as base weights, base the
	// weights with their directory entries (for SaveModel).
	baseNames []string
	base      []fill

	pctx llamacpp.Context // parameters, moments, optimizer inputs
	pbuf llamacpp.Buffer
	gctx llamacpp.Context // gradient accumulators
	gbuf llamacpp.Buffer

	loras      []*lora
	loraIdx    map[loraKey]*lora
	vhW, vhB   llamacpp.Tensor
	params     []param
	paramIndex map[llamacpp.Tensor]int

	lossGrad  llamacpp.Tensor          // seed of the loss gradient (1)
	clipScale llamacpp.Tensor          // gradient-norm clipping factor
	adamPar   [nGroups]llamacpp.Tensor // AdamW parameters per group

	octx      llamacpp.Context // optimizer graphs
	normGraph llamacpp.Graph
	normOut   llamacpp.Tensor
	optGraph  llamacpp.Graph
	// optGraphPolicy updates every parameter but the value head.
	optGraphPolicy llamacpp.Graph

	cache    map[graphKey]*built
	cacheLRU []graphKey
	// fullLastLayer computes the last layer on every row in the graphs
	// that read only the selected rows (see built.lastSelected); tests
	// compare the two.
	fullLastLayer bool
	// attnBlock is the number of query rows per causal attention block
	// (see attnBlocks); 0 means defaultAttnBlock, < 0 no blocks. Tests and
	// benchmarks compare settings.
	attnBlock int
	// segCache holds the graphs of segmented passes (segment.go);
	// segmentMode > 0 segments every pass, < 0 none, 0 those over the
	// activation budget. Tests compare the two.
	segCache    map[segKey]*built
	attn        *attnState // the attention tensors of segmented passes
	segmentMode int
	// segRows, when > 0, replaces segmentRows (tests: chunks of rows);
	// groupRows the query rows of an attention group (attnGroups).
	segRows, groupRows int

	// ppo is Step's objective (Options.PPOLosses), sft SFTStep's.
	ppo, sft *Objective
	// ppoEntropy is the entropy coefficient ppo was built with
	// (Options.EntropyDecaySteps).
	ppoEntropy float32
	// allowBuf is the allow input's buffer, reused across passes: at a
	// 150k vocabulary it is some hundred MB (allowMask).
	allowBuf []float32

	step int // optimizer steps taken
	pcg  *rand.PCG
	rng  *rand.Rand
}

const maxCachedGraphs = 12

// New loads the model at modelPath (F32, F16, BF16 or quantized GGUF of the
// llama, qwen2 or qwen3 architecture) onto the configured device and
// initialises a fresh adapter (A random, B zero, so the adapted model starts
// equal to the base) and a zero value head; with opts.Full the model's own
// weights, held in F32, are the parameters and there is no adapter. It
// loads the llama.cpp libraries from opts.LibDir when no earlier call has.
func New(modelPath string, opts Options) (*Trainer, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.LibDir != "" || !llamacpp.Loaded() {
		if err := llamacpp.Load(llamacpp.DefaultLibDir(opts.LibDir)); err != nil {
			return nil, err
		}
	}
	t := &Trainer{opts: opts, model: modelPath, cache: map[graphKey]*built{}, loraIdx: map[loraKey]*lora{}, paramIndex: map[llamacpp.Tensor]int{}}
	t.pcg = rand.NewPCG(opts.Seed, 0x747261696e) // "train"
	t.rng = rand.New(t.pcg)
	var err error
	if t.ppo, err = ppoObjective(opts, opts.EntropyCoef); err != nil {
		return nil, err
	}
	t.ppoEntropy = opts.EntropyCoef
	if t.sft, err = NewObjective(CrossEntropy{}); err != nil {
		return nil, err
	}
	if err := t.init(); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

func (t *Trainer) init() error {
	f, err := gguf.Open(t.model)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	defer f.Close()
	if t.hp, err = readHparams(f); err != nil {
		return err
	}
	if err := t.initBackends(); err != nil {
		return err
	}
	fills, err := t.loadBase(f)
	if err != nil {
		return err
	}
	if err := t.initParams(fills); err != nil {
		return err
	}
	// The scheduler's hash set holds the nodes and the leafs of a graph;
	// run regrows it for a longer sequence's graph.
	if err := t.newSched(2 * t.graphSize(0)); err != nil {
		return err
	}
	if err := t.buildOptimizer(); err != nil {
		return err
	}
	// Loading made F32 copies of the weights in Go memory (dequantized,
	// transposed): garbage now, as large as the largest matrix twice over
	// (1.2 GB for a 151,936-token tied embedding). Return it to the host
	// now, so that the passes' memory is what the memory check predicts.
	debug.FreeOSMemory()
	return nil
}

// loadBase declares the base weights (and their transposes), checks that
// they fit, allocates them on the primary backend and fills them from f.
func (t *Trainer) loadBase(f *gguf.File) ([]fill, error) {
	dir := map[string]gguf.TensorInfo{}
	for _, in := range f.Tensors {
		dir[in.Name] = in
	}
	var err error
	if t.wctx, err = llamacpp.NewContext(2*len(f.Tensors)+8, 0, 0, false); err != nil {
		return nil, err
	}
	var keep func(gguf.TensorType) bool
	if !t.opts.Full && t.opts.Device != "cuda" && !t.opts.DequantizeBase {
		keep = func(typ gguf.TensorType) bool { return keepsType(typ, t.opts.OutProdBackward) }
	}
	w, fills, err := declareWeights(t.wctx, &t.hp, dir, keep)
	if err != nil {
		return nil, err
	}
	t.w = w
	t.declareTransposes()
	if t.opts.Device != "cuda" {
		if err := checkMemory(t.memoryNeed(fills), availableMemory); err != nil {
			return nil, err
		}
	}
	if err := t.checkCUDA(fills); err != nil {
		return nil, err
	}
	t.base = fills
	for _, fl := range fills {
		t.baseNames = append(t.baseNames, fl.info.Name)
	}
	if t.wbuf, err = t.backends[0].AllocContextTensors(t.wctx); err != nil {
		return nil, fmt.Errorf("train: base weights: %w", err)
	}
	for _, fl := range fills {
		if err := t.fillBase(f, fl); err != nil {
			return nil, err
		}
	}
	return fills, nil
}

// fillBase sets one base weight, and its transpose if it has one, from f.
func (t *Trainer) fillBase(f *gguf.File, fl fill) error {
	wT := t.wT[fl.t]
	var raw []byte
	if fl.t.Type != llamacpp.TypeF32 {
		// Held in the file's type: its bytes as they are.
		var err error
		raw, err = f.TensorBytes(fl.info.Name)
		if err != nil {
			return fmt.Errorf("train: %w", err)
		}
		if len(raw) != llamacpp.Nbytes(fl.t) {
			return fmt.Errorf("train: tensor %s: %d bytes, want %d for %v %v", fl.info.Name, len(raw), llamacpp.Nbytes(fl.t), fl.info.Type, fl.info.Shape)
		}
		llamacpp.SetBytes(fl.t, raw)
		if wT == nil {
			return nil
		}
	}
	data, err := readF32(f, fl.info, raw, t.backends[len(t.backends)-1])
	if err != nil {
		return err
	}
	if fl.t.Type == llamacpp.TypeF32 {
		llamacpp.SetF32(fl.t, data)
	}
	if wT != nil {
		tr := transpose(data, int(fl.t.Ne[0]), int(fl.t.Ne[1]))
		if wT.Type == llamacpp.TypeF32 {
			llamacpp.SetF32(wT, tr)
			return nil
		}
		q, err := llamacpp.Quantize(wT.Type, tr, int(wT.Ne[0]))
		if err != nil {
			return fmt.Errorf("train: transposed copy of %s: %w", fl.info.Name, err)
		}
		llamacpp.SetBytes(wT, q)
	}
	return nil
}

// initParams declares the parameters: LoRA pairs per (layer, module) or,
// in full mode, the base weights; then the value head. It allocates them
// with their optimizer state and gradients, and initialises the adapter.
func (t *Trainer) initParams(fills []fill) error {
	nParams := t.hp.nLayer*len(t.opts.LoRAModules)*2 + 2
	if t.opts.Full {
		nParams = len(fills) + 2
	}
	var err error
	if t.pctx, err = llamacpp.NewContext(3*nParams+8, 0, 0, false); err != nil {
		return err
	}
	if t.gctx, err = llamacpp.NewContext(nParams+2, 0, 0, false); err != nil {
		return err
	}
	if t.opts.Full {
		for _, fl := range fills {
			if fl.t == t.w.ropeFreqs {
				continue // a fixed property of the positional encoding
			}
			t.addParam(fl.t, fl.info.Name, fullGroup(fl.t), fl.t.Ne[:]...)
		}
	} else {
		t.declareLoRA()
	}
	t.vhW = t.addParam(nil, "value_head.weight", groupValue, int64(t.hp.nEmbd), 1)
	t.vhB = t.addParam(nil, "value_head.bias", groupValue, 1)
	t.lossGrad = t.pctx.NewTensor(llamacpp.TypeF32, 1)
	t.clipScale = t.pctx.NewTensor(llamacpp.TypeF32, 1)
	for g := range t.adamPar {
		t.adamPar[g] = t.pctx.NewTensor(llamacpp.TypeF32, 7)
	}
	primary := t.backends[0]
	if t.pbuf, err = primary.AllocContextTensors(t.pctx); err != nil {
		return fmt.Errorf("train: parameters: %w", err)
	}
	if t.gbuf, err = primary.AllocContextTensors(t.gctx); err != nil {
		return fmt.Errorf("train: gradients: %w", err)
	}
	// Clear zeroes the whole buffer: the value head, B, the moments. The
	// base weights of full mode live in wbuf and keep their data.
	t.pbuf.Clear(0)
	t.gbuf.Clear(0)
	llamacpp.SetF32(t.lossGrad, []float32{1})
	t.initAdapter()
	return nil
}

// declareLoRA declares the adapter's A and B for every layer and module,
// in AllModules' order whatever the option's order.
func (t *Trainer) declareLoRA() {
	r := int64(t.opts.LoRARank)
	for l := range t.hp.nLayer {
		for _, m := range AllModules {
			if !slices.Contains(t.opts.LoRAModules, m) {
				continue
			}
			base := t.w.layers[l].mat[m]
			nIn, nOut := base.Ne[0], base.Ne[1]
			name := fmt.Sprintf("blk.%d.%s.weight", l, m)
			lr := &lora{layer: l, module: m, nIn: int(nIn), nOut: int(nOut)}
			lr.pa = len(t.params)
			lr.a = t.addParam(nil, name+".lora_a", groupAdapter, nIn, r)
			lr.pb = len(t.params)
			lr.b = t.addParam(nil, name+".lora_b", groupAdapter, r, nOut)
			t.loras = append(t.loras, lr)
			t.loraIdx[loraKey{l, m}] = lr
		}
	}
}

// addParam makes x (a new tensor in pctx when nil) a parameter with its
// moments and gradient accumulator.
func (t *Trainer) addParam(x llamacpp.Tensor, name string, group int, ne ...int64) llamacpp.Tensor {
	p := param{name: name, group: group, t: x}
	if p.t == nil {
		p.t = llamacpp.SetName(t.pctx.NewTensor(llamacpp.TypeF32, ne...), name)
	}
	llamacpp.SetParam(p.t)
	p.m = t.pctx.NewTensor(llamacpp.TypeF32, ne...)
	p.v = t.pctx.NewTensor(llamacpp.TypeF32, ne...)
	p.grad = t.gctx.NewTensor(llamacpp.TypeF32, ne...)
	p.n = 1
	for _, n := range ne {
		p.n *= int(n)
	}
	t.paramIndex[p.t] = len(t.params)
	t.params = append(t.params, p)
	return p.t
}

// initAdapter draws A from U(−1/√n_in, 1/√n_in) (PEFT's Kaiming-uniform
// default) and zeroes B, the value head and the optimizer state.
func (t *Trainer) initAdapter() {
	for _, l := range t.loras {
		bound := 1 / math.Sqrt(float64(l.nIn))
		a := make([]float32, l.nIn*t.opts.LoRARank)
		for i := range a {
			a[i] = float32((2*t.rng.Float64() - 1) * bound)
		}
		llamacpp.SetF32(l.a, a)
	}
}

func (t *Trainer) initBackends() error {
	cpu, err := llamacpp.NewBackend(llamacpp.DeviceCPU, t.opts.Threads)
	if err != nil {
		return err
	}
	if t.opts.Device == "cuda" {
		gpu, err := llamacpp.NewBackend(llamacpp.DeviceGPU, 0)
		if err != nil {
			cpu.Free()
			return fmt.Errorf("train: device cuda: %w (install the cuda libraries with scripts/install-llama.sh cuda)", err)
		}
		t.backends = []llamacpp.Backend{gpu, cpu}
		return nil
	}
	t.backends = []llamacpp.Backend{cpu}
	return nil
}

// SetThreads changes the number of threads the CPU backend computes the
// following passes with (Options.Threads is the first count), for a caller
// that knows how many cores are free at the moment (see cpuuse). Scores,
// gradients and weights do not depend on it.
func (t *Trainer) SetThreads(n int) error {
	if n < 1 {
		return fmt.Errorf("train: threads %d < 1", n)
	}
	if err := t.backends[len(t.backends)-1].SetThreads(n); err != nil {
		return err
	}
	t.opts.Threads = n
	return nil
}

// Threads is the CPU backend's current thread count.
func (t *Trainer) Threads() int { return t.opts.Threads }

// buildOptimizer builds the two small graphs run once per optimizer step:
// the squared global gradient norm, and AdamW on the clipped gradients.
func (t *Trainer) buildOptimizer() error {
	size := 8*len(t.params) + 64
	var err error
	if t.octx, err = llamacpp.NewContext(2*size, 3, size, false); err != nil {
		return err
	}
	t.normGraph = t.octx.NewGraph(size, false)
	var acc llamacpp.Tensor
	for _, p := range t.params {
		s := t.octx.Sum(t.octx.Sqr(p.grad))
		if acc == nil {
			acc = s
		} else {
			acc = t.octx.Add(acc, s)
		}
	}
	t.normOut = acc
	llamacpp.SetOutput(acc)
	t.normGraph.BuildForward(acc)

	// Two update graphs: every parameter (PPO), and all but the value head
	// (SFT, where the value head has no gradient and AdamW's stale moments
	// would otherwise keep moving it).
	t.optGraph = t.octx.NewGraph(size, false)
	t.optGraphPolicy = t.octx.NewGraph(size, false)
	for _, p := range t.params {
		g := t.octx.Mul(p.grad, t.clipScale)
		step := t.octx.OptStepAdamW(p.t, g, p.m, p.v, t.adamPar[p.group])
		t.optGraph.BuildForward(step)
		if p.group != groupValue {
			t.optGraphPolicy.BuildForward(step)
		}
	}
	return nil
}

// fillNames lists the base tensors read from the model file.
func (t *Trainer) fillNames() []string { return t.baseNames }

func (t *Trainer) loraAt(layer int, module string) *lora { return t.loraIdx[loraKey{layer, module}] }

// Close releases every C resource. The Trainer is unusable afterwards.
func (t *Trainer) Close() error {
	for _, b := range t.cache {
		b.free()
	}
	t.cache = nil
	for _, b := range t.segCache {
		b.free()
	}
	t.segCache = nil
	if t.attn != nil {
		t.attn.free()
		t.attn = nil
	}
	t.sched.Free()
	t.sched = 0
	t.octx.Free()
	t.octx = 0
	t.gbuf.Free()
	t.pbuf.Free()
	t.wbuf.Free()
	t.gbuf, t.pbuf, t.wbuf = 0, 0, 0
	t.gctx.Free()
	t.pctx.Free()
	t.wctx.Free()
	t.gctx, t.pctx, t.wctx = 0, 0, 0
	for _, b := range t.backends {
		b.Free()
	}
	t.backends = nil
	return nil
}

// graph returns the cached graph for key, building it on first use.
func (t *Trainer) graph(key graphKey) (*built, error) {
	if b, ok := t.cache[key]; ok {
		i := slices.Index(t.cacheLRU, key)
		t.cacheLRU = append(slices.Delete(t.cacheLRU, i, i+1), key)
		return b, nil
	}
	if len(t.cacheLRU) >= maxCachedGraphs {
		old := t.cacheLRU[0]
		t.cacheLRU = t.cacheLRU[1:]
		t.cache[old].free()
		delete(t.cache, old)
	}
	b, err := t.build(key)
	if err != nil {
		return nil, err
	}
	t.cache[key] = b
	t.cacheLRU = append(t.cacheLRU, key)
	return b, nil
}

// pass is one forward(/backward) over a group of sequences padded to t.
type pass struct {
	seqs []int // indices into the caller's slice
	t    int
	// sel are the rows (b·t + q) whose next token is masked: the only rows
	// that go through the output layer. k is len(sel) rounded up to a
	// multiple of 32 (at least 32), the graph's shape.
	sel []int32
	k   int
}

func (p pass) key(kind graphKind, obj *Objective) graphKey {
	return graphKey{kind, obj, len(p.seqs), p.t, p.k}
}

// bucket rounds a length up to a multiple of 32, so that graphs (and the
// scheduler's allocations) are shared by sequences of similar length.
func bucket(n int) int { return (n + 31) / 32 * 32 }

// logitsBudget bounds the memory of the per-pass tensors that have one
// value per (selected row, vocabulary entry): logits, their exponentials,
// softmax and gradients, about eight of them in a training pass.
const logitsBudget = 2 << 30

// maxSelected is the most output rows per pass: a 150k vocabulary allows
// about 440.
func (t *Trainer) maxSelected() int {
	n := int64(8)
	if t.opts.OverGrammar() {
		n = 12 // the allow mask, its product, the shifted logits and their gradient
	}
	return int(max(logitsBudget/(int64(t.hp.nVocab)*4*n), 32))
}

// plan groups the sequences idx into passes of similar length, each with at
// most BatchTokens padded tokens and maxSelected trained rows (a sequence
// beyond either limit gets a pass of its own).
func (t *Trainer) plan(seqs []Sequence, idx []int) []pass {
	order := slices.Clone(idx)
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(len(seqs[a].Tokens), len(seqs[b].Tokens)) })
	maxSel := t.maxSelected()
	var out []pass
	var cur pass
	nSel := 0
	flush := func() {
		if len(cur.seqs) == 0 {
			return
		}
		for bi, si := range cur.seqs {
			s := seqs[si]
			for q := 0; q+1 < len(s.Tokens); q++ {
				if s.Mask[q+1] {
					cur.sel = append(cur.sel, int32(bi*cur.t+q))
				}
			}
		}
		cur.k = max(bucket(len(cur.sel)), 32)
		out = append(out, cur)
		cur, nSel = pass{}, 0
	}
	for _, i := range order {
		T := bucket(len(seqs[i].Tokens))
		n := trainedTokens(seqs[i])
		if len(cur.seqs) > 0 && ((len(cur.seqs)+1)*T > t.opts.BatchTokens || nSel+n > maxSel) {
			flush()
		}
		cur.seqs = append(cur.seqs, i)
		cur.t = T
		nSel += n
	}
	flush()
	return out
}

// rowOf maps a selected row to (sequence index in seqs, position q): row q
// predicts token q+1.
func (p pass) rowOf(k int) (si, q int) {
	r := int(p.sel[k])
	return p.seqs[r/p.t], r % p.t
}

// seqData is what the layers of a pass read, made once per pass: every
// graph of a segmented pass (segment.go) writes it again.
type seqData struct {
	tokens, pos []int32
	// mask is the T×T causal mask, made only when a graph attends without
	// blocks; blockMask are the blocks' rows of it (attnBlocks).
	mask      []float32
	blockMask [][]float32
}

// seqDataOf makes the layers' inputs of pass p for graphs of its shape
// with the attention blocks blocks.
func (t *Trainer) seqDataOf(seqs []Sequence, p pass, blocks []int, full bool) *seqData {
	T, N := p.t, len(p.seqs)*p.t
	d := &seqData{tokens: make([]int32, N), pos: make([]int32, N)}
	for bi, si := range p.seqs {
		s := seqs[si].Tokens
		for q := range T {
			r := bi*T + q
			d.pos[r] = int32(q)
			if q < len(s) {
				d.tokens[r] = s[q]
			}
		}
	}
	inf := float32(math.Inf(-1))
	if full {
		d.mask = make([]float32, T*T)
		for q := range T {
			for k := q + 1; k < T; k++ {
				d.mask[q*T+k] = inf
			}
		}
	}
	from := 0
	for _, to := range blocks {
		// Block j's queries from..to-1 over keys 0..to-1: the rows of
		// the full mask, cut at the block's last key.
		m := make([]float32, to*(to-from))
		for q := from; q < to; q++ {
			row := m[(q-from)*to : (q-from+1)*to]
			for k := q + 1; k < to; k++ {
				row[k] = inf
			}
		}
		d.blockMask = append(d.blockMask, m)
		from = to
	}
	return d
}

// setSeq writes the layers' inputs that graph b reads.
func (t *Trainer) setSeq(b *built, d *seqData) {
	if b.tokens != nil && b.tokens.Buffer != 0 { // a segment past the first reads no tokens
		llamacpp.SetI32(b.tokens, d.tokens)
	}
	if b.pos != nil && b.pos.Buffer != 0 {
		llamacpp.SetI32(b.pos, d.pos)
	}
	if b.kqMask != nil && b.kqMask.Buffer != 0 { // every layer may attend in blocks
		llamacpp.SetF32(b.kqMask, d.mask)
	}
	if b.blocks != nil {
		llamacpp.Zero(b.kqvZero)
		for j := range b.blocks {
			llamacpp.SetF32(b.blockMask[j], d.blockMask[j])
		}
	}
}

// setCommon writes the inputs every graph has: tokens, positions, the causal
// mask, the selected rows and their target indices.
func (t *Trainer) setCommon(b *built, seqs []Sequence, p pass) {
	t.setSeq(b, t.seqDataOf(seqs, p, b.blocks, b.kqMask.Buffer != 0))
	t.setTargets(b, seqs, p)
	if b.lastSelected {
		t.setSelected(b, p)
	}
}

// setTargets writes the selected rows and their target indices k·V + the
// next token (padding rows: k·V).
func (t *Trainer) setTargets(b *built, seqs []Sequence, p pass) {
	V := t.hp.nVocab
	sel := make([]int32, b.nSel)
	tgt := make([]int32, b.nSel)
	for k := range b.nSel {
		tgt[k] = int32(k * V)
		if k < len(p.sel) {
			si, q := p.rowOf(k)
			sel[k] = p.sel[k]
			tgt[k] += seqs[si].Tokens[q+1]
		}
	}
	if b.sel != nil && b.sel.Buffer != 0 {
		llamacpp.SetI32(b.sel, sel)
	}
	if b.tgt.Buffer != 0 { // an objective need not read Forward.Logprob
		llamacpp.SetI32(b.tgt, tgt)
	}
	if b.allow != nil && b.allow.Buffer != 0 {
		llamacpp.SetF32(b.allow, t.allowMask(b, seqs, p))
	}
}

// allowMask is the allow input of pass p: per selected row, 1 on the
// tokens of the predicted position's Sequence.Allowed set, or on every
// token where it has none (padding rows included).
func (t *Trainer) allowMask(b *built, seqs []Sequence, p pass) []float32 {
	V := t.hp.nVocab
	if n := b.nSel * V; cap(t.allowBuf) < n {
		t.allowBuf = make([]float32, n)
	} else {
		t.allowBuf = t.allowBuf[:n]
	}
	a := t.allowBuf
	for k := range b.nSel {
		row := a[k*V : (k+1)*V]
		var set []int32
		if k < len(p.sel) {
			si, q := p.rowOf(k)
			set = seqs[si].Allowed[q+1]
		}
		if set == nil {
			for i := range row {
				row[i] = 1
			}
			continue
		}
		clear(row)
		for _, id := range set {
			row[id] = 1
		}
	}
	return a
}

// setSelected writes the inputs of a last layer on the selected rows: each
// row's position, and a mask that lets it see the rows of its own sequence
// up to itself (a padding row sees row 0).
func (t *Trainer) setSelected(b *built, p pass) {
	N, K := b.nRows, b.nSel
	selPos := make([]int32, K)
	mask := make([]float32, N*K)
	inf := float32(math.Inf(-1))
	for i := range mask {
		mask[i] = inf
	}
	for k := range K {
		r := 0
		if k < len(p.sel) {
			r = int(p.sel[k])
		}
		q := r % p.t
		selPos[k] = int32(q)
		clear(mask[k*N+r-q : k*N+r+1])
	}
	llamacpp.SetI32(b.selPos, selPos)
	llamacpp.SetF32(b.selMask, mask)
}

// rows lists the pass's selected rows for the losses' inputs.
func (p pass) rows(seqs []Sequence, K int) Rows {
	r := Rows{Seqs: seqs, Seq: make([]int, len(p.sel)), Pos: make([]int, len(p.sel)), K: K}
	for k := range p.sel {
		si, q := p.rowOf(k)
		r.Seq[k], r.Pos[k] = si, q+1
	}
	return r
}

// validate checks what every pass reads (see Sequence.validate).
func (t *Trainer) validate(seqs []Sequence) error {
	if len(seqs) == 0 {
		return errors.New("train: no sequences")
	}
	for i, s := range seqs {
		if err := s.validate(i, t.hp.nVocab, t.hp.nCtx); err != nil {
			return err
		}
		if bucket(trainedTokens(s))*t.hp.nVocab >= math.MaxInt32 {
			return fmt.Errorf("train: sequence %d has too many trained tokens for the vocabulary size", i)
		}
	}
	return nil
}

// newSched creates the scheduler for graphs of up to size nodes and leafs.
func (t *Trainer) newSched(size int) error {
	s, err := llamacpp.NewSched(t.backends, size)
	if err != nil {
		return err
	}
	t.sched, t.schedSize = s, size
	return nil
}

// run allocates and computes a graph whose inputs set writes. The graph's
// compute tensors are reallocated every time: other graphs have used (and
// possibly regrown) the scheduler's buffers since.
func (t *Trainer) run(b *built, set func()) error {
	if need := 2 * b.size; need > t.schedSize {
		// Every graph is reallocated before it runs, so nothing holds
		// the old scheduler's buffers.
		t.sched.Free()
		t.sched = 0
		if err := t.newSched(need); err != nil {
			return err
		}
	}
	b.ctx.ResetAllocation()
	if err := t.sched.Alloc(b.g); err != nil {
		return err
	}
	if b.fwd != nil {
		// An input no output reads is not in the graph and gets no
		// memory; writing it would abort in ggml.
		for _, x := range b.fwd.inputs {
			if x.Buffer == 0 {
				return fmt.Errorf("train: input %q is declared but no term of the objective reads it", llamacpp.GetName(x))
			}
		}
	}
	set()
	return t.sched.Compute(b.g)
}

// score runs a no-grad pass of kind over all sequences and returns the
// per-token logprobs (and values for kindPolicy) of the masked tokens,
// indexed like Tokens.
func (t *Trainer) score(ctx context.Context, seqs []Sequence, kind graphKind) (lps, vals [][]float32, err error) {
	idx := make([]int, len(seqs))
	for i := range idx {
		idx[i] = i
	}
	lps = make([][]float32, len(seqs))
	if kind == kindPolicy {
		vals = make([][]float32, len(seqs))
	}
	for _, p := range t.plan(seqs, idx) {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		if err := t.checkPass(p, false, nil); err != nil {
			return nil, nil, err
		}
		if t.segmented(p, false) {
			if err := t.scoreSegmented(ctx, seqs, p, kind, lps, vals); err != nil {
				return nil, nil, err
			}
			continue
		}
		b, err := t.graph(p.key(kind, nil))
		if err != nil {
			return nil, nil, err
		}
		if err := t.run(b, func() { t.setCommon(b, seqs, p) }); err != nil {
			return nil, nil, err
		}
		lp := make([]float32, b.nSel)
		llamacpp.GetF32(b.logprob, lp)
		for _, si := range p.seqs {
			lps[si] = make([]float32, len(seqs[si].Tokens))
		}
		for k := range p.sel {
			si, q := p.rowOf(k)
			lps[si][q+1] = lp[k]
		}
		if kind == kindPolicy {
			v := make([]float32, b.value.Ne[0]*b.value.Ne[1])
			llamacpp.GetF32(b.value, v)
			for _, si := range p.seqs {
				vals[si] = make([]float32, len(seqs[si].Tokens))
			}
			for k := range p.sel {
				si, q := p.rowOf(k)
				r := k
				if !b.lastSelected {
					r = int(p.sel[k])
				}
				vals[si][q+1] = v[r]
			}
		}
	}
	return lps, vals, nil
}

// Score is the no-grad pass over one sequence, indexed like its Tokens
// (entry 0 is 0).
type Score struct {
	// Values are the critic's V(Tokens[:i]) at the masked tokens, 0
	// elsewhere (the estimators read them at generated tokens, and the
	// value loss trains them there).
	Values []float32
	// Logprobs are the current policy's log π(Tokens[i] | Tokens[:i]) of
	// the masked tokens, 0 elsewhere: the output layer runs on those rows
	// alone.
	Logprobs []float32
	// RefLogprobs are the base model's (adapter off), at the same
	// positions; nil from EvaluatePolicy.
	RefLogprobs []float32
}

// Evaluate scores the sequences without gradients under the current
// adapter and, with the adapter off, the base model. A sequence that
// carries RefLogprobs keeps them (copied into its Score) and costs no
// reference pass. Put the scores into the sequences
// (OldLogprobs = Logprobs, OldValues = Values, RefLogprobs = RefLogprobs)
// and Step runs no reference pass of its own.
func (t *Trainer) Evaluate(ctx context.Context, seqs []Sequence) ([]Score, error) {
	return t.evaluate(ctx, seqs, true)
}

// EvaluatePolicy is Evaluate without the reference pass (Score.RefLogprobs
// is nil): about half the cost when only the current policy matters.
func (t *Trainer) EvaluatePolicy(ctx context.Context, seqs []Sequence) ([]Score, error) {
	return t.evaluate(ctx, seqs, false)
}

func (t *Trainer) evaluate(ctx context.Context, seqs []Sequence, withRef bool) ([]Score, error) {
	if err := t.validate(seqs); err != nil {
		return nil, err
	}
	lps, values, err := t.score(ctx, seqs, kindPolicy)
	if err != nil {
		return nil, err
	}
	out := make([]Score, len(seqs))
	for i := range seqs {
		out[i] = Score{Values: values[i], Logprobs: lps[i]}
	}
	if !withRef {
		return out, nil
	}
	refs, err := t.references(ctx, seqs)
	if err != nil {
		return nil, err
	}
	for i := range seqs {
		out[i].RefLogprobs = slices.Clone(refs[i])
	}
	return out, nil
}

// references returns every sequence's base-model logprobs: its own
// RefLogprobs where it has them, the others from one no-grad pass with the
// adapter off over just those sequences.
func (t *Trainer) references(ctx context.Context, seqs []Sequence) ([][]float32, error) {
	out := make([][]float32, len(seqs))
	var miss []Sequence
	var missIdx []int
	for i, s := range seqs {
		if s.RefLogprobs != nil {
			out[i] = s.RefLogprobs
			continue
		}
		miss = append(miss, s)
		missIdx = append(missIdx, i)
	}
	if len(miss) > 0 && t.opts.Full {
		return nil, fmt.Errorf("train: sequence %d has no reference logprobs, and a full-parameter trainer keeps no frozen reference model (use EvaluatePolicy, or train the saved model with LoRA)", missIdx[0])
	}
	if len(miss) > 0 {
		lps, _, err := t.score(ctx, miss, kindBase)
		if err != nil {
			return nil, err
		}
		for k, i := range missIdx {
			out[i] = lps[k]
		}
	}
	return out, nil
}

// prepare validates seqs for obj and, when a loss reads reference logprobs,
// returns a copy of the slice (the caller's is left alone) in which every
// sequence has them.
func (t *Trainer) prepare(ctx context.Context, obj *Objective, seqs []Sequence) ([]Sequence, error) {
	if obj == nil {
		return nil, errors.New("train: nil objective")
	}
	if err := t.validate(seqs); err != nil {
		return nil, err
	}
	for i, s := range seqs {
		for _, l := range obj.losses {
			if err := l.Check(i, s); err != nil {
				return nil, err
			}
		}
	}
	if !obj.needs.Reference {
		return seqs, nil
	}
	refs, err := t.references(ctx, seqs)
	if err != nil {
		return nil, err
	}
	seqs = slices.Clone(seqs)
	for i := range seqs {
		seqs[i].RefLogprobs = refs[i]
	}
	return seqs, nil
}

// tokenWeights gives each sequence of idx the loss weight of its trained
// tokens, so that the weighted sum over the minibatch is its mean: 1/n for
// every token (LossAggregation "token", n = trained tokens of idx), or
// 1/(n_s·S) (LossAggregation "sequence", n_s = trained tokens of the
// sequence, S = sequences with any), which weighs every sequence equally
// whatever its length.
func (t *Trainer) tokenWeights(seqs []Sequence, idx []int) map[int]float32 {
	w := make(map[int]float32, len(idx))
	total, nseq := 0.0, 0
	for _, i := range idx {
		if n := weightedTokens(seqs[i]); n > 0 {
			total += n
			nseq++
		}
	}
	for _, i := range idx {
		n := weightedTokens(seqs[i])
		switch {
		case n == 0:
		case t.opts.LossAggregation == "sequence":
			w[i] = float32(1 / (n * float64(nseq)))
		default:
			w[i] = float32(1 / total)
		}
	}
	return w
}

// weightedTokens is the sum of the masked tokens' weights (their count
// without Weights).
func weightedTokens(s Sequence) float64 {
	if s.Weights == nil {
		return float64(trainedTokens(s))
	}
	n := 0.0
	for i := 1; i < len(s.Mask); i++ {
		if s.Mask[i] {
			n += float64(s.Weights[i])
		}
	}
	return n
}

// trainedTokens counts the masked tokens that have a prediction (i ≥ 1).
func trainedTokens(s Sequence) int {
	n := 0
	for i := 1; i < len(s.Mask); i++ {
		if s.Mask[i] {
			n++
		}
	}
	return n
}

// Step runs PPO on the sequences (the objective of Options.PPOLosses):
// Epochs passes over them in a seeded random order, one optimizer step per
// MiniBatch sequences (stopping early when TargetKL is set and a
// minibatch's approximate KL to the behaviour policy exceeds 1.5·TargetKL).
// Sequences without RefLogprobs get them from a no-grad pass with the
// adapter off at the start.
func (t *Trainer) Step(ctx context.Context, seqs []Sequence) (Stats, error) {
	if c := t.opts.EntropyCoefAt(t.step); c != t.ppoEntropy {
		// A new objective, and with it new graphs: the coefficient is a
		// constant of the graph. Once per call, not per optimizer step.
		obj, err := ppoObjective(t.opts, c)
		if err != nil {
			return Stats{}, err
		}
		t.ppo, t.ppoEntropy = obj, c
	}
	return t.StepWith(ctx, t.ppo, seqs)
}

// ppoObjective is Step's objective, with the entropy bonus weighted by
// entropy.
func ppoObjective(o Options, entropy float32) (*Objective, error) {
	o.EntropyCoef = entropy
	ppo := o.PPOLosses()
	if o.Full {
		// No frozen reference: drop the KL term, which Validate has
		// checked is off.
		ppo = slices.DeleteFunc(ppo, func(l Loss) bool { return l.Needs().Reference })
	}
	return NewObjective(ppo...)
}

// StepWith is Step with another objective: the same epochs, minibatches,
// early stopping (when a term measures the approximate KL) and optimizer.
// The value head is updated only when a term uses it.
func (t *Trainer) StepWith(ctx context.Context, obj *Objective, seqs []Sequence) (Stats, error) {
	var st Stats
	seqs, err := t.prepare(ctx, obj, seqs)
	if err != nil {
		return st, err
	}
	var weight float64
epochs:
	for range t.opts.Epochs {
		perm := t.rng.Perm(len(seqs))
		for start := 0; start < len(perm); start += t.opts.MiniBatch {
			mb := perm[start:min(start+t.opts.MiniBatch, len(perm))]
			n := 0
			for _, i := range mb {
				n += trainedTokens(seqs[i])
			}
			if n == 0 {
				continue
			}
			acc, err := t.accumulate(ctx, obj, seqs, mb, t.tokenWeights(seqs, mb))
			if err != nil {
				return st, err
			}
			st.Tokens += acc.tokens
			if st.Terms == nil {
				st.Terms = make([]TermStat, len(acc.terms))
				for i, ts := range acc.terms {
					st.Terms[i].Name = ts.Name
				}
			}
			if tk := float64(t.opts.TargetKL); tk > 0 && acc.approxKL > 1.5*tk {
				// The policy has moved too far from the one that sampled
				// the data: skip this update and the rest of the call.
				t.gbuf.Clear(0)
				st.EarlyStopped = true
				break epochs
			}
			gn, lr, err := t.optimize(!acc.usesValue)
			if err != nil {
				return st, err
			}
			st.Updates = append(st.Updates, Update{Step: t.step, LR: lr, GradNorm: gn, Loss: acc.loss, TrainedTokens: n})
			w := float64(n)
			weight += w
			for i, ts := range acc.terms {
				st.Terms[i].Value += w * ts.Value
			}
			st.ApproxKL += w * acc.approxKL
			st.GradNorm += gn
			st.TrainedTokens += n
			st.OptimizerSteps++
		}
	}
	if weight > 0 {
		for i := range st.Terms {
			st.Terms[i].Value /= weight
		}
		st.ApproxKL /= weight
		st.GradNorm /= float64(st.OptimizerSteps)
	}
	return st, nil
}

// accumulated is what the passes of one minibatch report.
type accumulated struct {
	loss      float64    // the objective
	terms     []TermStat // every term and metric, summed over the passes
	approxKL  float64
	usesValue bool // a term read the value head
	tokens    int  // sequence tokens processed
}

// accumulate runs forward and backward of obj over the minibatch mb (token
// weights wt, see tokenWeights), adding its gradients to the accumulators,
// and returns the sums of the terms over its passes (minibatch means). On
// error the accumulators are cleared.
func (t *Trainer) accumulate(ctx context.Context, obj *Objective, seqs []Sequence, mb []int, wt map[int]float32) (accumulated, error) {
	var acc accumulated
	fail := func(err error) (accumulated, error) {
		t.gbuf.Clear(0)
		return accumulated{}, err
	}
	for _, p := range t.plan(seqs, mb) {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		if err := t.checkPass(p, true, obj); err != nil {
			return fail(err)
		}
		if t.segmented(p, true) {
			if err := t.accumulateSegmented(ctx, obj, seqs, p, wt, &acc); err != nil {
				return fail(err)
			}
		} else {
			b, err := t.graph(p.key(kindTrain, obj))
			if err != nil {
				return fail(err)
			}
			if err := t.run(b, func() { t.setCommon(b, seqs, p); t.setTrain(b, seqs, p, wt) }); err != nil {
				return fail(err)
			}
			acc.add(b)
		}
		for _, i := range p.seqs {
			acc.tokens += len(seqs[i].Tokens)
		}
	}
	if l := acc.loss; math.IsNaN(l) || math.IsInf(l, 0) {
		return fail(fmt.Errorf("train: non-finite loss %g at optimizer step %d", l, t.step+1))
	}
	return acc, nil
}

// add adds the loss, terms and metrics of a computed training graph.
func (acc *accumulated) add(b *built) {
	read := func(x llamacpp.Tensor) float64 {
		v := make([]float32, 1)
		llamacpp.GetF32(x, v)
		return float64(v[0])
	}
	acc.loss += read(b.loss)
	if acc.terms == nil {
		for _, bt := range b.terms {
			acc.terms = append(acc.terms, TermStat{Name: bt.name})
			for _, m := range bt.term.Metrics {
				acc.terms = append(acc.terms, TermStat{Name: m.Name})
			}
		}
	}
	j := 0
	for _, bt := range b.terms {
		acc.terms[j].Value += read(bt.term.Value)
		j++
		for _, m := range bt.term.Metrics {
			acc.terms[j].Value += read(m.Value)
			j++
		}
		if bt.term.ApproxKL != nil {
			acc.approxKL += read(bt.term.ApproxKL)
		}
	}
	acc.usesValue = acc.usesValue || b.fwd.value != nil
}

// setTrain writes a training pass's inputs: the shared weight and mask rows
// the losses used, then each loss's own. Row k predicts token Pos[k]; its
// weight is its sequence's (see tokenWeights), so that the passes of a
// minibatch add up to its mean.
func (t *Trainer) setTrain(b *built, seqs []Sequence, p pass, wt map[int]float32) {
	r := p.rows(seqs, b.nSel)
	if f := b.fwd; f.weight != nil {
		llamacpp.SetF32(f.weight, r.Values(func(s, pos int) float32 {
			if ws := seqs[s].Weights; ws != nil {
				return wt[s] * ws[pos]
			}
			return wt[s]
		}))
	}
	if f := b.fwd; f.mask != nil {
		llamacpp.SetF32(f.mask, r.Values(func(int, int) float32 { return 1 }))
	}
	for _, bt := range b.terms {
		if bt.term.Set != nil {
			bt.term.Set(r)
		}
	}
}

// SFTStep takes one optimizer step on the mean cross-entropy of the masked
// tokens of seqs (all of them one minibatch) and returns that loss (before
// the step). It updates the adapter (in full mode, the weights) only, not
// the value head.
func (t *Trainer) SFTStep(ctx context.Context, seqs []Sequence) (float64, error) {
	seqs, err := t.prepare(ctx, t.sft, seqs)
	if err != nil {
		return 0, err
	}
	n := 0
	idx := make([]int, len(seqs))
	for i, s := range seqs {
		idx[i] = i
		n += trainedTokens(s)
	}
	if n == 0 {
		return 0, errors.New("train: no masked tokens to train on")
	}
	acc, err := t.accumulate(ctx, t.sft, seqs, idx, t.tokenWeights(seqs, idx))
	if err != nil {
		return 0, err
	}
	if _, _, err := t.optimize(!acc.usesValue); err != nil {
		return acc.loss, err
	}
	return acc.loss, nil
}

// AdamW constants (PyTorch defaults).
const (
	beta1   = 0.9
	beta2   = 0.999
	adamEps = 1e-8
)

// optimize clips the accumulated gradients to MaxGradNorm, takes one AdamW
// step on every parameter (but the value head when policyOnly) at the
// scheduled learning rates and clears the accumulators. It returns the
// gradient norm before clipping and the learning rate LR·LRFactor it used.
func (t *Trainer) optimize(policyOnly bool) (norm float64, lr float32, err error) {
	if err := t.run(&built{ctx: t.octx, g: t.normGraph}, func() {}); err != nil {
		return 0, 0, err
	}
	sq := make([]float32, 1)
	llamacpp.GetF32(t.normOut, sq)
	norm = math.Sqrt(float64(sq[0]))
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		t.gbuf.Clear(0)
		return norm, 0, fmt.Errorf("train: non-finite gradient norm at optimizer step %d", t.step+1)
	}
	scale := float32(1)
	if mg := float64(t.opts.MaxGradNorm); mg > 0 && norm > mg {
		scale = float32(mg / norm)
	}
	t.step++
	b1h := float32(1 / (1 - math.Pow(beta1, float64(t.step))))
	b2h := float32(1 / (1 - math.Pow(beta2, float64(t.step))))
	f := t.opts.LRFactor(t.step)
	lr = float32(float64(t.opts.LR) * f)
	valueLR := float32(float64(t.opts.ValueLR) * f)
	for g, p := range [nGroups][2]float32{
		groupAdapter: {lr, t.opts.WeightDecay},
		groupValue:   {valueLR, t.opts.WeightDecay},
		groupDecay:   {lr, t.opts.WeightDecay},
		groupNoDecay: {lr, 0},
	} {
		llamacpp.SetF32(t.adamPar[g], []float32{p[0], beta1, beta2, adamEps, p[1], b1h, b2h})
	}
	llamacpp.SetF32(t.clipScale, []float32{scale})
	g := t.optGraph
	if policyOnly {
		g = t.optGraphPolicy
	}
	err = t.run(&built{ctx: t.octx, g: g}, func() {})
	t.gbuf.Clear(0)
	return norm, lr, err
}

// SetLearningRates changes the base learning rates of the adapter (or, in
// full mode, the weights) and of the value head from the next optimizer step
// on; Options.LRSchedule still scales them. The checkpoint does not record
// them.
func (t *Trainer) SetLearningRates(lr, valueLR float32) error {
	if !(lr > 0) || !(valueLR > 0) {
		return fmt.Errorf("train: learning rates must be > 0 (lr %g, value lr %g)", lr, valueLR)
	}
	t.opts.LR, t.opts.ValueLR = lr, valueLR
	return nil
}

// Steps returns the number of optimizer steps taken so far.
func (t *Trainer) Steps() int { return t.step }

// Vocab is the model's vocabulary size.
func (t *Trainer) Vocab() int { return t.hp.nVocab }

// Backend names the primary compute backend ("CPU", "CUDA0", …).
func (t *Trainer) Backend() string { return t.backends[0].Name() }

// TrainableParams is the number of trained values (adapter or, in full
// mode, the model's weights; and the value head).
func (t *Trainer) TrainableParams() int {
	n := 0
	for _, p := range t.params {
		n += p.n
	}
	return n
}

// Arch is the model's architecture name.
func (t *Trainer) Arch() string { return t.hp.arch }
