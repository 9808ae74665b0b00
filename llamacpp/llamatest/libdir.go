// Package llamatest holds test helpers for code that runs llama.cpp: where
// the install script put the libraries (LibDir) and random LoRA adapters
// that change the logits (RandomLoRA). Test models come from package model
// (model.WriteFile) and adapters are written with gguf.WriteLoRA.
//
// It does not import llamacpp, so the bindings' own tests can use it.
package llamatest

import (
	"path/filepath"
	"runtime"
	"sync"

	"golang.org/x/sys/cpu"

	"github.com/omar-selfplay/omar/llamacpp/cpuvariant"
)

// PinnedVariant is the one ggml CPU variant tests load when the machine
// runs it. ggml otherwise loads the best variant for the CPU, and kernels
// of another vector width (AVX-512, …) round differently, so numbers that
// tests pin bit for bit would hold on one kind of machine only; every
// x86-64 CPU with AVX2, FMA and BMI2 runs this one.
const PinnedVariant = cpuvariant.Portable

var (
	pinOnce sync.Once
	pinDir  string
)

// LibDir returns the llama.cpp libraries of the repository that contains
// the working directory (tests run in their package directory), or ""
// when the install script has not put them in lib/llama/cpu. Where the
// CPU runs PinnedVariant, the directory is lib/llama/cpu-haswell: the
// same libraries with that CPU variant alone (links, made once).
func LibDir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return ""
	}
	// file is <repo>/llamacpp/llamatest/libdir.go.
	dir := filepath.Join(filepath.Dir(file), "..", "..", "lib", "llama", "cpu")
	matches, _ := filepath.Glob(filepath.Join(dir, "libllama*.so"))
	if len(matches) == 0 {
		return ""
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	pinOnce.Do(func() { pinDir = pin(abs) })
	if pinDir != "" {
		return pinDir
	}
	return abs
}

// Pinned reports whether LibDir loads PinnedVariant alone, so that numbers
// recorded on one machine hold on another.
func Pinned() bool {
	LibDir()
	return pinDir != ""
}

// pin returns a directory holding dir's libraries with PinnedVariant as
// the only CPU variant (cpuvariant.Dir), or "" when this CPU cannot run
// it or the directory cannot be made.
func pin(dir string) string {
	if runtime.GOARCH != "amd64" || !cpu.X86.HasAVX2 || !cpu.X86.HasFMA || !cpu.X86.HasBMI2 {
		return ""
	}
	d, err := cpuvariant.Dir(dir, PinnedVariant)
	if err != nil {
		return ""
	}
	return d
}
