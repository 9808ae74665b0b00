package train

import (
	"fmt"
	"math"

	"github.com/omar-selfplay/omar/gguf"
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

// readHparams reads the architecture's hyper-parameters from the model's
// metadata (the pure-Go reader of package gguf: the same parse that
// inference's model check does).
func readHparams(f *gguf.File) (hparams, error) {
	var h hparams
	arch, err := f.String("general.architecture")
	if err != nil {
		return h, fmt.Errorf("train: %w", err)
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
		v, err := f.Uint(arch + "." + key)
		if err != nil {
			return 0, fmt.Errorf("train: %w", err)
		}
		if v > math.MaxInt32 {
			return 0, fmt.Errorf("train: %s.%s = %d is out of range", arch, key, v)
		}
		return int(v), nil
	}
	getf := func(key string, def float32) (float32, error) {
		if !f.Has(arch + "." + key) {
			return def, nil
		}
		v, err := f.Float(arch + "." + key)
		if err != nil {
			return 0, fmt.Errorf("train: %w", err)
		}
		return float32(v), nil
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

// weights are the frozen base tensors, in the backend's memory: F32, or
// the file's type for matrices and embeddings (see keepsType).
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

// declareWeights creates the base tensors in ctx (no data yet) and returns
// them with the list of (tensor, directory entry) pairs to fill after
// allocation. Matrices and embeddings whose file type keep accepts keep
// it; every other tensor is F32.
func declareWeights(ctx llamacpp.Context, h *hparams, dir map[string]gguf.TensorInfo, keep func(gguf.TensorType) bool) (weights, []fill, error) {
	var w weights
	var fills []fill
	get := func(name string, ne ...int64) (llamacpp.Tensor, error) {
		info, ok := dir[name]
		if !ok {
			return nil, fmt.Errorf("train: tensor %s missing from the model", name)
		}
		if !shapeIs(info.Shape, ne) {
			return nil, fmt.Errorf("train: tensor %s has shape %v, want %v", name, info.Shape, ne)
		}
		typ := llamacpp.TypeF32
		if len(ne) == 2 && keep != nil && keep(info.Type) {
			// Whole blocks per row, as ggml requires: gguf.Open
			// refuses a file whose rows are not.
			typ = llamacpp.Type(info.Type) // gguf and ggml share enum ggml_type
		}
		t := llamacpp.SetName(ctx.NewTensor(typ, ne...), name)
		fills = append(fills, fill{t, info})
		return t, nil
	}
	var err error
	emb, ok := dir["token_embd.weight"]
	if !ok {
		return w, nil, fmt.Errorf("train: tensor token_embd.weight missing from the model")
	}
	if len(emb.Shape) < 2 || emb.Shape[1] > math.MaxInt32 {
		return w, nil, fmt.Errorf("train: tensor token_embd.weight has shape %v, want [%d n_vocab]", emb.Shape, h.nEmbd)
	}
	h.nVocab = int(emb.Shape[1])
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

// shapeIs reports whether a tensor of shape got (ggml ne order) has shape
// want; missing trailing dimensions count as 1 on either side, as in ggml.
func shapeIs(got []uint64, want []int64) bool {
	for i := range max(len(got), len(want)) {
		g, w := uint64(1), int64(1)
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if w < 0 || g != uint64(w) {
			return false
		}
	}
	return true
}

// fill is a base tensor and its entry in the model file's directory.
type fill struct {
	t    llamacpp.Tensor
	info gguf.TensorInfo
}

// keepsType reports whether the trainer can hold a frozen matrix of type
// typ as it is, rather than in F32: ggml's CPU kernels multiply by it
// (mul_mat), look rows up in it (get_rows) and, for the input gradient
// without transposed copies (outProd), run out_prod on it, which has
// kernels for the block formats and F32 only.
func keepsType(typ gguf.TensorType, outProd bool) bool {
	switch typ {
	case gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1, gguf.Q8_0,
		gguf.Q2_K, gguf.Q3_K, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K,
		gguf.IQ2_XXS, gguf.IQ2_XS, gguf.IQ3_XXS, gguf.IQ1_S, gguf.IQ1_M,
		gguf.IQ4_NL, gguf.IQ4_XS, gguf.IQ3_S, gguf.IQ2_S,
		gguf.TQ1_0, gguf.TQ2_0, gguf.MXFP4:
		return true
	case gguf.F16, gguf.BF16:
		return !outProd
	}
	return false
}

// readF32 reads a tensor's data from the model file as F32. F32, F16 and
// BF16 are read and converted by package gguf (the project's one GGUF
// reader and one half-precision conversion); quantized types are
// dequantized by ggml on the CPU (get_rows over every row), because only
// ggml has the kernels for its dozens of block formats. F32 is what full
// training updates, what CUDA's out_prod multiplies by, and what the
// transposed copies and SaveModel's merge are made from.
// raw, when not nil, is the tensor's bytes already read from f.
func readF32(f *gguf.File, info gguf.TensorInfo, raw []byte, cpu llamacpp.Backend) ([]float32, error) {
	switch info.Type {
	case gguf.F32, gguf.F16, gguf.BF16:
		data, err := f.TensorFloat32(info.Name)
		if err != nil {
			return nil, fmt.Errorf("train: %w", err)
		}
		return data, nil
	}
	if raw == nil {
		var err error
		if raw, err = f.TensorBytes(info.Name); err != nil {
			return nil, fmt.Errorf("train: %w", err)
		}
	}
	return dequantize(cpu, info, raw)
}

// dequantize converts a quantized matrix [ne0, rows…] to F32 with ggml's own
// kernels: get_rows of every row on the CPU backend.
func dequantize(cpu llamacpp.Backend, info gguf.TensorInfo, raw []byte) ([]float32, error) {
	if len(info.Shape) == 0 {
		return nil, fmt.Errorf("train: tensor %s has no shape", info.Name)
	}
	ne0 := int64(info.Shape[0])
	rows := int64(1)
	for _, d := range info.Shape[1:] {
		rows *= int64(d)
	}
	typ := llamacpp.Type(info.Type) // gguf and ggml share enum ggml_type
	rs, err := llamacpp.RowSize(typ, ne0)
	if err != nil {
		return nil, fmt.Errorf("train: tensor %s: %w", info.Name, err)
	}
	// gguf sized the tensor from its own block table; ggml must agree, or
	// the kernels would read past the data.
	if int64(rs)*rows != int64(len(raw)) {
		return nil, fmt.Errorf("train: tensor %s: %d bytes for %d rows of %d %v values (ggml rows are %d bytes)", info.Name, len(raw), rows, ne0, info.Type, rs)
	}
	if rows == 0 || ne0 == 0 {
		return []float32{}, nil
	}
	ctx, err := llamacpp.NewContext(4, 1, 8, false)
	if err != nil {
		return nil, err
	}
	defer ctx.Free()
	q := ctx.NewTensor(typ, ne0, rows)
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
