package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
)

// Writer collects metadata and tensors and writes them as one GGUF v3 file.
// Metadata keys keep the order of their first Set; tensors keep the order
// of AddTensor and AddTensorBytes. The zero value is not usable; call
// NewWriter.
type Writer struct {
	kvs     []KV
	index   map[string]int
	tensors []pendingTensor
	names   map[string]bool
}

type pendingTensor struct {
	info TensorInfo
	data []float32 // F32 and F16 tensors added with AddTensor
	raw  []byte    // tensors added with AddTensorBytes, written as they are
}

// NewWriter returns an empty writer.
func NewWriter() *Writer {
	return &Writer{index: map[string]int{}, names: map[string]bool{}}
}

// Set stores a metadata value. The value must be one of the Go types listed
// in the package documentation; setting a key again replaces its value but
// keeps its position.
func (w *Writer) Set(key string, value any) error {
	if key == "" {
		return fmt.Errorf("gguf: empty metadata key")
	}
	if _, err := valueTypeOf(value); err != nil {
		return fmt.Errorf("gguf: key %q: %w", key, err)
	}
	if key == KeyAlignment {
		a, ok := value.(uint32)
		if !ok || a == 0 || a&(a-1) != 0 {
			return fmt.Errorf("gguf: %s must be a power of two uint32, got %v (%T)", KeyAlignment, value, value)
		}
	}
	if i, ok := w.index[key]; ok {
		w.kvs[i].Value = value
		return nil
	}
	w.index[key] = len(w.kvs)
	w.kvs = append(w.kvs, KV{key, value})
	return nil
}

// Metadata returns the metadata set so far, in order.
func (w *Writer) Metadata() []KV { return slices.Clone(w.kvs) }

// AddTensor adds a tensor stored as typ (F32 or F16). shape is in ggml ne
// order and data holds the elements row by row (len(data) must equal the
// product of shape). The writer keeps data until WriteTo; do not modify it
// before then.
func (w *Writer) AddTensor(name string, shape []uint64, typ TensorType, data []float32) error {
	if name == "" {
		return fmt.Errorf("gguf: empty tensor name")
	}
	if w.names[name] {
		return fmt.Errorf("gguf: tensor %q added twice", name)
	}
	if typ != F32 && typ != F16 {
		return fmt.Errorf("gguf: tensor %q: writer supports F32 and F16, not %v", name, typ)
	}
	if len(shape) == 0 || len(shape) > MaxDims {
		return fmt.Errorf("gguf: tensor %q: %d dimensions, want 1..%d", name, len(shape), MaxDims)
	}
	info := TensorInfo{Name: name, Shape: slices.Clone(shape), Type: typ}
	if n := info.Elements(); n != uint64(len(data)) {
		return fmt.Errorf("gguf: tensor %q: shape %v has %d elements, data has %d", name, shape, n, len(data))
	}
	w.names[name] = true
	w.tensors = append(w.tensors, pendingTensor{info: info, data: data})
	return nil
}

// AddTensorBytes adds a tensor of any known type from its encoded data, for
// example a quantized matrix from ggml's quantize. len(data) must be the
// size of shape in typ (whole blocks per row). The writer keeps data until
// WriteTo; do not modify it before then.
func (w *Writer) AddTensorBytes(name string, shape []uint64, typ TensorType, data []byte) error {
	if name == "" {
		return fmt.Errorf("gguf: empty tensor name")
	}
	if w.names[name] {
		return fmt.Errorf("gguf: tensor %q added twice", name)
	}
	if !typ.Known() {
		return fmt.Errorf("gguf: tensor %q: unknown tensor type %d", name, uint32(typ))
	}
	if len(shape) == 0 || len(shape) > MaxDims {
		return fmt.Errorf("gguf: tensor %q: %d dimensions, want 1..%d", name, len(shape), MaxDims)
	}
	info := TensorInfo{Name: name, Shape: slices.Clone(shape), Type: typ}
	n, err := info.Bytes()
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if n != uint64(len(data)) {
		return fmt.Errorf("gguf: tensor %q: shape %v of %v takes %d bytes, data has %d", name, shape, typ, n, len(data))
	}
	w.names[name] = true
	w.tensors = append(w.tensors, pendingTensor{info: info, raw: data})
	return nil
}

func (w *Writer) alignment() uint64 {
	if i, ok := w.index[KeyAlignment]; ok {
		return uint64(w.kvs[i].Value.(uint32))
	}
	return DefaultAlignment
}

// Tensors returns the infos of the added tensors with the offsets they will
// have in the written file.
func (w *Writer) Tensors() []TensorInfo {
	align := w.alignment()
	out := make([]TensorInfo, len(w.tensors))
	var off uint64
	for i, t := range w.tensors {
		t.info.Offset = off
		out[i] = t.info
		n, _ := t.info.Bytes()
		off = alignUp(off+n, align)
	}
	return out
}

func alignUp(n, a uint64) uint64 { return (n + a - 1) / a * a }

// WriteTo writes the complete file.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	cw := &countingWriter{w: bufio.NewWriterSize(out, 1<<20)}
	e := &encoder{w: cw}
	e.raw([]byte(Magic))
	e.u32(Version)
	e.u64(uint64(len(w.tensors)))
	e.u64(uint64(len(w.kvs)))
	for _, kv := range w.kvs {
		e.str(kv.Key)
		e.value(kv.Value)
	}
	infos := w.Tensors()
	for _, t := range infos {
		e.str(t.Name)
		e.u32(uint32(len(t.Shape)))
		for _, d := range t.Shape {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(t.Offset)
	}
	align := w.alignment()
	e.pad(align)
	dataStart := cw.n
	for i, t := range w.tensors {
		e.pad(align)
		if want := dataStart + int64(infos[i].Offset); e.err == nil && cw.n != want {
			return cw.n, fmt.Errorf("gguf: internal error: tensor %q at %d, want %d", t.info.Name, cw.n, want)
		}
		if t.raw != nil {
			e.raw(t.raw)
		} else {
			e.tensorData(t.info.Type, t.data)
		}
	}
	if e.err == nil {
		e.err = cw.w.(*bufio.Writer).Flush()
	}
	if e.err != nil {
		return cw.n, fmt.Errorf("gguf: write: %w", e.err)
	}
	return cw.n, nil
}

// WriteFile writes the file to path atomically (through a temporary file in
// the same directory).
func (w *Writer) WriteFile(path string) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	tmp := f.Name()
	// CreateTemp makes the file private; a model file is ordinary data.
	err = f.Chmod(0o644)
	if err == nil {
		_, err = w.WriteTo(f)
	}
	if err == nil {
		// On disk before the rename replaces the old file (adapters and
		// checkpoints are rewritten in place).
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("gguf: %w", cerr)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		if d, derr := os.Open(filepath.Dir(path)); derr == nil {
			err = d.Sync()
			d.Close()
		}
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// encoder writes little-endian values and remembers the first error.
type encoder struct {
	w   *countingWriter
	err error
	buf [8]byte
}

func (e *encoder) raw(p []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(p)
	}
}
func (e *encoder) u8(v uint8) { e.buf[0] = v; e.raw(e.buf[:1]) }
func (e *encoder) u16(v uint16) {
	binary.LittleEndian.PutUint16(e.buf[:], v)
	e.raw(e.buf[:2])
}
func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.buf[:], v)
	e.raw(e.buf[:4])
}
func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.buf[:], v)
	e.raw(e.buf[:8])
}
func (e *encoder) str(s string) { e.u64(uint64(len(s))); e.raw([]byte(s)) }

func (e *encoder) pad(align uint64) {
	var zero [64]byte
	n := alignUp(uint64(e.w.n), align) - uint64(e.w.n)
	for n > 0 {
		k := min(n, uint64(len(zero)))
		e.raw(zero[:k])
		n -= k
	}
}

func (e *encoder) tensorData(typ TensorType, data []float32) {
	const chunk = 1 << 14
	buf := make([]byte, 0, chunk*4)
	for len(data) > 0 && e.err == nil {
		n := min(len(data), chunk)
		buf = buf[:0]
		for _, f := range data[:n] {
			if typ == F16 {
				buf = binary.LittleEndian.AppendUint16(buf, Float32ToFloat16(f))
			} else {
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(f))
			}
		}
		e.raw(buf)
		data = data[n:]
	}
}

// valueTypeOf maps a Go value to its GGUF type.
func valueTypeOf(v any) (ValueType, error) {
	switch v.(type) {
	case uint8:
		return TypeUint8, nil
	case int8:
		return TypeInt8, nil
	case uint16:
		return TypeUint16, nil
	case int16:
		return TypeInt16, nil
	case uint32:
		return TypeUint32, nil
	case int32:
		return TypeInt32, nil
	case float32:
		return TypeFloat32, nil
	case bool:
		return TypeBool, nil
	case string:
		return TypeString, nil
	case uint64:
		return TypeUint64, nil
	case int64:
		return TypeInt64, nil
	case float64:
		return TypeFloat64, nil
	case []uint8, []int8, []uint16, []int16, []uint32, []int32, []float32, []bool, []string,
		[]uint64, []int64, []float64:
		return TypeArray, nil
	}
	return 0, fmt.Errorf("unsupported metadata value type %T (use sized Go types such as uint32, int32, float32, string or slices of them)", v)
}

func (e *encoder) value(v any) {
	t, _ := valueTypeOf(v) // checked by Set
	e.u32(uint32(t))
	switch x := v.(type) {
	case uint8:
		e.u8(x)
	case int8:
		e.u8(uint8(x))
	case uint16:
		e.u16(x)
	case int16:
		e.u16(uint16(x))
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case float32:
		e.u32(math.Float32bits(x))
	case bool:
		if x {
			e.u8(1)
		} else {
			e.u8(0)
		}
	case string:
		e.str(x)
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float64:
		e.u64(math.Float64bits(x))
	case []uint8:
		arr(e, TypeUint8, x, e.u8)
	case []int8:
		arr(e, TypeInt8, x, func(v int8) { e.u8(uint8(v)) })
	case []uint16:
		arr(e, TypeUint16, x, e.u16)
	case []int16:
		arr(e, TypeInt16, x, func(v int16) { e.u16(uint16(v)) })
	case []uint32:
		arr(e, TypeUint32, x, e.u32)
	case []int32:
		arr(e, TypeInt32, x, func(v int32) { e.u32(uint32(v)) })
	case []float32:
		arr(e, TypeFloat32, x, func(v float32) { e.u32(math.Float32bits(v)) })
	case []bool:
		arr(e, TypeBool, x, func(v bool) {
			if v {
				e.u8(1)
			} else {
				e.u8(0)
			}
		})
	case []string:
		arr(e, TypeString, x, e.str)
	case []uint64:
		arr(e, TypeUint64, x, e.u64)
	case []int64:
		arr(e, TypeInt64, x, func(v int64) { e.u64(uint64(v)) })
	case []float64:
		arr(e, TypeFloat64, x, func(v float64) { e.u64(math.Float64bits(v)) })
	}
}

func arr[T any](e *encoder, t ValueType, xs []T, put func(T)) {
	e.u32(uint32(t))
	e.u64(uint64(len(xs)))
	for _, x := range xs {
		put(x)
	}
}
