// Package gguf reads and writes GGUF files (version 3), the model file format
// of llama.cpp and ggml, in pure Go.
//
// A GGUF file holds ordered key/value metadata and a list of named tensors.
// Writer builds a file in memory and writes it out; Open/Read parse the
// header of an existing file (metadata and tensor infos) and read tensor data
// on demand, so multi-gigabyte models are never loaded whole.
//
// Metadata values are plain Go values: uint8, int8, uint16, int16, uint32,
// int32, float32, bool, string, uint64, int64, float64 and slices of those
// (for example []string for tokenizer.ggml.tokens). Reading returns the same
// Go types, so a value round-trips unchanged. Tensor shapes are in ggml "ne"
// order: Shape[0] is the number of elements in a row (the fastest-varying
// dimension), so a weight matrix that maps n_in to n_out has shape
// [n_in, n_out].
//
// Malformed input never panics: every parse error is a *FormatError that
// names the byte offset where the file stopped making sense.
package gguf

import (
	"errors"
	"fmt"
)

// Magic is the first four bytes of every GGUF file.
const Magic = "GGUF"

// Version is the GGUF version this package writes. Read accepts versions 2
// and 3 (they share the layout with 64-bit counts).
const Version = 3

// DefaultAlignment is the alignment of the tensor data section and of each
// tensor's data when general.alignment is absent.
const DefaultAlignment = 32

// KeyAlignment is the metadata key that overrides DefaultAlignment.
const KeyAlignment = "general.alignment"

// MaxDims is ggml's GGML_MAX_DIMS: a tensor has at most four dimensions.
const MaxDims = 4

// ValueType is the type tag of a metadata value in the file.
type ValueType uint32

// Metadata value types (gguf_type in ggml/include/gguf.h).
const (
	TypeUint8 ValueType = iota
	TypeInt8
	TypeUint16
	TypeInt16
	TypeUint32
	TypeInt32
	TypeFloat32
	TypeBool
	TypeString
	TypeArray
	TypeUint64
	TypeInt64
	TypeFloat64
	numValueTypes
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
	"bool", "string", "array", "uint64", "int64", "float64"}

func (t ValueType) String() string {
	if t < numValueTypes {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("ValueType(%d)", uint32(t))
}

// size is the encoded size of a fixed-size value type, 0 for string/array.
func (t ValueType) size() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// KV is one metadata entry.
type KV struct {
	Key   string
	Value any
}

// TensorType is a ggml tensor element type (enum ggml_type).
type TensorType uint32

// Tensor types. Only F32, F16 and BF16 can be converted to float32 by this
// package; the quantized types are known so that files using them (real
// models) can be inspected and their sizes checked.
const (
	F32     TensorType = 0
	F16     TensorType = 1
	Q4_0    TensorType = 2
	Q4_1    TensorType = 3
	Q5_0    TensorType = 6
	Q5_1    TensorType = 7
	Q8_0    TensorType = 8
	Q8_1    TensorType = 9
	Q2_K    TensorType = 10
	Q3_K    TensorType = 11
	Q4_K    TensorType = 12
	Q5_K    TensorType = 13
	Q6_K    TensorType = 14
	Q8_K    TensorType = 15
	IQ2_XXS TensorType = 16
	IQ2_XS  TensorType = 17
	IQ3_XXS TensorType = 18
	IQ1_S   TensorType = 19
	IQ4_NL  TensorType = 20
	IQ3_S   TensorType = 21
	IQ2_S   TensorType = 22
	IQ4_XS  TensorType = 23
	I8      TensorType = 24
	I16     TensorType = 25
	I32     TensorType = 26
	I64     TensorType = 27
	F64     TensorType = 28
	IQ1_M   TensorType = 29
	BF16    TensorType = 30
	TQ1_0   TensorType = 34
	TQ2_0   TensorType = 35
	MXFP4   TensorType = 39
	NVFP4   TensorType = 40
	Q1_0    TensorType = 41
	Q2_0    TensorType = 42
)

// typeTraits are block size (elements) and block size in bytes, from
// ggml.c's type_traits table (checked with sizeof of the block structs of
// ggml-common.h in the llama.cpp v0.5.0 sources).
type typeTraits struct {
	name      string
	blockSize uint64
	typeSize  uint64
}

var tensorTypes = map[TensorType]typeTraits{
	F32: {"F32", 1, 4}, F16: {"F16", 1, 2}, Q4_0: {"Q4_0", 32, 18}, Q4_1: {"Q4_1", 32, 20},
	Q5_0: {"Q5_0", 32, 22}, Q5_1: {"Q5_1", 32, 24}, Q8_0: {"Q8_0", 32, 34}, Q8_1: {"Q8_1", 32, 36},
	Q2_K: {"Q2_K", 256, 84}, Q3_K: {"Q3_K", 256, 110}, Q4_K: {"Q4_K", 256, 144},
	Q5_K: {"Q5_K", 256, 176}, Q6_K: {"Q6_K", 256, 210}, Q8_K: {"Q8_K", 256, 292},
	IQ2_XXS: {"IQ2_XXS", 256, 66}, IQ2_XS: {"IQ2_XS", 256, 74}, IQ3_XXS: {"IQ3_XXS", 256, 98},
	IQ1_S: {"IQ1_S", 256, 50}, IQ4_NL: {"IQ4_NL", 32, 18}, IQ3_S: {"IQ3_S", 256, 110},
	IQ2_S: {"IQ2_S", 256, 82}, IQ4_XS: {"IQ4_XS", 256, 136}, I8: {"I8", 1, 1}, I16: {"I16", 1, 2},
	I32: {"I32", 1, 4}, I64: {"I64", 1, 8}, F64: {"F64", 1, 8}, IQ1_M: {"IQ1_M", 256, 56},
	BF16: {"BF16", 1, 2}, TQ1_0: {"TQ1_0", 256, 54}, TQ2_0: {"TQ2_0", 256, 66},
	MXFP4: {"MXFP4", 32, 17}, NVFP4: {"NVFP4", 64, 36}, Q1_0: {"Q1_0", 128, 18}, Q2_0: {"Q2_0", 64, 18},
}

func (t TensorType) String() string {
	if tr, ok := tensorTypes[t]; ok {
		return tr.name
	}
	return fmt.Sprintf("TensorType(%d)", uint32(t))
}

// Known reports whether this package knows the type's block layout.
func (t TensorType) Known() bool { _, ok := tensorTypes[t]; return ok }

// RowBytes returns the bytes of n elements of type t, or an error when t is
// unknown or n is not a whole number of blocks.
func (t TensorType) RowBytes(n uint64) (uint64, error) {
	tr, ok := tensorTypes[t]
	if !ok {
		return 0, fmt.Errorf("gguf: unknown tensor type %d", uint32(t))
	}
	if n%tr.blockSize != 0 {
		return 0, fmt.Errorf("gguf: %d elements of %s are not a whole number of %d-element blocks", n, tr.name, tr.blockSize)
	}
	return n / tr.blockSize * tr.typeSize, nil
}

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	Name string
	// Shape in ggml ne order: Shape[0] is the row length.
	Shape []uint64
	Type  TensorType
	// Offset of the tensor's data from the start of the data section.
	Offset uint64
}

// Elements is the product of the shape.
func (t TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Bytes is the size of the tensor's data in the file.
func (t TensorInfo) Bytes() (uint64, error) {
	if len(t.Shape) == 0 {
		return t.Type.RowBytes(1)
	}
	row, err := t.Type.RowBytes(t.Shape[0])
	if err != nil {
		return 0, fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	n := row
	for _, d := range t.Shape[1:] {
		n *= d
	}
	return n, nil
}

// FormatError reports a malformed or truncated file.
type FormatError struct {
	Offset int64 // byte offset in the file where the problem was found
	Msg    string
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("gguf: malformed file at offset %d: %s", e.Offset, e.Msg)
}

// ErrNotGGUF is wrapped by the error for files that do not start with the
// GGUF magic.
var ErrNotGGUF = errors.New("not a GGUF file")
