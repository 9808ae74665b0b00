package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
)

// File is a parsed GGUF header plus access to the tensor data.
type File struct {
	Version   uint32
	Alignment uint64
	// Metadata in file order.
	Metadata []KV
	// Tensors in file order.
	Tensors []TensorInfo
	// DataOffset is the absolute offset of the tensor data section.
	DataOffset int64
	// Size is the size of the whole file.
	Size int64

	r      io.ReaderAt
	closer io.Closer
	keys   map[string]int
	names  map[string]int
}

// Open opens and parses the GGUF file at path. Close the returned File.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("gguf: %w", err)
	}
	gf, err := Read(f, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	gf.closer = f
	return gf, nil
}

// Close closes the underlying file when the File came from Open.
func (f *File) Close() error {
	if f.closer == nil {
		return nil
	}
	err := f.closer.Close()
	f.closer = nil
	return err
}

// Read parses the header of a GGUF file of the given size read through r.
// Tensor data is read later, on demand, through r.
func Read(r io.ReaderAt, size int64) (*File, error) {
	d := &decoder{br: bufio.NewReaderSize(io.NewSectionReader(r, 0, size), 1<<16), size: size}
	f := &File{r: r, Size: size, keys: map[string]int{}, names: map[string]int{}}
	magic := d.bytes(4)
	if d.err != nil {
		return nil, d.err
	}
	if string(magic) != Magic {
		return nil, fmt.Errorf("gguf: %w (magic %q, want %q)", ErrNotGGUF, magic, Magic)
	}
	f.Version = d.u32()
	if d.err == nil && f.Version != 2 && f.Version != 3 {
		return nil, d.fail(4, fmt.Sprintf("unsupported GGUF version %d (want 2 or 3)", f.Version))
	}
	nTensors := d.u64()
	nKV := d.u64()
	if d.err != nil {
		return nil, d.err
	}
	// Each metadata entry takes at least 8+4+1 bytes and each tensor info at
	// least 8+4+8+4+8, so counts beyond the file size are corruption.
	if nKV > uint64(size)/13 {
		return nil, d.fail(16, fmt.Sprintf("metadata count %d cannot fit in a %d-byte file (truncated or corrupt)", nKV, size))
	}
	if nTensors > uint64(size)/32 {
		return nil, d.fail(8, fmt.Sprintf("tensor count %d cannot fit in a %d-byte file (truncated or corrupt)", nTensors, size))
	}
	f.Alignment = DefaultAlignment
	for i := uint64(0); i < nKV; i++ {
		at := d.off
		key := d.str()
		v := d.value()
		if d.err != nil {
			return nil, d.within(fmt.Sprintf("metadata entry %d (%q)", i, key))
		}
		if _, dup := f.keys[key]; dup {
			return nil, d.fail(at, fmt.Sprintf("duplicate metadata key %q", key))
		}
		if key == KeyAlignment {
			a, ok := v.(uint32)
			if !ok || a == 0 || a&(a-1) != 0 {
				return nil, d.fail(at, fmt.Sprintf("%s must be a power-of-two uint32, got %v (%T)", KeyAlignment, v, v))
			}
			f.Alignment = uint64(a)
		}
		f.keys[key] = len(f.Metadata)
		f.Metadata = append(f.Metadata, KV{key, v})
	}
	for i := uint64(0); i < nTensors; i++ {
		at := d.off
		t := d.tensorInfo()
		if d.err != nil {
			return nil, d.within(fmt.Sprintf("tensor info %d (%q)", i, t.Name))
		}
		if _, dup := f.names[t.Name]; dup {
			return nil, d.fail(at, fmt.Sprintf("duplicate tensor name %q", t.Name))
		}
		if t.Offset%f.Alignment != 0 {
			return nil, d.fail(at, fmt.Sprintf("tensor %q: data offset %d is not a multiple of the alignment %d", t.Name, t.Offset, f.Alignment))
		}
		f.names[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}
	f.DataOffset = int64(alignUp(uint64(d.off), f.Alignment))
	for _, t := range f.Tensors {
		n, _ := t.Bytes() // checked in tensorInfo
		end := uint64(f.DataOffset) + t.Offset + n
		if t.Offset > uint64(size) || end < t.Offset || end > uint64(size) {
			return nil, &FormatError{Offset: size, Msg: fmt.Sprintf(
				"truncated: tensor %q needs bytes up to %d, file has %d", t.Name, end, size)}
		}
	}
	return f, nil
}

// Get returns the metadata value of key.
func (f *File) Get(key string) (any, bool) {
	i, ok := f.keys[key]
	if !ok {
		return nil, false
	}
	return f.Metadata[i].Value, true
}

// Has reports whether the file has metadata key.
func (f *File) Has(key string) bool { _, ok := f.keys[key]; return ok }

// String returns a string metadata value.
func (f *File) String(key string) (string, error) {
	v, ok := f.Get(key)
	if !ok {
		return "", fmt.Errorf("gguf: missing key %q", key)
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("gguf: key %q is %T, want string", key, v)
	}
	return s, nil
}

// Uint returns an integer metadata value of any integer type as uint64
// (negative values are an error).
func (f *File) Uint(key string) (uint64, error) {
	v, ok := f.Get(key)
	if !ok {
		return 0, fmt.Errorf("gguf: missing key %q", key)
	}
	var n int64
	switch x := v.(type) {
	case uint8:
		return uint64(x), nil
	case uint16:
		return uint64(x), nil
	case uint32:
		return uint64(x), nil
	case uint64:
		return x, nil
	case int8:
		n = int64(x)
	case int16:
		n = int64(x)
	case int32:
		n = int64(x)
	case int64:
		n = x
	default:
		return 0, fmt.Errorf("gguf: key %q is %T, want an integer", key, v)
	}
	if n < 0 {
		return 0, fmt.Errorf("gguf: key %q is negative (%d)", key, n)
	}
	return uint64(n), nil
}

// Float returns a float32 or float64 metadata value as float64.
func (f *File) Float(key string) (float64, error) {
	v, ok := f.Get(key)
	if !ok {
		return 0, fmt.Errorf("gguf: missing key %q", key)
	}
	switch x := v.(type) {
	case float32:
		return float64(x), nil
	case float64:
		return x, nil
	}
	return 0, fmt.Errorf("gguf: key %q is %T, want a float", key, v)
}

// Strings returns a string array metadata value.
func (f *File) Strings(key string) ([]string, error) {
	v, ok := f.Get(key)
	if !ok {
		return nil, fmt.Errorf("gguf: missing key %q", key)
	}
	s, ok := v.([]string)
	if !ok {
		return nil, fmt.Errorf("gguf: key %q is %T, want []string", key, v)
	}
	return s, nil
}

// Tensor returns the info of the named tensor.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.names[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Tensors[i], true
}

// TensorBytes returns the raw data of the named tensor.
func (f *File) TensorBytes(name string) ([]byte, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("gguf: no tensor %q", name)
	}
	n, err := t.Bytes()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, n)
	off := f.DataOffset + int64(t.Offset)
	if _, err := f.r.ReadAt(buf, off); err != nil {
		return nil, fmt.Errorf("gguf: read tensor %q at offset %d: %w", name, off, err)
	}
	return buf, nil
}

// TensorFloat32 returns the named tensor's elements as float32. It supports
// F32, F16 and BF16 tensors.
func (f *File) TensorFloat32(name string) ([]float32, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("gguf: no tensor %q", name)
	}
	if t.Type != F32 && t.Type != F16 && t.Type != BF16 {
		return nil, fmt.Errorf("gguf: tensor %q is %v; only F32, F16 and BF16 convert to float32", name, t.Type)
	}
	raw, err := f.TensorBytes(name)
	if err != nil {
		return nil, err
	}
	out := make([]float32, t.Elements())
	for i := range out {
		switch t.Type {
		case F32:
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		case F16:
			out[i] = Float16ToFloat32(binary.LittleEndian.Uint16(raw[2*i:]))
		case BF16:
			out[i] = BFloat16ToFloat32(binary.LittleEndian.Uint16(raw[2*i:]))
		}
	}
	return out, nil
}

// decoder reads little-endian values, tracks the offset and remembers the
// first error as a *FormatError.
type decoder struct {
	br   *bufio.Reader
	off  int64
	size int64
	err  error
	buf  [8]byte
}

func (d *decoder) fail(at int64, msg string) error {
	if d.err == nil {
		d.err = &FormatError{Offset: at, Msg: msg}
	}
	return d.err
}

// within prefixes the message of a *FormatError with where it happened.
func (d *decoder) within(where string) error {
	var fe *FormatError
	if errors.As(d.err, &fe) {
		return &FormatError{Offset: fe.Offset, Msg: where + ": " + fe.Msg}
	}
	return fmt.Errorf("%s: %w", where, d.err)
}

func (d *decoder) bytes(n int) []byte {
	if d.err != nil {
		return nil
	}
	var p []byte
	if n <= len(d.buf) {
		p = d.buf[:n]
	} else {
		p = make([]byte, n)
	}
	if _, err := io.ReadFull(d.br, p); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			d.fail(d.off, fmt.Sprintf("truncated: need %d bytes, file has %d", d.off+int64(n), d.size))
		} else {
			d.err = fmt.Errorf("gguf: read at offset %d: %w", d.off, err)
		}
		return nil
	}
	d.off += int64(n)
	return p
}

func (d *decoder) u8() uint8 {
	if p := d.bytes(1); p != nil {
		return p[0]
	}
	return 0
}
func (d *decoder) u16() uint16 {
	if p := d.bytes(2); p != nil {
		return binary.LittleEndian.Uint16(p)
	}
	return 0
}
func (d *decoder) u32() uint32 {
	if p := d.bytes(4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}
func (d *decoder) u64() uint64 {
	if p := d.bytes(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

func (d *decoder) str() string {
	at := d.off
	n := d.u64()
	if d.err != nil {
		return ""
	}
	if n > uint64(d.size-d.off) {
		d.fail(at, fmt.Sprintf("string length %d exceeds the %d bytes left in the file", n, d.size-d.off))
		return ""
	}
	return string(d.bytes(int(n)))
}

func (d *decoder) boolean() bool {
	at := d.off
	b := d.u8()
	if b > 1 {
		d.fail(at, fmt.Sprintf("bool value %d, want 0 or 1", b))
	}
	return b == 1
}

func (d *decoder) value() any {
	at := d.off
	t := ValueType(d.u32())
	if d.err != nil {
		return nil
	}
	switch t {
	case TypeUint8:
		return d.u8()
	case TypeInt8:
		return int8(d.u8())
	case TypeUint16:
		return d.u16()
	case TypeInt16:
		return int16(d.u16())
	case TypeUint32:
		return d.u32()
	case TypeInt32:
		return int32(d.u32())
	case TypeFloat32:
		return math.Float32frombits(d.u32())
	case TypeBool:
		return d.boolean()
	case TypeString:
		return d.str()
	case TypeUint64:
		return d.u64()
	case TypeInt64:
		return int64(d.u64())
	case TypeFloat64:
		return math.Float64frombits(d.u64())
	case TypeArray:
		return d.array()
	}
	d.fail(at, fmt.Sprintf("unknown metadata value type %d", uint32(t)))
	return nil
}

func (d *decoder) array() any {
	at := d.off
	et := ValueType(d.u32())
	n := d.u64()
	if d.err != nil {
		return nil
	}
	if et == TypeArray || et >= numValueTypes {
		d.fail(at, fmt.Sprintf("array of unsupported element type %v", et))
		return nil
	}
	minSize := uint64(et.size())
	if et == TypeString {
		minSize = 8
	}
	if n > uint64(d.size-d.off)/minSize {
		d.fail(at, fmt.Sprintf("array of %d %v elements exceeds the %d bytes left in the file", n, et, d.size-d.off))
		return nil
	}
	switch et {
	case TypeUint8:
		return readArr(d, n, d.u8)
	case TypeInt8:
		return readArr(d, n, func() int8 { return int8(d.u8()) })
	case TypeUint16:
		return readArr(d, n, d.u16)
	case TypeInt16:
		return readArr(d, n, func() int16 { return int16(d.u16()) })
	case TypeUint32:
		return readArr(d, n, d.u32)
	case TypeInt32:
		return readArr(d, n, func() int32 { return int32(d.u32()) })
	case TypeFloat32:
		return readArr(d, n, func() float32 { return math.Float32frombits(d.u32()) })
	case TypeBool:
		return readArr(d, n, d.boolean)
	case TypeString:
		return readArr(d, n, d.str)
	case TypeUint64:
		return readArr(d, n, d.u64)
	case TypeInt64:
		return readArr(d, n, func() int64 { return int64(d.u64()) })
	default: // TypeFloat64
		return readArr(d, n, func() float64 { return math.Float64frombits(d.u64()) })
	}
}

func readArr[T any](d *decoder, n uint64, get func() T) []T {
	out := make([]T, 0, n)
	for i := uint64(0); i < n && d.err == nil; i++ {
		out = append(out, get())
	}
	if d.err != nil {
		return nil
	}
	return out
}

func (d *decoder) tensorInfo() TensorInfo {
	var t TensorInfo
	t.Name = d.str()
	at := d.off
	nd := d.u32()
	if d.err != nil {
		return t
	}
	if nd == 0 || nd > MaxDims {
		d.fail(at, fmt.Sprintf("tensor %q has %d dimensions, want 1..%d", t.Name, nd, MaxDims))
		return t
	}
	t.Shape = make([]uint64, nd)
	elems := uint64(1)
	for i := range t.Shape {
		t.Shape[i] = d.u64()
		if d.err != nil {
			return t
		}
		// ggml keeps element counts in int64.
		if t.Shape[i] > math.MaxInt64 || (t.Shape[i] != 0 && elems > math.MaxInt64/t.Shape[i]) {
			d.fail(at, fmt.Sprintf("tensor %q: shape %v overflows", t.Name, t.Shape[:i+1]))
			return t
		}
		elems *= t.Shape[i]
	}
	// No type packs an element into fewer than 1/8 byte, so a tensor with
	// more than 8 elements per file byte is corrupt (and Bytes cannot
	// overflow).
	if elems > uint64(d.size)*8 {
		d.fail(at, fmt.Sprintf("tensor %q: shape %v cannot fit in a %d-byte file", t.Name, t.Shape, d.size))
		return t
	}
	at = d.off
	t.Type = TensorType(d.u32())
	t.Offset = d.u64()
	if d.err != nil {
		return t
	}
	if !t.Type.Known() {
		d.fail(at, fmt.Sprintf("tensor %q has unknown type %d", t.Name, uint32(t.Type)))
		return t
	}
	if _, err := t.Bytes(); err != nil {
		d.fail(at, err.Error())
		return t
	}
	if n, _ := t.Bytes(); n > uint64(d.size) {
		d.fail(at, fmt.Sprintf("tensor %q needs %d bytes, more than the whole file (%d)", t.Name, n, d.size))
	}
	t.Shape = slices.Clip(t.Shape)
	return t
}
