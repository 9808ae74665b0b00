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
)

// LibDir returns lib/llama/cpu of the repository that contains the working
// directory (tests run in their package directory), or "" when the install
// script has not put the libraries there.
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
	return abs
}
