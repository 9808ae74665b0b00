package builtin

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"testing"

	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/model"
)

func TestEmbeddedModel(t *testing.T) {
	if got := fmt.Sprintf("%x", sha256.Sum256(Bytes())); got != SHA256 {
		t.Errorf("embedded model sha256 %s, want %s (rebuild: omar model default --rebuild)", got, SHA256)
	}
	f, err := gguf.Read(bytes.NewReader(Bytes()), int64(len(Bytes())))
	if err != nil {
		t.Fatal(err)
	}
	in, err := model.Inspect(f)
	if err != nil {
		t.Fatal(err)
	}
	if in.Arch != "llama" {
		t.Errorf("arch %q", in.Arch)
	}
}

func TestCacheFile(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for i := range 2 { // the second call finds the file
		path, err := CacheFile()
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(b, Bytes()) {
			t.Fatalf("call %d: %s holds %d bytes (%v), want the embedded model's %d", i+1, path, len(b), err, len(Bytes()))
		}
	}
}

func TestIs(t *testing.T) {
	dir := t.TempDir()
	same, other, short := dir+"/same.gguf", dir+"/other.gguf", dir+"/short.gguf"
	if err := WriteFile(same); err != nil {
		t.Fatal(err)
	}
	changed := bytes.Clone(Bytes())
	changed[len(changed)-1] ^= 1
	if err := os.WriteFile(other, changed, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(short, Bytes()[:100], 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{same: true, other: false, short: false, dir + "/missing.gguf": false} {
		if got := Is(path); got != want {
			t.Errorf("Is(%s) = %v, want %v", path, got, want)
		}
	}
}
