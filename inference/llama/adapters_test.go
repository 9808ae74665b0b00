package llama

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/gguf"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/model"
)

// writeLoRA writes a random LoRA for the tiny model (seed picks it).
func writeLoRA(t *testing.T, seed uint64) string {
	t.Helper()
	c, err := model.PresetConfig("llama", "tiny")
	if err != nil {
		t.Fatal(err)
	}
	l, err := llamatest.RandomLoRA(c, 4, 8, 0.3, seed)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), fmt.Sprintf("lora%d.gguf", seed))
	if err := gguf.WriteLoRA(path, l); err != nil {
		t.Fatal(err)
	}
	return path
}

// sameReply compares two responses token for token and logprob for logprob.
func sameReply(t *testing.T, what string, got, want inference.Response) {
	t.Helper()
	if !sameTokens(got.Tokens, want.Tokens) {
		t.Errorf("%s: tokens %v, want %v", what, got.Tokens, want.Tokens)
		return
	}
	for i := range got.Tokens {
		if got.Logprobs[i] != want.Logprobs[i] || got.RawLogprobs[i] != want.RawLogprobs[i] {
			t.Errorf("%s: token %d logprobs %v/%v, want %v/%v", what, i, got.Logprobs[i], got.RawLogprobs[i], want.Logprobs[i], want.RawLogprobs[i])
		}
	}
}

// TestMixedAdapterBatch: sequences of four adapters (the backend's own,
// the base weights and two named LoRAs) decoded together, some sharing a
// step, give exactly what each adapter's backend gives alone.
func TestMixedAdapterBatch(t *testing.T) {
	o := testOptions(t)
	o.Parallel = 6
	la, lb, lc := writeLoRA(t, 2), writeLoRA(t, 3), writeLoRA(t, 4)
	o.Adapter = lc // the current adapter: requests without a name
	b := newBackend(t, o)
	ctx := context.Background()
	if err := b.LoadAdapter(ctx, "a", la, 1); err != nil {
		t.Fatal(err)
	}
	if err := b.LoadAdapter(ctx, "b", lb, 0.5); err != nil {
		t.Fatal(err)
	}
	if got := b.Adapters(); strings.Join(got, ",") != "a,b" {
		t.Errorf("Adapters() = %v, want [a b]", got)
	}
	type variant struct {
		name  string // Request.Adapter
		path  string // what a dedicated backend is opened with
		scale float32
	}
	variants := []variant{{"", lc, 1}, {inference.AdapterBase, "", 1}, {"a", la, 1}, {"b", lb, 0.5}}
	var reqs []inference.Request
	for i := range 8 { // more requests than slots: groups change as they finish
		v := variants[i%len(variants)]
		reqs = append(reqs, inference.Request{
			Key:       fmt.Sprintf("seat%d", i),
			Prompt:    prompt(t, b, fmt.Sprintf("player %d, %s", i, strings.Repeat("make an offer ", i%3+1))),
			MaxTokens: 10 + i,
			Sampling:  inference.Sampling{Temperature: 1, Seed: uint64(40 + i)},
			Adapter:   v.name,
		})
	}
	mixed := gen(t, b, reqs...)
	if b.AdapterSwitches() == 0 {
		t.Errorf("a mixed batch made no adapter switches")
	}
	for vi, v := range variants {
		ao := o
		ao.Adapter, ao.AdapterScale = v.path, v.scale
		alone := newBackend(t, ao)
		for i, r := range reqs {
			if i%len(variants) != vi {
				continue
			}
			r.Adapter = ""
			sameReply(t, fmt.Sprintf("request %d (adapter %q)", i, v.name), mixed[i], gen(t, alone, r)[0])
		}
		if alone.AdapterSwitches() != 0 {
			t.Errorf("adapter %q alone: %d adapter switches, want 0", v.name, alone.AdapterSwitches())
		}
	}
	// The adapters really differ (else the comparison proves nothing).
	if sameTokens(mixed[2].Tokens, gen(t, b, inference.Request{Prompt: reqs[2].Prompt, MaxTokens: reqs[2].MaxTokens, Sampling: reqs[2].Sampling, Adapter: "b"})[0].Tokens) &&
		sameTokens(mixed[2].Tokens, gen(t, b, inference.Request{Prompt: reqs[2].Prompt, MaxTokens: reqs[2].MaxTokens, Sampling: reqs[2].Sampling})[0].Tokens) {
		t.Errorf("adapters a, b and the current one gave the same reply: the test LoRAs do not change the model")
	}
}

// TestAdapterPrefixReuse: a key's cached prefix is reused only under the
// adapter it was decoded with; registering a name again drops its cache.
func TestAdapterPrefixReuse(t *testing.T) {
	o := testOptions(t)
	b := newBackend(t, o)
	ctx := context.Background()
	la, lb := writeLoRA(t, 2), writeLoRA(t, 3)
	if err := b.LoadAdapter(ctx, "a", la, 1); err != nil {
		t.Fatal(err)
	}
	if err := b.LoadAdapter(ctx, "b", lb, 1); err != nil {
		t.Fatal(err)
	}
	sp := inference.Sampling{Temperature: 1, Seed: 3}
	p := prompt(t, b, "what is your offer?")
	req := func(adapter string) inference.Request {
		return inference.Request{Key: "seat", Prompt: p, MaxTokens: 8, Sampling: sp, Adapter: adapter}
	}
	tests := []struct {
		what, adapter string
		wantReused    int
	}{
		{"first under a", "a", 0},
		{"again under a", "a", len(p) - 1},
		{"same key under b", "b", 0},
		{"same key under the base weights", inference.AdapterBase, 0},
		{"base weights again", inference.AdapterBase, len(p) - 1},
		{"unnamed = base when no current adapter", "", len(p) - 1},
	}
	for _, tt := range tests {
		got := gen(t, b, req(tt.adapter))[0]
		if got.ReusedTokens != tt.wantReused {
			t.Errorf("%s: reused %d tokens, want %d", tt.what, got.ReusedTokens, tt.wantReused)
		}
	}
	gen(t, b, req("a"))
	// Re-registering "a" (with b's weights) drops a's cache and decodes
	// with the new weights.
	if err := b.LoadAdapter(ctx, "a", lb, 1); err != nil {
		t.Fatal(err)
	}
	got := gen(t, b, req("a"))[0]
	if got.ReusedTokens != 0 {
		t.Errorf("after re-registering a: reused %d tokens, want 0", got.ReusedTokens)
	}
	want := gen(t, b, inference.Request{Key: "other", Prompt: p, MaxTokens: 8, Sampling: sp, Adapter: "b"})[0]
	sameReply(t, "a re-registered with b's file", got, want)
}

func TestLoadAdapterErrors(t *testing.T) {
	o := testOptions(t)
	b := newBackend(t, o)
	ctx := context.Background()
	la := writeLoRA(t, 2)
	tests := []struct {
		what, name, path string
		scale            float32
		want             string
	}{
		{"empty name", "", la, 1, "reserved"},
		{"base name", inference.AdapterBase, la, 1, "reserved"},
		{"scale 0", "a", la, 0, "scale 0"},
		{"missing file", "a", filepath.Join(t.TempDir(), "none.gguf"), 1, "none.gguf"},
		{"remove unknown", "zz", "", 0, "no adapter named"},
	}
	for _, tt := range tests {
		err := b.LoadAdapter(ctx, tt.name, tt.path, tt.scale)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want one containing %q", tt.what, err, tt.want)
		}
	}
	p := prompt(t, b, "hi")
	if _, err := b.Generate(ctx, []inference.Request{{Prompt: p, MaxTokens: 2, Adapter: "a"}}); err == nil || !strings.Contains(err.Error(), `no adapter named "a"`) {
		t.Errorf("unknown adapter in a request: err %v", err)
	}
	if err := b.LoadAdapter(ctx, "a", la, 1); err != nil {
		t.Fatal(err)
	}
	gen(t, b, inference.Request{Prompt: p, MaxTokens: 2, Adapter: "a"})
	// Removing the adapter the context holds falls back to the current one.
	if err := b.LoadAdapter(ctx, "a", "", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Generate(ctx, []inference.Request{{Prompt: p, MaxTokens: 2, Adapter: "a"}}); err == nil {
		t.Errorf("removed adapter: got no error")
	}
	base := newBackend(t, o)
	sameReply(t, "after removing the active adapter", gen(t, b, inference.Request{Prompt: p, MaxTokens: 6})[0], gen(t, base, inference.Request{Prompt: p, MaxTokens: 6})[0])
	if b.PolicyVersion() != 0 {
		t.Errorf("named adapters changed the policy version to %d", b.PolicyVersion())
	}
}

// TestAdapterSwapKeepsNamed: SetAdapter changes what unnamed requests get,
// named adapters and the base weights stay what they were.
func TestAdapterSwapKeepsNamed(t *testing.T) {
	o := testOptions(t)
	b := newBackend(t, o)
	ctx := context.Background()
	la, lb := writeLoRA(t, 2), writeLoRA(t, 3)
	if err := b.LoadAdapter(ctx, "a", la, 1); err != nil {
		t.Fatal(err)
	}
	p := prompt(t, b, "deal?")
	req := func(adapter string) inference.Request {
		return inference.Request{Key: "k" + adapter, Prompt: p, MaxTokens: 8, Sampling: inference.Sampling{Temperature: 1, Seed: 5}, Adapter: adapter}
	}
	beforeA, beforeBase := gen(t, b, req("a"))[0], gen(t, b, req(inference.AdapterBase))[0]
	if _, err := b.SetAdapter(ctx, lb, 1); err != nil {
		t.Fatal(err)
	}
	got := gen(t, b, req("a"), req(inference.AdapterBase), req(""))
	sameReply(t, "named after a swap", got[0], beforeA)
	sameReply(t, "base after a swap", got[1], beforeBase)
	bo := o
	bo.Adapter = lb
	sameReply(t, "current after a swap", got[2], gen(t, newBackend(t, bo), req(""))[0])
}
