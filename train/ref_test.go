package train

import (
	"fmt"
	"math"
	"testing"

	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/llamacpp"
)

// refModel is a plain-Go forward pass of the three architectures, written
// from llama.cpp's graphs (src/models/{llama,qwen2,qwen3}.cpp) with no
// batching, padding or ggml, to check the training graph against.
type refModel struct {
	hp      hparams
	tensors map[string][]float32
	// lora[name] = (A, B) for "blk.N.module"; scale alpha/r.
	lora  map[string][2][]float32
	rank  int
	scale float32
	vhW   []float32
	vhB   float32
}

func loadRef(t *testing.T, path string, tr *Trainer) *refModel {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := &refModel{hp: tr.hp, tensors: map[string][]float32{}, lora: map[string][2][]float32{}}
	for _, fl := range tr.fillNames() {
		d, err := f.TensorFloat32(fl)
		if err != nil {
			t.Fatal(err)
		}
		r.tensors[fl] = d
	}
	r.rank = tr.opts.LoRARank
	r.scale = tr.opts.LoRAAlpha / float32(tr.opts.LoRARank)
	for _, l := range tr.loras {
		_, _, a := tr.paramData(l.pa)
		_, _, b := tr.paramData(l.pb)
		r.lora[fmt.Sprintf("blk.%d.%s", l.layer, l.module)] = [2][]float32{a, b}
	}
	r.vhW = make([]float32, tr.hp.nEmbd)
	llamacpp.GetF32(tr.vhW, r.vhW)
	vb := make([]float32, 1)
	llamacpp.GetF32(tr.vhB, vb)
	r.vhB = vb[0]
	return r
}

// matvec computes y = W·x for a ggml matrix W [nIn, nOut].
func matvec(w []float32, x []float32, nOut int) []float32 {
	nIn := len(x)
	y := make([]float32, nOut)
	for o := range nOut {
		var s float64
		row := w[o*nIn : (o+1)*nIn]
		for i, v := range row {
			s += float64(v) * float64(x[i])
		}
		y[o] = float32(s)
	}
	return y
}

func rmsNorm(x, g []float32, eps float32) []float32 {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	inv := 1 / math.Sqrt(s/float64(len(x))+float64(eps))
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = float32(float64(v)*inv) * g[i]
	}
	return y
}

func (r *refModel) mm(layer int, module string, x []float32, nOut int) []float32 {
	name := fmt.Sprintf("blk.%d.%s", layer, module)
	y := matvec(r.tensors[name+".weight"], x, nOut)
	if ab, ok := r.lora[name]; ok {
		ax := matvec(ab[0], x, r.rank)
		bax := matvec(ab[1], ax, nOut)
		for i := range y {
			y[i] += r.scale * bax[i]
		}
	}
	return y
}

// rope rotates one head in place at position p.
func (r *refModel) rope(x []float32, p int) {
	h := r.hp
	factors := r.tensors["rope_freqs.weight"]
	for i := 0; i < h.nRot/2; i++ {
		theta := float64(p) * float64(h.ropeFreqScale) * math.Pow(float64(h.ropeBase), -2*float64(i)/float64(h.nRot))
		if factors != nil {
			theta /= float64(factors[i])
		}
		c, s := math.Cos(theta), math.Sin(theta)
		a, b := 2*i, 2*i+1
		if h.ropeMode == llamacpp.RopeTypeNeox {
			a, b = i, i+h.nRot/2
		}
		x0, x1 := float64(x[a]), float64(x[b])
		x[a] = float32(x0*c - x1*s)
		x[b] = float32(x0*s + x1*c)
	}
}

// forward returns per position the logits and the value.
func (r *refModel) forward(tokens []int32) (logits [][]float32, values []float32) {
	h := r.hp
	E, D, H, Hkv := h.nEmbd, h.headDim, h.nHead, h.nHeadKV
	n := len(tokens)
	emb := r.tensors["token_embd.weight"]
	x := make([][]float32, n)
	for p, tok := range tokens {
		x[p] = append([]float32(nil), emb[int(tok)*E:(int(tok)+1)*E]...)
	}
	for l := range h.nLayer {
		pre := fmt.Sprintf("blk.%d.", l)
		qs, ks, vs := make([][]float32, n), make([][]float32, n), make([][]float32, n)
		for p := range n {
			cur := rmsNorm(x[p], r.tensors[pre+"attn_norm.weight"], h.eps)
			q := r.mm(l, "attn_q", cur, H*D)
			k := r.mm(l, "attn_k", cur, Hkv*D)
			v := r.mm(l, "attn_v", cur, Hkv*D)
			if h.qkvBias {
				for i, b := range r.tensors[pre+"attn_q.bias"] {
					q[i] += b
				}
				for i, b := range r.tensors[pre+"attn_k.bias"] {
					k[i] += b
				}
				for i, b := range r.tensors[pre+"attn_v.bias"] {
					v[i] += b
				}
			}
			for hd := range H {
				head := q[hd*D : (hd+1)*D]
				if h.qkNorm {
					copy(head, rmsNorm(head, r.tensors[pre+"attn_q_norm.weight"], h.eps))
				}
				r.rope(head, p)
			}
			for hd := range Hkv {
				head := k[hd*D : (hd+1)*D]
				if h.qkNorm {
					copy(head, rmsNorm(head, r.tensors[pre+"attn_k_norm.weight"], h.eps))
				}
				r.rope(head, p)
			}
			qs[p], ks[p], vs[p] = q, k, v
		}
		scale := 1 / math.Sqrt(float64(D))
		for p := range n {
			att := make([]float32, H*D)
			for hd := range H {
				kvh := hd / (H / Hkv)
				q := qs[p][hd*D : (hd+1)*D]
				sc := make([]float64, p+1)
				mx := math.Inf(-1)
				for k := 0; k <= p; k++ {
					var s float64
					for d := range D {
						s += float64(q[d]) * float64(ks[k][kvh*D+d])
					}
					sc[k] = s * scale
					mx = math.Max(mx, sc[k])
				}
				var z float64
				for k := range sc {
					sc[k] = math.Exp(sc[k] - mx)
					z += sc[k]
				}
				for d := range D {
					var s float64
					for k := range sc {
						s += sc[k] / z * float64(vs[k][kvh*D+d])
					}
					att[hd*D+d] = float32(s)
				}
			}
			o := r.mm(l, "attn_output", att, E)
			for i := range o {
				x[p][i] += o[i]
			}
			cur := rmsNorm(x[p], r.tensors[pre+"ffn_norm.weight"], h.eps)
			g := r.mm(l, "ffn_gate", cur, h.nFF)
			u := r.mm(l, "ffn_up", cur, h.nFF)
			for i := range g {
				s := float64(g[i])
				g[i] = float32(s/(1+math.Exp(-s))) * u[i]
			}
			d := r.mm(l, "ffn_down", g, E)
			for i := range d {
				x[p][i] += d[i]
			}
		}
	}
	out := r.tensors["output.weight"]
	if out == nil {
		out = emb
	}
	logits = make([][]float32, n)
	values = make([]float32, n)
	for p := range n {
		hn := rmsNorm(x[p], r.tensors["output_norm.weight"], h.eps)
		logits[p] = matvec(out, hn, h.nVocab)
		var v float64
		for i := range hn {
			v += float64(r.vhW[i]) * float64(hn[i])
		}
		values[p] = float32(v) + r.vhB
	}
	return logits, values
}

// logprobs converts reference logits into the trainer's per-token
// convention (entry i: log p(tokens[i] | tokens[:i]), entry 0 = 0).
func refLogprobs(logits [][]float32, tokens []int32) []float32 {
	out := make([]float32, len(tokens))
	for i := 1; i < len(tokens); i++ {
		row := logits[i-1]
		mx := math.Inf(-1)
		for _, v := range row {
			mx = math.Max(mx, float64(v))
		}
		var z float64
		for _, v := range row {
			z += math.Exp(float64(v) - mx)
		}
		out[i] = float32(float64(row[tokens[i]]) - mx - math.Log(z))
	}
	return out
}
