package inference_test

import (
	"slices"
	"testing"

	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/scripted"
)

func TestPromptTokens(t *testing.T) {
	b, err := scripted.New(scripted.Options{Rule: func(inference.Request) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, system, user string
		chat               bool
		want               string
	}{
		{"chat", "", "Hi", true, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
		{"chat with system", "Be brief.", "Hi", true, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
		{"raw", "ignored", "Hi", false, "Hi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := inference.PromptTokens(b, tc.system, tc.user, tc.chat)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := b.Tokenize(tc.want, !tc.chat, true)
			if !slices.Equal(got, want) {
				text, _ := b.Detokenize(got)
				t.Errorf("got %q, want %q", text, tc.want)
			}
		})
	}
}
