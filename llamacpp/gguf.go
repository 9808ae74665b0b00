package llamacpp

// gguf.h: reading GGUF metadata and the tensor directory through ggml's own
// parser, so that the trainer sees exactly what llama.cpp sees. Tensor data is
// read by the caller from the file at Offset (no copy of the whole model is
// made in C memory).

import (
	"errors"
	"fmt"
	"unsafe"
)

// GGUFType is enum gguf_type.
type GGUFType int32

// GGUF value types.
const (
	GGUFUint8   GGUFType = 0
	GGUFInt8    GGUFType = 1
	GGUFUint16  GGUFType = 2
	GGUFInt16   GGUFType = 3
	GGUFUint32  GGUFType = 4
	GGUFInt32   GGUFType = 5
	GGUFFloat32 GGUFType = 6
	GGUFBool    GGUFType = 7
	GGUFString  GGUFType = 8
	GGUFArray   GGUFType = 9
	GGUFUint64  GGUFType = 10
	GGUFInt64   GGUFType = 11
	GGUFFloat64 GGUFType = 12
)

// ggufInitParams mirrors struct gguf_init_params (size 16).
type ggufInitParams struct {
	NoAlloc bool
	_       [7]byte
	Ctx     uintptr
}

var (
	ggufInitFromFile  func(fname string, p ggufInitParams) uintptr // struct gguf_context * gguf_init_from_file(const char * fname, struct gguf_init_params params)
	ggufFree          func(ctx uintptr)
	ggufFindKey       func(ctx uintptr, key string) int64
	ggufGetKVType     func(ctx uintptr, id int64) GGUFType
	ggufGetArrType    func(ctx uintptr, id int64) GGUFType
	ggufGetArrN       func(ctx uintptr, id int64) uintptr
	ggufGetArrData    func(ctx uintptr, id int64) uintptr
	ggufGetValU8      func(ctx uintptr, id int64) uint8
	ggufGetValI8      func(ctx uintptr, id int64) int8
	ggufGetValU16     func(ctx uintptr, id int64) uint16
	ggufGetValI16     func(ctx uintptr, id int64) int16
	ggufGetValU32     func(ctx uintptr, id int64) uint32
	ggufGetValI32     func(ctx uintptr, id int64) int32
	ggufGetValU64     func(ctx uintptr, id int64) uint64
	ggufGetValI64     func(ctx uintptr, id int64) int64
	ggufGetValF32     func(ctx uintptr, id int64) float32
	ggufGetValF64     func(ctx uintptr, id int64) float64
	ggufGetValBool    func(ctx uintptr, id int64) bool
	ggufGetValStr     func(ctx uintptr, id int64) string
	ggufGetDataOffset func(ctx uintptr) uintptr
	ggufGetNTensors   func(ctx uintptr) int64
	ggufGetTensorName func(ctx uintptr, id int64) string
	ggufGetTensorType func(ctx uintptr, id int64) Type
	ggufGetTensorOff  func(ctx uintptr, id int64) uintptr
	ggufGetTensorSize func(ctx uintptr, id int64) uintptr
	ggufGetTensorNe   func(ctx uintptr, id int64) uintptr
)

func init() {
	register(func(libs libraries) error {
		return bindAll(libs.ggmlBase, []binding{
			{&ggufInitFromFile, "gguf_init_from_file"},
			{&ggufFree, "gguf_free"},
			{&ggufFindKey, "gguf_find_key"},
			{&ggufGetKVType, "gguf_get_kv_type"},
			{&ggufGetArrType, "gguf_get_arr_type"},
			{&ggufGetArrN, "gguf_get_arr_n"},
			{&ggufGetArrData, "gguf_get_arr_data"},
			{&ggufGetValU8, "gguf_get_val_u8"},
			{&ggufGetValI8, "gguf_get_val_i8"},
			{&ggufGetValU16, "gguf_get_val_u16"},
			{&ggufGetValI16, "gguf_get_val_i16"},
			{&ggufGetValU32, "gguf_get_val_u32"},
			{&ggufGetValI32, "gguf_get_val_i32"},
			{&ggufGetValU64, "gguf_get_val_u64"},
			{&ggufGetValI64, "gguf_get_val_i64"},
			{&ggufGetValF32, "gguf_get_val_f32"},
			{&ggufGetValF64, "gguf_get_val_f64"},
			{&ggufGetValBool, "gguf_get_val_bool"},
			{&ggufGetValStr, "gguf_get_val_str"},
			{&ggufGetDataOffset, "gguf_get_data_offset"},
			{&ggufGetNTensors, "gguf_get_n_tensors"},
			{&ggufGetTensorName, "gguf_get_tensor_name"},
			{&ggufGetTensorType, "gguf_get_tensor_type"},
			{&ggufGetTensorOff, "gguf_get_tensor_offset"},
			{&ggufGetTensorSize, "gguf_get_tensor_size"},
			{&ggufGetTensorNe, "gguf_get_tensor_ne"},
		})
	})
}

// GGUFFile is the parsed header of a GGUF file (metadata and tensor
// directory, no tensor data).
type GGUFFile struct {
	ctx  uintptr
	Path string
}

// GGUFTensorInfo locates one tensor in the file.
type GGUFTensorInfo struct {
	Name   string
	Type   Type
	Ne     [4]int64
	Offset int64 // absolute file offset of the data
	Size   int64 // bytes
}

// OpenGGUF parses the header of the GGUF file at path.
func OpenGGUF(path string) (*GGUFFile, error) {
	if ggufInitFromFile == nil {
		return nil, ErrNotLoaded
	}
	c := ggufInitFromFile(path, ggufInitParams{NoAlloc: true})
	if c == 0 {
		return nil, fmt.Errorf("llamacpp: %s is not a readable GGUF file", path)
	}
	return &GGUFFile{ctx: c, Path: path}, nil
}

// Close releases the parsed header.
func (f *GGUFFile) Close() error {
	if f.ctx != 0 {
		ggufFree(f.ctx)
		f.ctx = 0
	}
	return nil
}

// Has reports whether key exists.
func (f *GGUFFile) Has(key string) bool { return ggufFindKey(f.ctx, key) >= 0 }

// Int returns an integer value (any integer type) of key.
func (f *GGUFFile) Int(key string) (int64, error) {
	id := ggufFindKey(f.ctx, key)
	if id < 0 {
		return 0, fmt.Errorf("gguf: key %s not found", key)
	}
	switch t := ggufGetKVType(f.ctx, id); t {
	case GGUFUint8:
		return int64(ggufGetValU8(f.ctx, id)), nil
	case GGUFInt8:
		return int64(ggufGetValI8(f.ctx, id)), nil
	case GGUFUint16:
		return int64(ggufGetValU16(f.ctx, id)), nil
	case GGUFInt16:
		return int64(ggufGetValI16(f.ctx, id)), nil
	case GGUFUint32:
		return int64(ggufGetValU32(f.ctx, id)), nil
	case GGUFInt32:
		return int64(ggufGetValI32(f.ctx, id)), nil
	case GGUFUint64:
		return int64(ggufGetValU64(f.ctx, id)), nil
	case GGUFInt64:
		return ggufGetValI64(f.ctx, id), nil
	default:
		return 0, fmt.Errorf("gguf: key %s has type %d, want an integer", key, t)
	}
}

// Float returns a floating-point value of key.
func (f *GGUFFile) Float(key string) (float64, error) {
	id := ggufFindKey(f.ctx, key)
	if id < 0 {
		return 0, fmt.Errorf("gguf: key %s not found", key)
	}
	switch t := ggufGetKVType(f.ctx, id); t {
	case GGUFFloat32:
		return float64(ggufGetValF32(f.ctx, id)), nil
	case GGUFFloat64:
		return ggufGetValF64(f.ctx, id), nil
	default:
		return 0, fmt.Errorf("gguf: key %s has type %d, want a float", key, t)
	}
}

// String returns a string value of key.
func (f *GGUFFile) String(key string) (string, error) {
	id := ggufFindKey(f.ctx, key)
	if id < 0 {
		return "", fmt.Errorf("gguf: key %s not found", key)
	}
	if t := ggufGetKVType(f.ctx, id); t != GGUFString {
		return "", fmt.Errorf("gguf: key %s has type %d, want a string", key, t)
	}
	return ggufGetValStr(f.ctx, id), nil
}

// ArrayLen returns the length of an array value of key.
func (f *GGUFFile) ArrayLen(key string) (int, error) {
	id := ggufFindKey(f.ctx, key)
	if id < 0 {
		return 0, fmt.Errorf("gguf: key %s not found", key)
	}
	if t := ggufGetKVType(f.ctx, id); t != GGUFArray {
		return 0, fmt.Errorf("gguf: key %s has type %d, want an array", key, t)
	}
	return int(ggufGetArrN(f.ctx, id)), nil
}

// Tensors lists the tensor directory in file order.
func (f *GGUFFile) Tensors() ([]GGUFTensorInfo, error) {
	n := ggufGetNTensors(f.ctx)
	if n < 0 {
		return nil, errors.New("gguf: negative tensor count")
	}
	base := int64(ggufGetDataOffset(f.ctx))
	out := make([]GGUFTensorInfo, n)
	for i := range n {
		ne := ggufGetTensorNe(f.ctx, i)
		var dims [4]int64
		if ne != 0 {
			dims = *(*[4]int64)(ptrFromUintptr(ne))
		}
		out[i] = GGUFTensorInfo{
			Name:   ggufGetTensorName(f.ctx, i),
			Type:   ggufGetTensorType(f.ctx, i),
			Ne:     dims,
			Offset: base + int64(ggufGetTensorOff(f.ctx, i)),
			Size:   int64(ggufGetTensorSize(f.ctx, i)),
		}
	}
	return out, nil
}

// ptrFromUintptr turns an address of C memory into a pointer without
// tripping vet's unsafeptr check (the memory is not managed by Go).
func ptrFromUintptr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }
