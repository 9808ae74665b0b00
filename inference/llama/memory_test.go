package llama

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/llamacpp"
)

// shape7B is roughly Llama 2 7B: 32 layers of 32 heads of 128, no GQA.
var shape7B = modelShape{arch: "llama", ctxTrain: 4096, layers: 32, embd: 4096, ff: 11008, heads: 32, headsKV: 32, keyLen: 128, valLen: 128, vocab: 32000}

func TestEstimateMemory(t *testing.T) {
	o := Options{}.Defaults()
	o.Parallel, o.Context, o.Batch = 1, 4096, 512
	// llama.cpp reports 2048 MiB of F16 KV cache for 7B at 4096 tokens.
	est := estimateMemory(o, shape7B)
	if got, want := est.kv, int64(2048)<<20; got != want {
		t.Errorf("7B F16 KV at 4096 tokens: got %d bytes, want %d", got, want)
	}
	o.KVType = llamacpp.KVTypeQ8_0
	if got, want := estimateMemory(o, shape7B).kv, int64(1088)<<20; got != want {
		t.Errorf("7B q8_0 KV: got %d bytes, want %d (34/32 bytes per element)", got, want)
	}
	if est.compute <= 0 {
		t.Errorf("compute estimate %d, want > 0", est.compute)
	}
}

func TestCheckShape(t *testing.T) {
	base := Options{}.Defaults()
	base.Model, base.Parallel, base.Context, base.Batch = "m.gguf", 1, 2048, 512
	plenty := func() (int64, string, error) { return 1 << 40, "test", nil }
	scarce := func() (int64, string, error) { return 1 << 30, "MemAvailable in /proc/meminfo", nil }
	unknown := func() (int64, string, error) { return 0, "", errors.New("no /proc") }
	for _, tc := range []struct {
		name   string
		mutate func(*Options)
		avail  func() (int64, string, error)
		want   string // in the error; "" for none
	}{
		{"fits", func(*Options) {}, plenty, ""},
		{"beyond training context", func(o *Options) { o.Context = 8192 }, plenty, "llama.context_length = 4096"},
		{"beyond, allowed", func(o *Options) { o.Context, o.ContextBeyondTraining = 8192, true }, plenty, ""},
		// The config: context 2000000000 allocated 23.8 GB.
		{"absurd context, allowed", func(o *Options) { o.Context, o.ContextBeyondTraining = 2000000000, true }, plenty, "of KV cache"},
		{"too many sequences for the memory", func(o *Options) { o.Parallel, o.Batch = 64, 512 }, scarce, "MemAvailable"},
		{"explicit limit", func(o *Options) { o.MemoryLimit = 1 << 20 }, plenty, "1.0 MiB available (the memory limit)"},
		{"memory unknown", func(o *Options) { o.Parallel = 64 }, unknown, ""},
		{"offloaded: not host memory", func(o *Options) { o.Parallel, o.GPULayers = 64, -1 }, scarce, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.mutate(&o)
			err := checkShape(o, shape7B, tc.avail)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// FuzzCheckShape: no combination of options and model shape panics, and
// an accepted context never exceeds the training context unless allowed.
func FuzzCheckShape(f *testing.F) {
	f.Add(1, 2048, 512, 4096, 32, 32, 128, false, int64(0))
	f.Add(64, 2000000000, 512, 4096, 32, 8, 128, true, int64(1))
	f.Fuzz(func(t *testing.T, parallel, ctx, batch, ctxTrain, layers, headsKV, headLen int, beyond bool, limit int64) {
		o := Options{}.Defaults()
		o.Model, o.Parallel, o.Context, o.Batch, o.ContextBeyondTraining, o.MemoryLimit = "m.gguf", parallel, ctx, batch, beyond, limit
		if o.Validate() != nil {
			return
		}
		s := shape7B
		s.ctxTrain, s.layers, s.headsKV, s.keyLen, s.valLen = max(ctxTrain, 0), max(layers, 0), max(headsKV, 0), max(headLen, 0), max(headLen, 0)
		err := checkShape(o, s, func() (int64, string, error) { return 1 << 34, "test", nil })
		if err == nil && s.ctxTrain > 0 && ctx > s.ctxTrain && !beyond {
			t.Errorf("context %d beyond training %d accepted", ctx, s.ctxTrain)
		}
	})
}

// TestNewRefusesBeforeAllocating: the context of 2,000,000,000
// tokens, a context beyond the tiny model's 4096 and a memory limit below
// the KV cache all fail in New at once, before llama.cpp allocates.
func TestNewRefusesBeforeAllocating(t *testing.T) {
	o := testOptions(t)
	for _, tc := range []struct {
		name   string
		mutate func(*Options)
		want   string
	}{
		{"absurd context", func(o *Options) { o.Context = 2000000000 }, "KV cells"},
		{"absurd context, one sequence", func(o *Options) { o.Parallel, o.Context = 1, 2000000000 }, "training context"},
		{"beyond training", func(o *Options) { o.Context = 8192 }, "llama.context_length = 4096"},
		{"memory limit", func(o *Options) { o.MemoryLimit = 64 << 10 }, "of KV cache"},
		{"nan adapter scale", func(o *Options) { o.Adapter, o.AdapterScale = "a.gguf", float32(math.NaN()) }, "adapter scale"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := o
			tc.mutate(&o)
			start := time.Now()
			b, err := New(o)
			if err == nil {
				b.Close()
				t.Fatal("New accepted the options")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("refusal took %v, want it before any allocation", d)
			}
		})
	}
}

// TestGenerateRefusesSampling: settings that reach C asserts (an infinite
// temperature under a grammar aborted the process) are errors naming the
// field, and the backend keeps serving.
func TestGenerateRefusesSampling(t *testing.T) {
	b := newBackend(t, testOptions(t))
	p := prompt(t, b, "vote")
	grammar := `root ::= ("yes" | "no") "."`
	for _, tc := range []struct {
		name string
		s    inference.Sampling
		want string
	}{
		{"inf temperature", inference.Sampling{Temperature: float32(math.Inf(1))}, "temperature"},
		{"nan temperature", inference.Sampling{Temperature: float32(math.NaN())}, "temperature"},
		{"negative temperature", inference.Sampling{Temperature: -1}, "temperature"},
		{"top_p", inference.Sampling{Temperature: 1, TopP: 7}, "top_p"},
		{"min_p", inference.Sampling{Temperature: 1, MinP: -1}, "min_p"},
		{"top_k", inference.Sampling{Temperature: 1, TopK: -3}, "top_k"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.Generate(context.Background(), []inference.Request{
				{Key: "ok", Prompt: p, MaxTokens: 4, Grammar: grammar, Sampling: inference.Sampling{Temperature: 1}},
				{Key: "bad", Prompt: p, MaxTokens: 4, Grammar: grammar, Sampling: tc.s},
			})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `"bad"`) {
				t.Errorf("got %v, want an error naming %s and request \"bad\"", err, tc.want)
			}
		})
	}
	if r := gen(t, b, inference.Request{Prompt: p, MaxTokens: 4, Grammar: grammar, Sampling: inference.Sampling{Temperature: 1}}); r[0].Text == "" {
		t.Error("no reply after the refusals")
	}
}
