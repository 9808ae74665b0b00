// Package llamacpp binds the llama.cpp v0.5.0 shared libraries (libllama,
// libggml, libggml-base) through purego, without cgo. It is the only package
// of omar that uses unsafe.
//
// One file per header area holds that area's symbols (with their C
// prototypes) and registers its own loader with register; Load opens the
// libraries in the required order and runs every loader.
package llamacpp

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/ebitengine/purego"
)

// libraries are the handles of the opened shared libraries.
type libraries struct {
	ggmlBase uintptr // libggml-base.so: tensors, ops, graphs, gguf
	ggml     uintptr // libggml.so: backend registry
	llama    uintptr // libllama.so
}

// loaders bind the symbols of one header area each.
var loaders []func(libs libraries) error

// register adds an area's loader; call it from an init function.
func register(f func(libs libraries) error) { loaders = append(loaders, f) }

var (
	loadOnce sync.Once
	loadErr  error
	loadDir  string
)

// ErrNotLoaded is returned by functions that need Load first.
var ErrNotLoaded = errors.New("llamacpp: library not loaded (call llamacpp.Load)")

// Load opens the llama.cpp libraries in dir once per process. Later calls
// return the first result; a call with a different dir after a successful
// load is an error.
func Load(dir string) error {
	loadOnce.Do(func() {
		loadDir = dir
		loadErr = load(dir)
	})
	if loadErr == nil && dir != loadDir {
		return fmt.Errorf("llamacpp: already loaded from %s, cannot load %s too", loadDir, dir)
	}
	return loadErr
}

// Loaded reports whether Load succeeded.
func Loaded() bool { return loadDir != "" && loadErr == nil }

func load(dir string) error {
	if dir == "" {
		return errors.New("llamacpp: no library directory given")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("llamacpp: %w", err)
	}
	var libs libraries
	for _, l := range []struct {
		dst   *uintptr
		names []string
	}{
		{&libs.ggmlBase, []string{"libggml-base.so"}},
		{&libs.ggml, []string{"libggml.v0.5.0.so", "libggml.so"}},
		{&libs.llama, []string{"libllama.v0.5.0.so", "libllama.so"}},
	} {
		h, err := dlopenFirst(abs, l.names)
		if err != nil {
			return err
		}
		*l.dst = h
	}
	for _, f := range loaders {
		if err := f(libs); err != nil {
			return err
		}
	}
	return nil
}

func dlopenFirst(dir string, names []string) (uintptr, error) {
	var tried []string
	for _, n := range names {
		p := filepath.Join(dir, n)
		if _, err := os.Stat(p); err != nil {
			tried = append(tried, p)
			continue
		}
		h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			return 0, fmt.Errorf("llamacpp: open %s: %w", p, err)
		}
		return h, nil
	}
	return 0, fmt.Errorf("llamacpp: none of %v found (install the libraries with scripts/install-llama.sh, or set OMAR_LLAMA_LIB)", tried)
}
