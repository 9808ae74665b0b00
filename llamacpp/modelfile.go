package llamacpp

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// This file checks a GGUF file's structure in Go before llama.cpp sees it:
// llama.cpp validates most things itself, but a clear Go error naming the
// problem is better than a log line and a NULL, and the check guards the
// library against files that would make it read past the end.

var (
	// size_t ggml_type_size(enum ggml_type type); // bytes of one block
	ggmlTypeSizeOf func(t int32) uintptr
	// int64_t ggml_blck_size(enum ggml_type type); // elements per block (0: removed type)
	ggmlBlockSizeOf func(t int32) int64
)

func init() {
	register(func(libs libraries) error {
		return bindAll(libs.ggmlBase, []binding{{&ggmlTypeSizeOf, "ggml_type_size"},
			{&ggmlBlockSizeOf, "ggml_blck_size"},
		})
	})
}

const (
	ggufMagic            = 0x46554747 // "GGUF" little-endian
	ggufDefaultAlignment = 32
	ggmlTypeCount        = 43 // GGML_TYPE_COUNT in v0.5.0
	maxGGUFString        = 1 << 28
)

// GGUF metadata value types (gguf.h).
const (
	ggufUint8 = iota
	ggufInt8
	ggufUint16
	ggufInt16
	ggufUint32
	ggufInt32
	ggufFloat32
	ggufBool
	ggufString
	ggufArray
	ggufUint64
	ggufInt64
	ggufFloat64
)

// ModelFileError says what is wrong with a model file and where.
type ModelFileError struct {
	Path   string
	Offset int64 // byte offset where the problem was found, -1 if none
	Reason string
}

func (e *ModelFileError) Error() string {
	if e.Offset >= 0 {
		return fmt.Sprintf("llamacpp: %s: %s (at byte %d): %v", e.Path, e.Reason, e.Offset, ErrBadModelFile)
	}
	return fmt.Sprintf("llamacpp: %s: %s: %v", e.Path, e.Reason, ErrBadModelFile)
}

func (e *ModelFileError) Unwrap() error { return ErrBadModelFile }

// countingReader tracks the offset for error messages.
type countingReader struct {
	r   *bufio.Reader
	off int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.off += int64(n)
	return n, err
}

// CheckModelFile verifies that path is a complete GGUF file (v2 or v3):
// magic, header, metadata, tensor descriptions, and that every tensor's
// data lies inside the file. It works with or without the library loaded
// (without it, tensors of quantised types are not size-checked).
func CheckModelFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("llamacpp: model file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("llamacpp: model file: %w", err)
	}
	if st.IsDir() {
		return &ModelFileError{Path: path, Offset: -1, Reason: "is a directory"}
	}
	size := st.Size()
	cr := &countingReader{r: bufio.NewReaderSize(f, 1<<16)}
	bad := func(reason string, args ...any) error {
		return &ModelFileError{Path: path, Offset: cr.off, Reason: fmt.Sprintf(reason, args...)}
	}
	readErr := func(what string, err error) error {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return bad("truncated while reading %s (file has %d bytes)", what, size)
		}
		return fmt.Errorf("llamacpp: read %s: %w", path, err)
	}
	var hdr struct {
		Magic, Version uint32
		NTensors, NKV  uint64
	}
	if size < 4 {
		return bad("file too short (%d bytes) to be GGUF", size)
	}
	if err := binary.Read(cr, binary.LittleEndian, &hdr.Magic); err != nil {
		return readErr("magic", err)
	}
	if hdr.Magic != ggufMagic {
		return &ModelFileError{Path: path, Offset: 0, Reason: fmt.Sprintf("bad magic %q, want \"GGUF\"", binary.LittleEndian.AppendUint32(nil, hdr.Magic))}
	}
	for _, v := range []any{&hdr.Version, &hdr.NTensors, &hdr.NKV} {
		if err := binary.Read(cr, binary.LittleEndian, v); err != nil {
			return readErr("header", err)
		}
	}
	if hdr.Version != 2 && hdr.Version != 3 {
		return bad("unsupported GGUF version %d (want 2 or 3)", hdr.Version)
	}
	// Every KV and tensor description takes at least 8 bytes, which bounds
	// the counts of a corrupt header before we loop on them.
	if hdr.NKV > uint64(size)/8 || hdr.NTensors > uint64(size)/8 {
		return bad("implausible counts (%d metadata keys, %d tensors) for a %d-byte file", hdr.NKV, hdr.NTensors, size)
	}
	readU32 := func(what string) (uint32, error) {
		var v uint32
		if err := binary.Read(cr, binary.LittleEndian, &v); err != nil {
			return 0, readErr(what, err)
		}
		return v, nil
	}
	readU64 := func(what string) (uint64, error) {
		var v uint64
		if err := binary.Read(cr, binary.LittleEndian, &v); err != nil {
			return 0, readErr(what, err)
		}
		return v, nil
	}
	readString := func(what string) (string, error) {
		n, err := readU64(what)
		if err != nil {
			return "", err
		}
		if n > maxGGUFString || int64(n) > size-cr.off {
			return "", bad("truncated or corrupt: %s has length %d but only %d bytes remain", what, n, size-cr.off)
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(cr, b); err != nil {
			return "", readErr(what, err)
		}
		return string(b), nil
	}
	skip := func(what string, n int64) error {
		if n > size-cr.off {
			return bad("truncated or corrupt: %s needs %d bytes but only %d remain", what, n, size-cr.off)
		}
		if _, err := io.CopyN(io.Discard, cr, n); err != nil {
			return readErr(what, err)
		}
		return nil
	}
	scalarSize := map[uint32]int64{
		ggufUint8: 1, ggufInt8: 1, ggufBool: 1, ggufUint16: 2, ggufInt16: 2,
		ggufUint32: 4, ggufInt32: 4, ggufFloat32: 4, ggufUint64: 8, ggufInt64: 8, ggufFloat64: 8,
	}
	alignment := uint64(ggufDefaultAlignment)
	for i := uint64(0); i < hdr.NKV; i++ {
		key, err := readString("metadata key")
		if err != nil {
			return err
		}
		typ, err := readU32("metadata type of " + key)
		if err != nil {
			return err
		}
		switch {
		case typ == ggufString:
			if _, err := readString("value of " + key); err != nil {
				return err
			}
		case typ == ggufArray:
			et, err := readU32("array type of " + key)
			if err != nil {
				return err
			}
			n, err := readU64("array length of " + key)
			if err != nil {
				return err
			}
			if et == ggufString {
				if n > uint64(size) {
					return bad("truncated or corrupt: array %s has length %d", key, n)
				}
				for j := uint64(0); j < n; j++ {
					if _, err := readString(fmt.Sprintf("%s[%d]", key, j)); err != nil {
						return err
					}
				}
			} else if es, ok := scalarSize[et]; ok {
				if n > uint64(size) {
					return bad("truncated or corrupt: array %s has length %d", key, n)
				}
				if err := skip("array "+key, int64(n)*es); err != nil {
					return err
				}
			} else {
				return bad("array %s: unknown element type %d", key, et)
			}
		default:
			sz, ok := scalarSize[typ]
			if !ok {
				return bad("metadata %s: unknown value type %d", key, typ)
			}
			if key == "general.alignment" && typ == ggufUint32 {
				a, err := readU32(key)
				if err != nil {
					return err
				}
				if a == 0 || a&(a-1) != 0 {
					return bad("general.alignment %d is not a power of two", a)
				}
				alignment = uint64(a)
				continue
			}
			if err := skip("value of "+key, sz); err != nil {
				return err
			}
		}
	}
	type tensorInfo struct {
		name   string
		typ    uint32
		ne     []uint64
		offset uint64
	}
	tensors := make([]tensorInfo, 0, min(hdr.NTensors, 1<<16))
	for i := uint64(0); i < hdr.NTensors; i++ {
		name, err := readString("tensor name")
		if err != nil {
			return err
		}
		nd, err := readU32("dimensions of " + name)
		if err != nil {
			return err
		}
		if nd == 0 || nd > 4 {
			return bad("tensor %s: %d dimensions (want 1..4)", name, nd)
		}
		t := tensorInfo{name: name, ne: make([]uint64, nd)}
		for d := range t.ne {
			if t.ne[d], err = readU64("shape of " + name); err != nil {
				return err
			}
		}
		if t.typ, err = readU32("type of " + name); err != nil {
			return err
		}
		if t.offset, err = readU64("offset of " + name); err != nil {
			return err
		}
		tensors = append(tensors, t)
	}
	dataStart := (uint64(cr.off) + alignment - 1) / alignment * alignment
	if hdr.NTensors > 0 && dataStart > uint64(size) {
		return bad("truncated: tensor data would start at byte %d but the file has %d", dataStart, size)
	}
	for _, t := range tensors {
		if t.typ >= ggmlTypeCount {
			return &ModelFileError{Path: path, Offset: -1, Reason: fmt.Sprintf("tensor %s: unknown ggml type %d", t.name, t.typ)}
		}
		if t.offset%alignment != 0 {
			return &ModelFileError{Path: path, Offset: -1, Reason: fmt.Sprintf("tensor %s: offset %d not aligned to %d", t.name, t.offset, alignment)}
		}
		nbytes, ok := tensorBytes(int32(t.typ), t.ne)
		if !ok {
			if Loaded() {
				return &ModelFileError{Path: path, Offset: -1, Reason: fmt.Sprintf("tensor %s: type %d or shape %v is invalid", t.name, t.typ, t.ne)}
			}
			continue
		}
		end := dataStart + t.offset + nbytes
		if end < dataStart || end > uint64(size) {
			return &ModelFileError{Path: path, Offset: -1, Reason: fmt.Sprintf("truncated: tensor %s needs bytes up to %d but the file has %d", t.name, end, size)}
		}
	}
	return nil
}

// tensorBytes is the data size of a tensor; ok is false when the type is
// unknown (removed type, or a quantised one without the library) or the
// shape does not divide into blocks.
func tensorBytes(typ int32, ne []uint64) (uint64, bool) {
	var bs, ts uint64
	switch typ {
	case 0: // F32
		bs, ts = 1, 4
	case 1, 30: // F16, BF16
		bs, ts = 1, 2
	default:
		if !Loaded() {
			return 0, false
		}
		b := ggmlBlockSizeOf(typ)
		if b <= 0 {
			return 0, false
		}
		bs, ts = uint64(b), uint64(ggmlTypeSizeOf(typ))
	}
	if ne[0]%bs != 0 {
		return 0, false
	}
	n := ne[0] / bs * ts
	for _, d := range ne[1:] {
		if d != 0 && n > math.MaxUint64/d {
			return 0, false
		}
		n *= d
	}
	return n, true
}
