package main

import (
	"os"
	"testing"

	"github.com/omar-selfplay/omar/llamacpp/llamatest"
)

// TestMain points the commands' default library directory (OMAR_LLAMA_LIB)
// at the tests' one: llama.cpp is loaded once per process, and tests that
// name llamatest.LibDir (its pinned CPU variant) share this process with
// commands that would otherwise load lib/llama/cpu.
func TestMain(m *testing.M) {
	if dir := llamatest.LibDir(); dir != "" {
		os.Setenv("OMAR_LLAMA_LIB", dir)
	}
	os.Exit(m.Run())
}
