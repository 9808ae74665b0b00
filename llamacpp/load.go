// Package llamacpp binds the llama.cpp v0.5.0 shared libraries (libllama,
// libggml, libggml-base) through purego, without cgo. It is the only package
// of omar that uses unsafe.
//
// One file per header area holds that area's symbols (with their C
// prototypes) and registers its own loader with register; Load opens the
// libraries in the required order and runs every loader.
//
// C resources are released with explicit Close methods, never finalizers.
// C status codes are turned into Go errors here, once, so callers never see
// them.
package llamacpp

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/ebitengine/purego"
)

// ExpectedVersion is the llama.cpp release these bindings mirror. The
// library reports it as llama_version() = "0.5.0-dev"; any other version is
// refused because struct layouts change between releases.
const ExpectedVersion = "0.5.0"

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
	loadMu  sync.Mutex
	loadErr error
	loadDir string
	loaded  bool
)

// ErrNotLoaded is returned by functions that need Load first.
var ErrNotLoaded = errors.New("llamacpp: library not loaded (call llamacpp.Load)")

// Load opens the llama.cpp libraries in dir once per process, checks their
// version, loads the compute backends found in dir and initialises llama.
// A failed Load may be retried with another directory (nothing is bound
// until every library opened and the version matched); after a successful
// load, a call with a different dir is an error.
func Load(dir string) error {
	loadMu.Lock()
	defer loadMu.Unlock()
	abs, err := filepath.Abs(dir)
	if err != nil || dir == "" {
		return errors.New("llamacpp: no library directory given")
	}
	if loaded {
		if abs != loadDir {
			return fmt.Errorf("llamacpp: already loaded from %s, cannot load %s too", loadDir, abs)
		}
		return nil
	}
	if loadErr != nil && abs == loadDir {
		return loadErr
	}
	loadDir = abs
	loadErr = load(abs)
	loaded = loadErr == nil
	return loadErr
}

// Loaded reports whether Load succeeded.
func Loaded() bool {
	loadMu.Lock()
	defer loadMu.Unlock()
	return loaded
}

// LibDir returns the directory the libraries were loaded from ("" before a
// successful Load).
func LibDir() string {
	loadMu.Lock()
	defer loadMu.Unlock()
	if !loaded {
		return ""
	}
	return loadDir
}

// DefaultLibDir picks the library directory: override (--llama-lib) when
// set, else the environment's OMAR_LLAMA_LIB (so programs using the
// library packages with empty options honour it as the command does);
// otherwise the first lib/llama/cpu found next to the executable, in a
// parent of it, or in the working directory or one of its parents (so `go
// test` and `go run` inside the repository find the libraries the install
// script put there).
// It returns "lib/llama/cpu" when nothing exists, so the error names it.
func DefaultLibDir(override string) string {
	if override != "" {
		return override
	}
	if env := os.Getenv("OMAR_LLAMA_LIB"); env != "" {
		return env
	}
	var starts []string
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, s := range starts {
		for d := s; ; d = filepath.Dir(d) {
			cand := filepath.Join(d, "lib", "llama", "cpu")
			if st, err := os.Stat(cand); err == nil && st.IsDir() {
				return cand
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return filepath.Join("lib", "llama", "cpu")
}

var (
	// const char * llama_version(void);
	llamaVersion func() string
	// void llama_backend_init(void);
	llamaBackendInit func()
	// void ggml_backend_load_all_from_path(const char * dir_path);
	loadBackendsFromPath func(dir string)
	// size_t ggml_backend_reg_count(void);  (registry of loaded backends)
	loadedBackendCount func() uintptr
)

func load(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("llamacpp: library directory %s: %w (install the libraries with scripts/install-llama.sh, or set OMAR_LLAMA_LIB / --llama-lib)", dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("llamacpp: library directory %s is not a directory", dir)
	}
	var libs libraries
	for _, l := range []struct {
		dst   *uintptr
		names []string
	}{
		{&libs.ggmlBase, []string{"libggml-base.so"}},
		// The npm package's names, its CUDA package's, and a build's own.
		{&libs.ggml, []string{"libggml.v0.5.0.so", "libggml.cuda.v0.5.0.so", "libggml.so"}},
		{&libs.llama, []string{"libllama.v0.5.0.so", "libllama.cuda.v0.5.0.so", "libllama.so"}},
	} {
		h, err := dlopenFirst(dir, l.names)
		if err != nil {
			return err
		}
		*l.dst = h
	}
	if err := bindAll(libs.llama, []binding{{&llamaVersion, "llama_version"}, {&llamaBackendInit, "llama_backend_init"}}); err != nil {
		return err
	}
	if v := llamaVersion(); !versionMatches(v) {
		return fmt.Errorf("llamacpp: library in %s is llama.cpp %q, want %s (these bindings mirror the v%s structs; install it with scripts/install-llama.sh)", dir, v, ExpectedVersion, ExpectedVersion)
	}
	if err := bindAll(libs.ggml, []binding{{&loadBackendsFromPath, "ggml_backend_load_all_from_path"},
		{&loadedBackendCount, "ggml_backend_reg_count"},
	}); err != nil {
		return err
	}
	for _, f := range loaders {
		if err := f(libs); err != nil {
			return err
		}
	}
	// Route logging to slog before anything talks.
	installLogger()
	// Without this, model loading fails with "no backends are loaded": the
	// CPU backend itself is a dynamically loaded variant (libggml-cpu-*.so).
	loadBackendsFromPath(dir)
	if loadedBackendCount() == 0 {
		return fmt.Errorf("llamacpp: no compute backend (libggml-cpu-*.so) could be loaded from %s", dir)
	}
	llamaBackendInit()
	return nil
}

// versionMatches accepts "0.5.0" and suffixed forms such as "0.5.0-dev".
func versionMatches(v string) bool {
	return v == ExpectedVersion || strings.HasPrefix(v, ExpectedVersion+"-")
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
	return 0, fmt.Errorf("llamacpp: none of %v found (install the libraries with scripts/install-llama.sh, or set OMAR_LLAMA_LIB / --llama-lib)", tried)
}
