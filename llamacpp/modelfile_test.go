package llamacpp

import (
	"bytes"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/model"
)

// tinyImage is the tiny llama model's GGUF image with the metadata edits
// applied (a nil value deletes nothing: every case sets a value).
func tinyImage(t testing.TB, arch string, set map[string]any) []byte {
	t.Helper()
	w, err := model.Generate(model.Options{Arch: arch, Preset: "tiny", Seed: 1}.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range set {
		if err := w.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if _, err := w.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// hyperparamCases are model files that are valid GGUF but whose
// hyperparameters llama.cpp cannot use; key is the key the error names.
var hyperparamCases = []struct {
	name, key string
	set       map[string]any
	// aborts: llama.cpp v0.5.0 kills the process on this file when it is
	// not checked (load or first decode; see TestUncheckedAborts). The
	// others are refused by llama.cpp with a log line, or load and give
	// NaN or garbage logits.
	aborts bool
}{
	{"huge block count", "llama.block_count", map[string]any{"llama.block_count": uint32(math.MaxInt32)}, true},
	{"zero block count", "llama.block_count", map[string]any{"llama.block_count": uint32(0)}, true},
	{"NaN rms epsilon", "llama.attention.layer_norm_rms_epsilon", map[string]any{"llama.attention.layer_norm_rms_epsilon": float32(math.NaN())}, true},
	{"Inf rms epsilon", "llama.attention.layer_norm_rms_epsilon", map[string]any{"llama.attention.layer_norm_rms_epsilon": float32(math.Inf(1))}, false},
	{"negative rms epsilon", "llama.attention.layer_norm_rms_epsilon", map[string]any{"llama.attention.layer_norm_rms_epsilon": float32(-1e-5)}, true},
	{"zero rms epsilon", "llama.attention.layer_norm_rms_epsilon", map[string]any{"llama.attention.layer_norm_rms_epsilon": float32(0)}, false},
	{"zero heads", "llama.attention.head_count", map[string]any{"llama.attention.head_count": uint32(0)}, false},
	{"kv heads do not divide", "llama.attention.head_count_kv", map[string]any{"llama.attention.head_count_kv": uint32(3)}, false},
	{"more kv heads than heads", "llama.attention.head_count_kv", map[string]any{"llama.attention.head_count_kv": uint32(8)}, false},
	{"per-layer heads, wrong length", "llama.attention.head_count", map[string]any{"llama.attention.head_count": []uint32{4, 4, 4}}, false},
	{"zero embedding", "llama.embedding_length", map[string]any{"llama.embedding_length": uint32(0)}, false},
	{"embedding vs token_embd", "llama.embedding_length", map[string]any{"llama.embedding_length": uint32(96)}, false},
	{"negative context", "llama.context_length", map[string]any{"llama.context_length": int32(-5)}, false},
	{"zero context", "llama.context_length", map[string]any{"llama.context_length": uint32(0)}, false},
	{"odd rope", "llama.rope.dimension_count", map[string]any{"llama.rope.dimension_count": uint32(15)}, false},
	{"rope beyond head", "llama.rope.dimension_count", map[string]any{"llama.rope.dimension_count": uint32(64)}, false},
	{"NaN rope base", "llama.rope.freq_base", map[string]any{"llama.rope.freq_base": float32(math.NaN())}, false},
	{"vocab size mismatch", "llama.vocab_size", map[string]any{"llama.vocab_size": uint32(1000)}, false},
	{"short token types", "tokenizer.ggml.token_type", map[string]any{"tokenizer.ggml.token_type": []int32{1, 1}}, false},
	{"short scores", "tokenizer.ggml.scores", map[string]any{"tokenizer.ggml.scores": []float32{0}}, false},
	{"tokens vs token_embd", "tokenizer.ggml.tokens", map[string]any{"tokenizer.ggml.tokens": []string{"a", "b"}, "tokenizer.ggml.token_type": []int32{1, 1}, "llama.vocab_size": uint32(2)}, false},
	{"experts used beyond count", "llama.expert_used_count", map[string]any{"llama.expert_count": uint32(4), "llama.expert_used_count": uint32(5)}, true},
	{"too many experts", "llama.expert_count", map[string]any{"llama.expert_count": uint32(100000)}, true},
	{"block count as string", "llama.block_count", map[string]any{"llama.block_count": "2"}, false},
}

func TestCheckHyperparams(t *testing.T) {
	dir := t.TempDir()
	for _, arch := range model.Architectures {
		p := filepath.Join(dir, arch+".gguf")
		if err := os.WriteFile(p, tinyImage(t, arch, nil), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := CheckModelFile(p); err != nil {
			t.Errorf("tiny %s model rejected: %v", arch, err)
		}
	}
	for _, tc := range hyperparamCases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".gguf")
			if err := os.WriteFile(p, tinyImage(t, "llama", tc.set), 0o644); err != nil {
				t.Fatal(err)
			}
			err := CheckModelFile(p)
			var me *ModelFileError
			if !errors.As(err, &me) || !errors.Is(err, ErrBadModelFile) {
				t.Fatalf("got %v, want a *ModelFileError", err)
			}
			if me.Key != tc.key || !strings.Contains(err.Error(), tc.key) {
				t.Errorf("got %q (key %q), want it to name %s", err, me.Key, tc.key)
			}
			if me.Path != p {
				t.Errorf("path %q, want %q", me.Path, p)
			}
		})
	}
}

// TestUncheckedAborts pins why the checks exist: the files marked aborts
// kill a process that hands them to llama.cpp unchecked, while LoadModel
// refuses every case with an error. Each file is tried in a child
// process (an abort cannot be caught in Go).
func TestUncheckedAborts(t *testing.T) {
	if name := os.Getenv("LLAMACPP_TEST_UNCHECKED"); name != "" {
		uncheckedChild(t, name)
		return
	}
	if llamatest.LibDir() == "" {
		t.Skip("llama.cpp libraries not installed in lib/llama/cpu (run scripts/install-llama.sh cpu)")
	}
	if testing.Short() {
		t.Skip("starts a child process per case")
	}
	dir := t.TempDir()
	for _, tc := range hyperparamCases {
		if !tc.aborts {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".gguf")
			if err := os.WriteFile(p, tinyImage(t, "llama", tc.set), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, mode := range []string{"checked", "unchecked"} {
				cmd := exec.Command(os.Args[0], "-test.run=^TestUncheckedAborts$")
				cmd.Env = append(os.Environ(), "LLAMACPP_TEST_UNCHECKED="+mode+":"+p)
				out, err := cmd.CombinedOutput()
				var ee *exec.ExitError
				// The Go runtime turns a C abort into exit status 2 with
				// "SIGABRT" and a stack dump.
				killed := errors.As(err, &ee) && (ee.ProcessState.Sys().(syscall.WaitStatus).Signaled() ||
					bytes.Contains(out, []byte("SIGABRT")) || bytes.Contains(out, []byte("SIGSEGV")))
				switch {
				case mode == "checked" && err != nil:
					t.Errorf("checked load: the child failed (%v), want a clean error\n%s", err, tail(out))
				case mode == "unchecked" && !killed:
					t.Errorf("unchecked load and decode: %v, want the process killed by a signal (has llama.cpp started checking %s itself?)\n%s", err, tc.key, tail(out))
				}
			}
		})
	}
}

func tail(b []byte) string {
	return string(b[max(0, len(b)-1500):])
}

// uncheckedChild loads the model of arg ("checked:PATH" or
// "unchecked:PATH") and decodes one token.
func uncheckedChild(t *testing.T, arg string) {
	mode, path, _ := strings.Cut(arg, ":")
	testLib(t)
	if mode == "checked" {
		m, err := LoadModel(path, ModelOptions{})
		if err == nil {
			m.Close()
			t.Fatal("LoadModel accepted the file")
		}
		return
	}
	cpath := cString(path)
	ptr := llamaModelLoadFromFile(&cpath[0], llamaModelDefaultParams())
	if ptr == 0 {
		t.Log("llama.cpp refused the file cleanly")
		return
	}
	m := &Model{ptr: ptr, path: path}
	m.vocab = &Vocab{ptr: llamaModelGetVocab(ptr)}
	defer m.Close()
	o := ContextOptions{}.Defaults()
	o.NCtx, o.NBatch, o.Threads, o.ThreadsBatch = 32, 32, 1, 1
	c, err := NewLlamaContext(m, o)
	if err != nil {
		t.Logf("context refused cleanly: %v", err)
		return
	}
	defer c.Close()
	b, err := NewBatch(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Add(1, 0, 0, true); err != nil {
		t.Fatal(err)
	}
	if err := c.Decode(b); err != nil {
		t.Logf("decode refused cleanly: %v", err)
	}
}

func TestCheckModelFile(t *testing.T) {
	good := tinyImage(t, "llama", nil)
	tests := []struct {
		name string
		data []byte
		want string // in the error; "" for none
	}{
		{"good", good, ""},
		{"one byte short", good[:len(good)-1], "truncated"},
		{"header only", good[:24], "truncated"},
		{"wrong version", append(append([]byte{}, good[:4]...), append([]byte{9, 0, 0, 0}, good[8:]...)...), "version 9"},
		{"huge tensor count", append(append([]byte{}, good[:8]...), append([]byte{0, 0, 0, 0, 0, 0, 0, 1}, good[16:]...)...), "tensor count"},
		{"not gguf", []byte("GGML and more bytes"), "magic"},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, tt.name)
			os.WriteFile(p, tt.data, 0o644)
			err := CheckModelFile(p)
			if tt.want == "" {
				if err != nil {
					t.Errorf("got %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrBadModelFile) {
				t.Errorf("got %v, want an ErrBadModelFile mentioning %q", err, tt.want)
			}
		})
	}
}

// FuzzCheckModelFile: no input makes the checker panic or hang, and the
// intact image always passes.
func FuzzCheckModelFile(f *testing.F) {
	good := tinyImage(f, "llama", nil)
	f.Add(good)
	f.Add(good[:30])
	f.Add([]byte("GGUF"))
	f.Add([]byte{})
	dir := f.TempDir()
	p := filepath.Join(dir, "fuzz.gguf")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		err := CheckModelFile(p)
		if bytes.Equal(data, good) && err != nil {
			t.Errorf("intact image rejected: %v", err)
		}
	})
}

// FuzzCheckHyperparams: any values of the checked keys either pass or
// give a *ModelFileError naming a key; none panics.
func FuzzCheckHyperparams(f *testing.F) {
	f.Add(uint32(2), uint32(4), uint32(2), float32(1e-6), uint32(16), uint32(64))
	f.Add(uint32(math.MaxUint32), uint32(0), uint32(0), float32(math.NaN()), uint32(1), uint32(0))
	base, err := model.Generate(model.Options{Preset: "tiny", Seed: 1}.Defaults())
	if err != nil {
		f.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := base.WriteTo(&b); err != nil {
		f.Fatal(err)
	}
	img := b.Bytes()
	f.Fuzz(func(t *testing.T, layers, heads, kvHeads uint32, eps float32, rope, embd uint32) {
		gf, err := gguf.Read(bytes.NewReader(img), int64(len(img)))
		if err != nil {
			t.Fatal(err)
		}
		for i, kv := range gf.Metadata {
			switch kv.Key {
			case "llama.block_count":
				gf.Metadata[i].Value = layers
			case "llama.attention.head_count":
				gf.Metadata[i].Value = heads
			case "llama.attention.head_count_kv":
				gf.Metadata[i].Value = kvHeads
			case "llama.attention.layer_norm_rms_epsilon":
				gf.Metadata[i].Value = eps
			case "llama.rope.dimension_count":
				gf.Metadata[i].Value = rope
			case "llama.embedding_length":
				gf.Metadata[i].Value = embd
			}
		}
		err = CheckHyperparams(gf)
		var me *ModelFileError
		if err != nil && (!errors.As(err, &me) || me.Key == "") {
			t.Fatalf("got %v, want a *ModelFileError with a key", err)
		}
		sane := layers >= 1 && layers <= llamaMaxLayers && heads >= 1 && heads <= maxHeads && kvHeads >= 1 && kvHeads <= maxHeads &&
			heads%kvHeads == 0 && eps > 0 && eps < 1 && rope%2 == 0 && embd == 64
		if err == nil && !sane {
			t.Errorf("accepted layers %d heads %d/%d eps %v rope %d embd %d", layers, heads, kvHeads, eps, rope, embd)
		}
	})
}
