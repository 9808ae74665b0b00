package train

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"

	"github.com/omar-selfplay/omar/llamacpp"
)

// hparams are the architecture hyper-parameters read from the GGUF.
type hparams struct {
	arch                         string
	nEmbd, nLayer, nFF           int
	nHead, nHeadKV, headDim      int
	nRot, nVocab, nCtx           int
	eps, ropeBase, ropeFreqScale float32
	kqScale                      float32 // attention.scale, or 1/√head_dim
	ropeMode                     int
	qkNorm, qkvBias              bool
}

// supported architectures and what distinguishes them in the graph.
var archs = map[string]struct {
	ropeMode        int
	qkNorm, qkvBias bool
}{
	"llama": {0, false, false},
	"qwen2": {llamacpp.RopeTypeNeox, false, true},
	"qwen3": {llamacpp.RopeTypeNeox, true, false},
}

func readHparams(f *llamacpp.GGUFFile) (hparams, error) {
	var h hparams
	arch, err := f.String("general.architecture")
	if err != nil {
		return h, err
	}
	a, ok := archs[arch]
	if !ok {
		return h, fmt.Errorf("train: architecture %q is not supported (want llama, qwen2 or qwen3)", arch)
	}
	h.arch, h.ropeMode, h.qkNorm, h.qkvBias = arch, a.ropeMode, a.qkNorm, a.qkvBias
	geti := func(key string, def int) (int, error) {
		if !f.Has(arch+"."+key) && def >= 0 {
			return def, nil
		}
		v, err := f.Int(arch + "." + key)
		return int(v), err
	}
	getf := func(key string, def float32) (float32, error) {
		if !f.Has(arch + "." + key) {
			return def, nil
		}
		v, err := f.Float(arch + "." + key)
		return float32(v), err
	}
	for _, p := range []struct {
		dst *int
		key string
		def int
	}{
		{&h.nEmbd, "embedding_length", -1},
		{&h.nLayer, "block_count", -1},
		{&h.nFF, "feed_forward_length", -1},
		{&h.nHead, "attention.head_count", -1},
		{&h.nCtx, "context_length", -1},
	} {
		if *p.dst, err = geti(p.key, p.def); err != nil {
			return h, err
		}
	}
	if h.nHead < 1 || h.nEmbd < 1 || h.nLayer < 1 || h.nFF < 1 {
		return h, fmt.Errorf("train: invalid hyper-parameters %+v", h)
	}
	if h.nHeadKV, err = geti("attention.head_count_kv", h.nHead); err != nil {
		return h, err
	}
	if h.headDim, err = geti("attention.key_length", h.nEmbd/h.nHead); err != nil {
		return h, err
	}
	if v, err := geti("attention.value_length", h.headDim); err != nil || v != h.headDim {
		return h, fmt.Errorf("train: value head size %d differs from key head size %d (unsupported)", v, h.headDim)
	}
	if h.nRot, err = geti("rope.dimension_count", h.headDim); err != nil {
		return h, err
	}
	if h.nHeadKV < 1 || h.nHead%h.nHeadKV != 0 {
		return h, fmt.Errorf("train: %d heads not a multiple of %d kv heads", h.nHead, h.nHeadKV)
	}
	if h.eps, err = getf("attention.layer_norm_rms_epsilon", 1e-5); err != nil {
		return h, err
	}
	if h.ropeBase, err = getf("rope.freq_base", 10000); err != nil {
		return h, err
	}
	if h.kqScale, err = getf("attention.scale", 0); err != nil {
		return h, err
	}
	if h.kqScale == 0 {
		h.kqScale = float32(1 / math.Sqrt(float64(h.headDim)))
	}
	h.ropeFreqScale = 1
	if f.Has(arch + ".rope.scaling.type") {
		typ, _ := f.String(arch + ".rope.scaling.type")
		switch typ {
		case "none", "":
		case "linear":
			fac, err := getf("rope.scaling.factor", 1)
			if err != nil {
				return h, err
			}
			if fac > 0 {
				h.ropeFreqScale = 1 / fac
			}
		default:
			return h, fmt.Errorf("train: rope scaling %q is not supported", typ)
		}
	}
	return h, nil
}

// weights are the frozen base tensors (F32, in the backend's memory).
type weights struct {
	tokEmbd, outNorm, output llamacpp.Tensor
	ropeFreqs                llamacpp.Tensor // llama 3's frequency factors, or nil
	layers                   []layerWeights
}

type layerWeights struct {
	attnNorm, ffnNorm llamacpp.Tensor
	mat               map[string]llamacpp.Tensor // attn_q … ffn_down, [n_in, n_out]
	bq, bk, bv        llamacpp.Tensor            // qwen2
	qNorm, kNorm      llamacpp.Tensor            // qwen3
}

// loadWeights creates the base tensors in ctx (no data yet) and returns them
// with the list of (tensor, directory entry) pairs to fill after allocation.
func declareWeights(ctx llamacpp.Context, h *hparams, dir map[string]llamacpp.GGUFTensorInfo) (weights, []fill, error) {
	var w weights
	var fills []fill
	get := func(name string, ne ...int64) (llamacpp.Tensor, error) {
		info, ok := dir[name]
		if !ok {
			return nil, fmt.Errorf("train: tensor %s missing from the model", name)
		}
		for i, n := range ne {
			if info.Ne[i] != n {
				return nil, fmt.Errorf("train: tensor %s has shape %v, want %v", name, info.Ne, ne)
			}
		}
		t := llamacpp.SetName(ctx.NewTensor(llamacpp.TypeF32, ne...), name)
		fills = append(fills, fill{t, info})
		return t, nil
	}
	var err error
	emb, ok := dir["token_embd.weight"]
	if !ok {
		return w, nil, fmt.Errorf("train: tensor token_embd.weight missing from the model")
	}
	h.nVocab = int(emb.Ne[1])
	E, V := int64(h.nEmbd), int64(h.nVocab)
	if w.tokEmbd, err = get("token_embd.weight", E, V); err != nil {
		return w, nil, err
	}
	if w.outNorm, err = get("output_norm.weight", E); err != nil {
		return w, nil, err
	}
	if _, ok := dir["output.weight"]; ok {
		if w.output, err = get("output.weight", E, V); err != nil {
			return w, nil, err
		}
	} else {
		w.output = w.tokEmbd // tied embeddings
	}
	if _, ok := dir["rope_freqs.weight"]; ok {
		if w.ropeFreqs, err = get("rope_freqs.weight", int64(h.nRot/2)); err != nil {
			return w, nil, err
		}
	}
	q, kv := int64(h.nHead*h.headDim), int64(h.nHeadKV*h.headDim)
	F := int64(h.nFF)
	shapes := map[string][2]int64{
		"attn_q": {E, q}, "attn_k": {E, kv}, "attn_v": {E, kv}, "attn_output": {q, E},
		"ffn_gate": {E, F}, "ffn_up": {E, F}, "ffn_down": {F, E},
	}
	for l := range h.nLayer {
		p := fmt.Sprintf("blk.%d.", l)
		lw := layerWeights{mat: map[string]llamacpp.Tensor{}}
		if lw.attnNorm, err = get(p+"attn_norm.weight", E); err != nil {
			return w, nil, err
		}
		if lw.ffnNorm, err = get(p+"ffn_norm.weight", E); err != nil {
			return w, nil, err
		}
		for _, m := range AllModules {
			s := shapes[m]
			if lw.mat[m], err = get(p+m+".weight", s[0], s[1]); err != nil {
				return w, nil, err
			}
		}
		if h.qkvBias {
			if lw.bq, err = get(p+"attn_q.bias", q); err != nil {
				return w, nil, err
			}
			if lw.bk, err = get(p+"attn_k.bias", kv); err != nil {
				return w, nil, err
			}
			if lw.bv, err = get(p+"attn_v.bias", kv); err != nil {
				return w, nil, err
			}
		}
		if h.qkNorm {
			if lw.qNorm, err = get(p+"attn_q_norm.weight", int64(h.headDim)); err != nil {
				return w, nil, err
			}
			if lw.kNorm, err = get(p+"attn_k_norm.weight", int64(h.headDim)); err != nil {
				return w, nil, err
			}
		}
		w.layers = append(w.layers, lw)
	}
	return w, fills, nil
}

// fill is a base tensor and where its data is in the file.
type fill struct {
	t    llamacpp.Tensor
	info llamacpp.GGUFTensorInfo
}

// readF32 reads a tensor's data from the model file as F32. F16 and BF16
// are converted in Go; quantized types are dequantized by ggml on the CPU
// (get_rows over every row). The trainer keeps frozen weights in F32: the
// backward pass multiplies by them (OUT_PROD), which CUDA only runs in F32,
// and dequantizing once is cheaper than on every pass.
func readF32(f *os.File, info llamacpp.GGUFTensorInfo, cpu llamacpp.Backend) ([]float32, error) {
	n := int64(1)
	for _, d := range info.Ne {
		n *= max(d, 1)
	}
	raw := make([]byte, info.Size)
	if _, err := f.ReadAt(raw, info.Offset); err != nil {
		return nil, fmt.Errorf("train: read %s: %w", info.Name, err)
	}
	out := make([]float32, n)
	switch info.Type {
	case llamacpp.TypeF32, llamacpp.TypeF16, llamacpp.TypeBF16:
		elem := int64(4)
		if info.Type != llamacpp.TypeF32 {
			elem = 2
		}
		if info.Size != n*elem {
			return nil, fmt.Errorf("train: tensor %s: %d bytes for %d elements", info.Name, info.Size, n)
		}
	default:
		return dequantize(cpu, info, raw)
	}
	switch info.Type {
	case llamacpp.TypeF32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
	case llamacpp.TypeF16:
		for i := range out {
			out[i] = f16ToF32(binary.LittleEndian.Uint16(raw[2*i:]))
		}
	case llamacpp.TypeBF16:
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*i:])) << 16)
		}
	}
	return out, nil
}

// dequantize converts a quantized matrix [ne0, rows] to F32 with ggml's own
// kernels: get_rows of every row on the CPU backend.
func dequantize(cpu llamacpp.Backend, info llamacpp.GGUFTensorInfo, raw []byte) ([]float32, error) {
	ne0 := info.Ne[0]
	rows := int64(1)
	for _, d := range info.Ne[1:] {
		rows *= max(d, 1)
	}
	rs, err := llamacpp.RowSize(info.Type, ne0)
	if err != nil {
		return nil, fmt.Errorf("train: tensor %s: %w", info.Name, err)
	}
	if int64(rs)*rows != info.Size {
		return nil, fmt.Errorf("train: tensor %s: %d bytes for %d rows of %d %s values", info.Name, info.Size, rows, ne0, llamacpp.TypeName(info.Type))
	}
	ctx, err := llamacpp.NewContext(4, 1, 8, false)
	if err != nil {
		return nil, err
	}
	defer ctx.Free()
	q := ctx.NewTensor(info.Type, ne0, rows)
	idx := ctx.NewTensor(llamacpp.TypeI32, rows)
	out := ctx.GetRows(q, idx)
	g := ctx.NewGraph(8, false)
	g.BuildForward(out)
	buf, err := cpu.AllocContextTensors(ctx)
	if err != nil {
		return nil, fmt.Errorf("train: dequantize %s: %w", info.Name, err)
	}
	defer buf.Free()
	llamacpp.SetBytes(q, raw)
	ids := make([]int32, rows)
	for i := range ids {
		ids[i] = int32(i)
	}
	llamacpp.SetI32(idx, ids)
	if err := cpu.Compute(g); err != nil {
		return nil, fmt.Errorf("train: dequantize %s: %w", info.Name, err)
	}
	data := make([]float32, ne0*rows)
	llamacpp.GetF32(out, data)
	return data, nil
}

func f16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		mant &= 0x3ff
		return math.Float32frombits(sign | e<<23 | mant<<13)
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}
