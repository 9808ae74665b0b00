package cpuvariant

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// fakeLibs writes empty files named like a llama.cpp CPU install.
func fakeLibs(t *testing.T, names ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cpu")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ns []string
	for _, e := range es {
		ns = append(ns, e.Name())
	}
	return ns
}

func TestDir(t *testing.T) {
	dir := fakeLibs(t, "libggml-base.so", "libggml.so", "libllama.so",
		File("haswell"), File("icelake"), File("x64"))
	// Concurrent callers (test processes of several packages) agree.
	var wg sync.WaitGroup
	got := make([]string, 4)
	errs := make([]error, 4)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = Dir(dir, "haswell")
		}()
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil || got[i] != dir+"-haswell" {
			t.Fatalf("Dir = %q, %v; want %q", got[i], errs[i], dir+"-haswell")
		}
	}
	want := []string{"libggml-base.so", File("haswell"), "libggml.so", "libllama.so"}
	if n := names(t, got[0]); !slices.Equal(n, want) {
		t.Errorf("pinned directory holds %v, want %v", n, want)
	}
	if target, err := os.Readlink(filepath.Join(got[0], "libllama.so")); err != nil || !filepath.IsAbs(target) {
		t.Errorf("libllama.so links to %q (%v), want an absolute path", target, err)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), ".pin-*")); len(leftovers) > 0 {
		t.Errorf("temporary directories left: %v", leftovers)
	}
	// A directory of one variant is its own pin.
	if again, err := Dir(got[0], "haswell"); err != nil || again != got[0] {
		t.Errorf("Dir(pinned) = %q, %v; want %q", again, err, got[0])
	}
	if other, err := Dir(dir, "icelake"); err != nil || other != dir+"-icelake" {
		t.Errorf("Dir(icelake) = %q, %v", other, err)
	}
}

func TestDirErrors(t *testing.T) {
	dir := fakeLibs(t, "libllama.so", File("haswell"), File("x64"))
	for _, tc := range []struct{ dir, variant, want string }{
		{dir, "zen4", "its CPU variants: haswell, x64"},
		{dir, "", "invalid variant"},
		{dir, "../x64", "invalid variant"},
		{filepath.Join(dir, "missing"), "haswell", "no such file"},
	} {
		if _, err := Dir(tc.dir, tc.variant); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Dir(%s, %q) = %v; want an error with %q", tc.dir, tc.variant, err, tc.want)
		}
	}
}

// TestDirCache: where the sibling cannot be made (here a file in its
// place; a read-only install in practice), the pinned directory is made in
// the user's cache instead.
func TestDirCache(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	dir := fakeLibs(t, "libllama.so", File("haswell"), File("x64"))
	if err := os.WriteFile(dir+"-x64", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Dir(dir, "x64")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, filepath.Join(cache, "omar", "llama")+string(filepath.Separator)) || !strings.HasSuffix(got, "-x64") {
		t.Errorf("Dir = %q, want a directory in the cache %s", got, cache)
	}
	if n := names(t, got); !slices.Equal(n, []string{File("x64"), "libllama.so"}) {
		t.Errorf("cached directory holds %v", n)
	}
	if again, err := Dir(dir, "x64"); err != nil || again != got {
		t.Errorf("second call: %q, %v; want %q", again, err, got)
	}
}
