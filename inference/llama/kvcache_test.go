package llama

import (
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/llamacpp"
)

// TestKVQ8Needs: a q8_0 KV cache is refused with the fix named — without
// flash attention (llama.cpp quantizes V only inside it) and on a model
// whose heads do not split into blocks of 32 (the tiny model's have 16).
// Before, both failed in llama.cpp with "create context failed: see the
// log".
func TestKVQ8Needs(t *testing.T) {
	o := Options{}.Defaults()
	o.Model, o.KVType = "m.gguf", llamacpp.KVTypeQ8_0
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "kv cache q8_0 needs flash attention: turn flash attention on") {
		t.Errorf("q8_0 without flash attention: got %v, want the fix named", err)
	}
	for _, fa := range []llamacpp.FlashAttention{llamacpp.FlashAttentionEnabled, llamacpp.FlashAttentionAuto} {
		o.FlashAttention = fa
		if err := o.Validate(); err != nil {
			t.Errorf("q8_0 with flash attention %v: %v", fa, err)
		}
	}
	o = testOptions(t)
	o.KVType, o.FlashAttention = llamacpp.KVTypeQ8_0, llamacpp.FlashAttentionEnabled
	if _, err := New(o); err == nil || !strings.Contains(err.Error(), "blocks of 32") || !strings.Contains(err.Error(), "f16") {
		t.Errorf("q8_0 on heads of 16: got %v, want a refusal naming f16", err)
	}
}
