// Package builtin is omar's built-in model, embedded in the binary: a
// small llama (the model package's "base" shape, about 1M parameters, a
// BPE vocabulary of 1,024 tokens fitted to omar's own corpus) trained from
// scratch, every weight, on the scripted policies' play of every
// environment rendered through the self-play seat streams (the recipe is
// bc.DefaultBuild). It is what `omar selfplay`, `omar eval` and
// `make run` play when no model is given; `omar model default --out F`
// writes it and `omar model default --rebuild --out F` trains it anew
// from the recipe, byte for byte (docs/models.md).
package builtin

import (
	"bytes"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
)

//go:embed omar-base.gguf
var file []byte

// Name is the file's name in the repository.
const Name = "omar-base.gguf"

// SHA256 is the checksum of the embedded file (a test checks it).
const SHA256 = "8fe02df65a84b57cd1d11e19c6ff5b96a718af2344883a08fe113eb1ad6653dd"

// Bytes returns the model file. The slice is shared: do not modify it.
func Bytes() []byte { return file }

// WriteFile writes the model to path.
func WriteFile(path string) error { return os.WriteFile(path, file, 0o644) }

// Is reports whether the file at path is the built-in model (a copy of
// it, as a run directory's model.gguf is): same size, then same bytes.
// Files of another size are not read.
func Is(path string) bool {
	st, err := os.Stat(path)
	if err != nil || st.Size() != int64(len(file)) {
		return false
	}
	b, err := os.ReadFile(path)
	return err == nil && bytes.Equal(b, file)
}

// CacheFile writes the model into the user's cache directory once (named
// by its checksum, so a new build's model never meets an old file) and
// returns its path: what a command plays when no model is given.
func CacheFile() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	path := filepath.Join(dir, "omar", "builtin-"+SHA256[:16]+".gguf")
	if st, err := os.Stat(path); err == nil && st.Size() == int64(len(file)) {
		return path, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("the built-in model: %w", err)
	}
	// Written aside and renamed: a reader never sees half a file.
	tmp := path + ".tmp"
	if err := WriteFile(tmp); err != nil {
		return "", fmt.Errorf("the built-in model: %w", err)
	}
	return path, os.Rename(tmp, path)
}
