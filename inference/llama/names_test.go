package llama

import (
	"testing"

	"github.com/omar-selfplay/omar/llamacpp"
)

func TestSetKVCache(t *testing.T) {
	for _, tc := range []struct {
		name string
		kv   llamacpp.KVType
		fa   llamacpp.FlashAttention
	}{
		{"f16", llamacpp.KVTypeF16, llamacpp.FlashAttentionDisabled},
		{"f32", llamacpp.KVTypeF32, llamacpp.FlashAttentionDisabled},
		{"q8_0", llamacpp.KVTypeQ8_0, llamacpp.FlashAttentionEnabled},
	} {
		o := Options{}.Defaults()
		if err := o.SetKVCache(tc.name); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if o.KVType != tc.kv || o.FlashAttention != tc.fa {
			t.Errorf("%s: got kv %v, flash attention %v; want %v, %v", tc.name, o.KVType, o.FlashAttention, tc.kv, tc.fa)
		}
	}
	o := Options{}.Defaults()
	if err := o.SetKVCache("f8"); err == nil || o.KVType != llamacpp.KVTypeF16 {
		t.Errorf("f8: got %v with kv %v, want an error and the kv type unchanged", err, o.KVType)
	}
}
