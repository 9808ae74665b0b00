package llama

import (
	"fmt"

	"github.com/omar-selfplay/omar/llamacpp"
)

// ParseKVType reads a KV cache type as flags and configs spell it: "f16",
// "f32" or "q8_0".
func ParseKVType(name string) (llamacpp.KVType, error) {
	switch name {
	case "f16":
		return llamacpp.KVTypeF16, nil
	case "f32":
		return llamacpp.KVTypeF32, nil
	case "q8_0":
		return llamacpp.KVTypeQ8_0, nil
	}
	return 0, fmt.Errorf("%q: want f16, f32 or q8_0", name)
}

// ParseFlashAttention reads a flash-attention mode: "off", "on" or "auto".
func ParseFlashAttention(name string) (llamacpp.FlashAttention, error) {
	switch name {
	case "off":
		return llamacpp.FlashAttentionDisabled, nil
	case "on":
		return llamacpp.FlashAttentionEnabled, nil
	case "auto":
		return llamacpp.FlashAttentionAuto, nil
	}
	return 0, fmt.Errorf("%q: want off, on or auto", name)
}

// SetKVCache sets the K and V cache type by name ("" keeps the type set,
// F16 by default). q8_0 turns flash attention on: a quantized V cache
// exists only inside flash attention.
func (o *Options) SetKVCache(name string) error {
	if name == "" {
		return nil
	}
	kv, err := ParseKVType(name)
	if err != nil {
		return err
	}
	o.KVType = kv
	if kv == llamacpp.KVTypeQ8_0 {
		o.FlashAttention = llamacpp.FlashAttentionEnabled
	}
	return nil
}
