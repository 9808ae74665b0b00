package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/internal/cliflag"
)

func TestModelInitInfo(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		arch     string
		wantInfo []string
	}{
		{"llama", []string{"architecture:  llama (omar-tiny-llama)", "vocabulary:    512 tokens, tokenizer gpt2, pre-tokenizer gpt-2", "ChatML", "output.weight"}},
		{"qwen2", []string{"architecture:  qwen2", "blk.0.attn_q.bias", "tied to token_embd"}},
		{"qwen3", []string{"architecture:  qwen3", "blk.0.attn_q_norm.weight", "2 layers, embedding 64"}},
	}
	for _, tt := range tests {
		t.Run(tt.arch, func(t *testing.T) {
			path := filepath.Join(dir, tt.arch+".gguf")
			var out, errb bytes.Buffer
			env := &cliEnv{stdout: &out, stderr: &errb}
			if code := runMain(context.Background(), env, []string{"model", "init", "--arch", tt.arch, "--seed", "3", "--out", path}); code != 0 {
				t.Fatalf("init: exit %d, stderr %s", code, errb.String())
			}
			if !strings.Contains(out.String(), "wrote "+path) {
				t.Errorf("init output: got %q", out.String())
			}
			out.Reset()
			if code := runMain(context.Background(), env, []string{"model", "info", path}); code != 0 {
				t.Fatalf("info: exit %d, stderr %s", code, errb.String())
			}
			for _, want := range tt.wantInfo {
				if !strings.Contains(out.String(), want) {
					t.Errorf("info output lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}

func TestModelInfoErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.gguf")
	env := &cliEnv{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	if err := runModel(context.Background(), env, []string{"init", "--out", good}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(good)
	truncated := filepath.Join(dir, "truncated.gguf")
	os.WriteFile(truncated, data[:len(data)/2], 0o644)
	text := filepath.Join(dir, "text.gguf")
	os.WriteFile(text, []byte("hello, I am not a model"), 0o644)

	tests := []struct {
		name string
		args []string
		want string // in the error
		use  bool   // a usage error
	}{
		{"truncated", []string{"info", truncated}, "truncated", false},
		{"not gguf", []string{"info", text}, "not a GGUF file", false},
		{"missing", []string{"info", filepath.Join(dir, "nope.gguf")}, "no such file", false},
		{"no file", []string{"info"}, "", true},
		{"bad arch", []string{"init", "--arch", "gpt2", "--out", filepath.Join(dir, "x.gguf")}, "unknown architecture", true},
		{"no out", []string{"init"}, "--out", true},
		{"no subcommand", nil, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := runModel(context.Background(), env, tt.args)
			if err == nil {
				t.Fatal("got nil error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %q, want it to mention %q", err, tt.want)
			}
			if errors.Is(err, cliflag.ErrUsage) != tt.use {
				t.Errorf("usage error: got %v, want %v", errors.Is(err, cliflag.ErrUsage), tt.use)
			}
			var fe *gguf.FormatError
			if tt.name == "truncated" && !errors.As(err, &fe) {
				t.Errorf("got %T, want a *gguf.FormatError", err)
			}
		})
	}
}
