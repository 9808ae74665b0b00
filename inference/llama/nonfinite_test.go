package llama

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/gguf"
)

// TestNewRefusesNonFinite: a model with a NaN weight is refused when it is
// opened, naming the tensor — before, it loaded and grammar-constrained
// sampling aborted the process.
func TestNewRefusesNonFinite(t *testing.T) {
	o := testOptions(t)
	data, err := os.ReadFile(o.Model)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(o.Model)
	if err != nil {
		t.Fatal(err)
	}
	var target gguf.TensorInfo
	for _, ti := range f.Tensors {
		if ti.Type == gguf.F32 && strings.HasPrefix(ti.Name, "blk.0.") {
			target = ti
			break
		}
	}
	off := f.DataOffset + int64(target.Offset)
	f.Close()
	if target.Name == "" {
		t.Fatal("the tiny model has no F32 tensor in block 0")
	}
	binary.LittleEndian.PutUint32(data[off+4*3:], math.Float32bits(float32(math.NaN())))
	o.Model = filepath.Join(t.TempDir(), "nan.gguf")
	if err := os.WriteFile(o.Model, data, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := New(o)
	if err == nil {
		b.Close()
		t.Fatalf("New: got no error, want a refusal naming %s", target.Name)
	}
	if !strings.Contains(err.Error(), target.Name) || !strings.Contains(err.Error(), "non-finite") {
		t.Errorf("got %v, want an error naming %s and non-finite weights", err, target.Name)
	}
}
