package llamacpp

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// ggufBytes builds a small GGUF image: one string KV and one F32 tensor.
func ggufBytes(tensorLen int) []byte {
	var b bytes.Buffer
	le := binary.LittleEndian
	put := func(v any) { binary.Write(&b, le, v) }
	str := func(s string) { put(uint64(len(s))); b.WriteString(s) }
	put(uint32(ggufMagic))
	put(uint32(3))
	put(uint64(1)) // tensors
	put(uint64(1)) // kv
	str("general.architecture")
	put(uint32(ggufString))
	str("llama")
	str("t")
	put(uint32(1))
	put(uint64(tensorLen))
	put(uint32(0)) // F32
	put(uint64(0))
	for b.Len()%32 != 0 {
		b.WriteByte(0)
	}
	b.Write(make([]byte, 4*tensorLen))
	return b.Bytes()
}

func TestCheckModelFile(t *testing.T) {
	good := ggufBytes(8)
	tests := []struct {
		name string
		data []byte
		ok   bool
	}{
		{"good", good, true},
		{"one byte short", good[:len(good)-1], false},
		{"header only", good[:24], false},
		{"wrong version", append(append([]byte{}, good[:4]...), append([]byte{9, 0, 0, 0}, good[8:]...)...), false},
		{"huge tensor count", append(append([]byte{}, good[:8]...), append([]byte{0, 0, 0, 0, 0, 0, 0, 1}, good[16:]...)...), false},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, tt.name)
			os.WriteFile(p, tt.data, 0o644)
			err := CheckModelFile(p)
			if (err == nil) != tt.ok {
				t.Errorf("got %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

// FuzzCheckModelFile: no input makes the checker panic or hang, and the
// intact image always passes.
func FuzzCheckModelFile(f *testing.F) {
	good := ggufBytes(8)
	f.Add(good)
	f.Add(good[:30])
	f.Add([]byte("GGUF"))
	f.Add([]byte{})
	dir := f.TempDir()
	p := filepath.Join(dir, "fuzz.gguf")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		err := CheckModelFile(p)
		if bytes.Equal(data, good) && err != nil {
			t.Errorf("intact image rejected: %v", err)
		}
	})
}
