package train

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"

	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/internal/atomicfile"
	"github.com/omar-selfplay/omar/llamacpp"
)

// Checkpoint files inside the directory given to SaveCheckpoint.
const (
	CheckpointFile = "trainer.ckpt" // parameters, AdamW moments, step, RNG, caller's blob
	AdapterFile    = "adapter.gguf" // the LoRA adapter alone, for llama.cpp (ModelFile in full mode)
)

var ckptMagic = []byte("OMARCKPT")

const ckptVersion = 1

// ckptHeader is the JSON header of a checkpoint. It pins everything that
// decides the parameter layout, so a checkpoint cannot be loaded into a
// differently shaped trainer.
type ckptHeader struct {
	Arch     string   `json:"arch"`
	Full     bool     `json:"full,omitempty"` // every weight is a parameter (no LoRA fields)
	Layers   int      `json:"layers"`
	Embd     int      `json:"embd"`
	Vocab    int      `json:"vocab"`
	Rank     int      `json:"lora_rank"`
	Alpha    float32  `json:"lora_alpha"`
	Modules  []string `json:"lora_modules"`
	Step     int      `json:"step"`
	RNG      []byte   `json:"rng"`
	Params   []string `json:"params"`
	Sizes    []int    `json:"sizes"`
	ExtraLen int      `json:"extra_len"`
}

// SaveCheckpoint writes the trainer's state to dir (created if needed):
// trainer.ckpt holds the adapter (in full mode every weight of the model),
// the value head, the AdamW moments, the optimizer step (which is also the
// learning-rate schedule's position) and the shuffling RNG, followed by
// extra — an opaque blob for the caller's own state (sampler seeds,
// estimator baselines, scenario cursor, data order; JSON by convention) —
// and a SHA-256 of all of it. adapter.gguf is the adapter alone; in full
// mode model.gguf is the trained model (F32, SaveModel) instead. Both files
// are written atomically; the same state gives the same bytes.
func (t *Trainer) SaveCheckpoint(dir string, extra []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	rng, err := t.pcg.MarshalBinary()
	if err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	h := ckptHeader{
		Arch: t.hp.arch, Layers: t.hp.nLayer, Embd: t.hp.nEmbd, Vocab: t.hp.nVocab,
		Step: t.step, RNG: rng, ExtraLen: len(extra),
	}
	if t.opts.Full {
		h.Full = true
	} else {
		h.Rank, h.Alpha, h.Modules = t.opts.LoRARank, t.opts.LoRAAlpha, t.moduleList()
	}
	for _, p := range t.params {
		h.Params = append(h.Params, p.name)
		h.Sizes = append(h.Sizes, p.n)
	}
	hj, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	var buf bytes.Buffer
	buf.Write(ckptMagic)
	binary.Write(&buf, binary.LittleEndian, uint32(ckptVersion))
	binary.Write(&buf, binary.LittleEndian, uint32(len(hj)))
	buf.Write(hj)
	for _, p := range t.params {
		for _, src := range []llamacpp.Tensor{p.t, p.m, p.v} {
			data := make([]float32, p.n)
			llamacpp.GetF32(src, data)
			b := make([]byte, 4*len(data))
			for i, v := range data {
				binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
			}
			buf.Write(b)
		}
	}
	buf.Write(extra)
	sum := sha256.Sum256(buf.Bytes())
	buf.Write(sum[:])
	if err := writeAtomic(filepath.Join(dir, CheckpointFile), buf.Bytes()); err != nil {
		return err
	}
	if t.opts.Full {
		return t.SaveModel(filepath.Join(dir, ModelFile), gguf.F32)
	}
	return t.SaveAdapter(filepath.Join(dir, AdapterFile))
}

// LoadCheckpoint restores the state SaveCheckpoint wrote to dir and returns
// the caller's blob. A truncated, modified or foreign file, or one written by
// a trainer of another shape, is an error and leaves the trainer unchanged.
func (t *Trainer) LoadCheckpoint(dir string) ([]byte, error) {
	path := filepath.Join(dir, CheckpointFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("train: load checkpoint: %w", err)
	}
	corrupt := func(why string) error { return fmt.Errorf("train: checkpoint %s is corrupt: %s", path, why) }
	if len(data) < len(ckptMagic)+8+sha256.Size || !bytes.Equal(data[:len(ckptMagic)], ckptMagic) {
		return nil, corrupt("not an omar trainer checkpoint")
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if want := sha256.Sum256(body); !bytes.Equal(sum, want[:]) {
		return nil, corrupt("checksum mismatch (truncated or modified)")
	}
	off := len(ckptMagic)
	if v := binary.LittleEndian.Uint32(body[off:]); v != ckptVersion {
		return nil, fmt.Errorf("train: checkpoint %s has version %d, want %d", path, v, ckptVersion)
	}
	hl := int(binary.LittleEndian.Uint32(body[off+4:]))
	off += 8
	if hl > len(body)-off {
		return nil, corrupt("header length out of range")
	}
	var h ckptHeader
	if err := json.Unmarshal(body[off:off+hl], &h); err != nil {
		return nil, corrupt("bad header: " + err.Error())
	}
	off += hl
	if h.Arch != t.hp.arch || h.Layers != t.hp.nLayer || h.Embd != t.hp.nEmbd || h.Vocab != t.hp.nVocab {
		return nil, fmt.Errorf("train: checkpoint %s is for a %s model with %d layers, embedding %d, vocabulary %d; this trainer has %s, %d, %d, %d",
			path, h.Arch, h.Layers, h.Embd, h.Vocab, t.hp.arch, t.hp.nLayer, t.hp.nEmbd, t.hp.nVocab)
	}
	if h.Full != t.opts.Full {
		mode := map[bool]string{false: "LoRA", true: "full-parameter"}
		return nil, fmt.Errorf("train: checkpoint %s is of a %s trainer; this trainer is %s", path, mode[h.Full], mode[t.opts.Full])
	}
	if !h.Full && (h.Rank != t.opts.LoRARank || h.Alpha != t.opts.LoRAAlpha || !slices.Equal(h.Modules, t.moduleList())) {
		return nil, fmt.Errorf("train: checkpoint %s has LoRA rank %d alpha %g modules %v; this trainer has rank %d alpha %g modules %v",
			path, h.Rank, h.Alpha, h.Modules, t.opts.LoRARank, t.opts.LoRAAlpha, t.moduleList())
	}
	if len(h.Params) != len(t.params) || len(h.Sizes) != len(t.params) {
		return nil, corrupt("parameter list does not match")
	}
	need := 0
	for i, p := range t.params {
		if h.Params[i] != p.name || h.Sizes[i] != p.n {
			return nil, corrupt(fmt.Sprintf("parameter %d is %s[%d], want %s[%d]", i, h.Params[i], h.Sizes[i], p.name, p.n))
		}
		need += 3 * 4 * p.n
	}
	if h.ExtraLen < 0 || len(body)-off != need+h.ExtraLen {
		return nil, corrupt("size does not match the header")
	}
	pcg := new(rand.PCG)
	if err := pcg.UnmarshalBinary(h.RNG); err != nil {
		return nil, corrupt("bad RNG state: " + err.Error())
	}
	// Everything is validated: now change the trainer.
	for _, p := range t.params {
		for _, dst := range []llamacpp.Tensor{p.t, p.m, p.v} {
			vals := make([]float32, p.n)
			for i := range vals {
				vals[i] = math.Float32frombits(binary.LittleEndian.Uint32(body[off+4*i:]))
			}
			llamacpp.SetF32(dst, vals)
			off += 4 * p.n
		}
	}
	*t.pcg = *pcg
	t.step = h.Step
	t.gbuf.Clear(0)
	return slices.Clone(body[off:]), nil
}

// moduleList is the adapted modules in canonical order.
func (t *Trainer) moduleList() []string {
	var out []string
	for _, m := range AllModules {
		if slices.Contains(t.opts.LoRAModules, m) {
			out = append(out, m)
		}
	}
	return out
}

func writeAtomic(path string, data []byte) error {
	if err := atomicfile.Write(path, data, 0o644); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	return nil
}
