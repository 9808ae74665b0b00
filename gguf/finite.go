package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// NonFiniteError names a tensor holding a NaN or an infinity.
type NonFiniteError struct {
	Tensor string
	// Element is the index of the first non-finite value (for quantized
	// tensors, the first element of the block whose scale is non-finite).
	Element uint64
}

func (e *NonFiniteError) Error() string {
	return fmt.Sprintf("gguf: tensor %q holds a non-finite weight (NaN or ±Inf) at element %d: the model is corrupt, and llama.cpp's samplers abort on the logits it would give", e.Tensor, e.Element)
}

// finiteCheck says where a tensor type's blocks keep values that can be
// non-finite: float elements, or the f16 scales of quantized blocks
// (offsets in bytes within a block). A quantized block's integer quanta
// are always finite; a non-finite scale makes the whole block so.
type finiteCheck struct {
	f32, f16, bf16 bool
	scales         []int // byte offsets of f16 scales within one block
}

var finiteChecks = map[TensorType]finiteCheck{
	F32:  {f32: true},
	F16:  {f16: true},
	BF16: {bf16: true},
	Q4_0: {scales: []int{0}},
	Q4_1: {scales: []int{0, 2}},
	Q5_0: {scales: []int{0}},
	Q5_1: {scales: []int{0, 2}},
	Q8_0: {scales: []int{0}},
	Q2_K: {scales: []int{80, 82}}, // scales[16], qs[64], d, dmin
	Q3_K: {scales: []int{108}},    // hmask[32], qs[64], scales[12], d
	Q4_K: {scales: []int{0, 2}},   // d, dmin, …
	Q5_K: {scales: []int{0, 2}},   // d, dmin, …
	Q6_K: {scales: []int{208}},    // ql[128], qh[64], scales[16], d
}

// CheckFinite reads every tensor of the GGUF file at path whose type can
// hold a non-finite value it knows how to find (F32, F16, BF16 elements;
// the f16 scales of Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K…Q6_K blocks) and
// returns a *NonFiniteError for the first NaN or infinity. Other types
// (IQ*, TQ*, MXFP4, integer tensors) are not checked.
//
// It reads the whole tensor data, not a sample: one NaN anywhere poisons
// every logit downstream, and a sample misses a single bad row. Measured
// in docs/results/2026-12-07-security.md: a full scan costs about as
// much as reading the file once, which llama.cpp then does again from the
// page cache.
func CheckFinite(path string) error {
	f, err := Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.CheckFinite()
}

// CheckFinite is the package's CheckFinite on an opened file.
func (f *File) CheckFinite() error {
	buf := make([]byte, 1<<20)
	for _, t := range f.Tensors {
		c, ok := finiteChecks[t.Type]
		if !ok {
			continue
		}
		n, err := t.Bytes()
		if err != nil {
			return err
		}
		tr := tensorTypes[t.Type]
		blockBytes := int(tr.typeSize)
		// Read whole blocks (a chunk a multiple of the block size).
		chunk := len(buf) / blockBytes * blockBytes
		r := bufio.NewReaderSize(io.NewSectionReader(f.r, f.DataOffset+int64(t.Offset), int64(n)), 1<<16)
		var elem uint64
		for left := int64(n); left > 0; {
			m := int(min(int64(chunk), left))
			if _, err := io.ReadFull(r, buf[:m]); err != nil {
				return fmt.Errorf("gguf: read tensor %q: %w", t.Name, err)
			}
			if i, bad := firstNonFinite(c, buf[:m], blockBytes); bad {
				return &NonFiniteError{Tensor: t.Name, Element: elem + uint64(i)*uint64(tr.blockSize)}
			}
			elem += uint64(m/blockBytes) * uint64(tr.blockSize)
			left -= int64(m)
		}
	}
	return nil
}

// firstNonFinite returns the index of the first block of b (whole blocks
// of blockBytes) holding a non-finite value.
func firstNonFinite(c finiteCheck, b []byte, blockBytes int) (int, bool) {
	switch {
	case c.f32:
		// Two weights per 64-bit word: the scan then runs at about the
		// speed of reading the file.
		const exp, exp2 = 0x7f800000, 0x7f800000 << 32
		i := 0
		for ; i+8 <= len(b); i += 8 {
			u := binary.LittleEndian.Uint64(b[i:])
			if u&exp == exp || u&exp2 == exp2 {
				break
			}
		}
		for ; i+4 <= len(b); i += 4 {
			if binary.LittleEndian.Uint32(b[i:])&exp == exp {
				return i / 4, true
			}
		}
	case c.f16:
		for i := 0; i+2 <= len(b); i += 2 {
			if binary.LittleEndian.Uint16(b[i:])&0x7c00 == 0x7c00 {
				return i / 2, true
			}
		}
	case c.bf16:
		for i := 0; i+2 <= len(b); i += 2 {
			if binary.LittleEndian.Uint16(b[i:])&0x7f80 == 0x7f80 {
				return i / 2, true
			}
		}
	default:
		for k := 0; (k+1)*blockBytes <= len(b); k++ {
			for _, off := range c.scales {
				if binary.LittleEndian.Uint16(b[k*blockBytes+off:])&0x7c00 == 0x7c00 {
					return k, true
				}
			}
		}
	}
	return 0, false
}
