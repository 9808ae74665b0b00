// Package cpuvariant pins the CPU kernels ggml runs. The llama.cpp CPU
// backend ships as one library per instruction-set level
// (libggml-cpu-haswell.so, -icelake, -zen4, …) and ggml loads the best
// one the CPU runs; kernels of another vector width sum in another order,
// so a computation that is bit-exact on one machine is another draw on a
// machine of another kind. Dir makes a library directory in which one
// variant is the only choice, so that every machine that runs it computes
// the same bits.
//
// It imports nothing of omar, so the bindings' test helpers can use it.
package cpuvariant

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Portable is the variant every x86-64 CPU with AVX2, FMA and BMI2 runs
// (Intel since 2013, AMD since 2015): the widest choice of machines that
// can agree bit for bit.
const Portable = "haswell"

// prefix starts the file name of every CPU variant.
const prefix = "libggml-cpu-"

// File is the library file of a variant.
func File(variant string) string { return prefix + variant + ".so" }

// Variants lists the CPU variants in dir (their names, without prefix and
// suffix).
func Variants(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var vs []string
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, prefix) && strings.HasSuffix(n, ".so") {
			vs = append(vs, strings.TrimSuffix(strings.TrimPrefix(n, prefix), ".so"))
		}
	}
	return vs, nil
}

// Dir returns a library directory with dir's libraries and variant as the
// only CPU variant: dir itself when that is already so, else its sibling
// dir-variant, made once with symbolic links, or where nothing may be
// written beside dir, a directory in the user's cache. Whether the CPU
// runs the variant is ggml's to say when it loads the directory: it
// loads no CPU backend the CPU cannot run.
func Dir(dir, variant string) (string, error) {
	if variant == "" || strings.ContainsAny(variant, `/\`) {
		return "", fmt.Errorf("cpuvariant: invalid variant %q", variant)
	}
	vs, err := Variants(dir)
	if err != nil {
		return "", fmt.Errorf("cpuvariant: %w", err)
	}
	switch {
	case !slices.Contains(vs, variant):
		return "", fmt.Errorf("cpuvariant: %s has no %s (its CPU variants: %s)", dir, File(variant), strings.Join(vs, ", "))
	case len(vs) == 1:
		return dir, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("cpuvariant: %w", err)
	}
	targets := []string{strings.TrimRight(dir, string(filepath.Separator)) + "-" + variant}
	// Where nothing may be written beside dir (a system-wide install):
	// the user's cache, one entry per library directory.
	if cache, err := os.UserCacheDir(); err == nil {
		sum := sha256.Sum256([]byte(abs))
		targets = append(targets, filepath.Join(cache, "omar", "llama", fmt.Sprintf("%x-%s", sum[:6], variant)))
	}
	var errs []error
	for _, t := range targets {
		if only(t, variant) {
			return t, nil
		}
		err := os.MkdirAll(filepath.Dir(t), 0o755)
		if err == nil {
			err = link(abs, t, variant)
		}
		if err == nil {
			return t, nil
		}
		errs = append(errs, err)
	}
	return "", fmt.Errorf("cpuvariant: %w", errors.Join(errs...))
}

// link makes target: links to the libraries in dir, with variant as the
// only CPU variant. Concurrent callers each build a private directory and
// rename it into place.
func link(dir, target, variant string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(target), ".pin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // left only when the rename did not take it
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, prefix) && n != File(variant) {
			continue
		}
		if err := os.Symlink(filepath.Join(dir, n), filepath.Join(tmp, n)); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, target); err != nil && !only(target, variant) {
		return errors.Join(err, fmt.Errorf("%s is not a directory of the %s kernels alone", target, variant))
	}
	return nil
}

// only reports whether dir holds variant as its one CPU variant.
func only(dir, variant string) bool {
	vs, err := Variants(dir)
	return err == nil && len(vs) == 1 && vs[0] == variant
}
