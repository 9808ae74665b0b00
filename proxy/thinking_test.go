package proxy

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/inference/llama"
	"github.com/omar-selfplay/omar/llamacpp"
	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/model"
)

func TestChatTemplateKwargsPlan(t *testing.T) {
	o := fuzzOptions()
	off, on := false, true
	tests := []struct {
		kwargs string
		want   *bool
		err    string
	}{
		{`{}`, nil, ""},
		{`{"enable_thinking": false}`, &off, ""},
		{`{"enable_thinking": true}`, &on, ""},
		{`{"enable_thinking": "no"}`, nil, "chat_template_kwargs.enable_thinking: want true or false"},
		{`{"tools_in_user_message": true}`, nil, "chat_template_kwargs.tools_in_user_message: not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.kwargs, func(t *testing.T) {
			var r ChatRequest
			body := `{"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": ` + tt.kwargs + `}`
			if err := json.Unmarshal([]byte(body), &r); err != nil {
				t.Fatal(err)
			}
			p, e := chatPlan(&r, &o)
			if tt.err != "" {
				if e == nil || !strings.Contains(e.Message, tt.err) {
					t.Fatalf("got %v, want an error containing %q", e, tt.err)
				}
				return
			}
			if e != nil {
				t.Fatal(e)
			}
			if (p.thinking == nil) != (tt.want == nil) || p.thinking != nil && *p.thinking != *tt.want {
				t.Errorf("got thinking %v, want %v", p.thinking, tt.want)
			}
		})
	}
}

// TestChatTemplateKwargsRender serves the tiny model with Qwen3's chat
// template in its GGUF: enable_thinking false renders the empty think
// block after the generation prompt (more prompt tokens), true and absent
// render the same prompt.
func TestChatTemplateKwargsRender(t *testing.T) {
	dir := llamatest.LibDir()
	if dir == "" {
		t.Skip("llama.cpp libraries not installed in lib/llama/cpu (run scripts/install-llama.sh cpu)")
	}
	src, err := os.ReadFile(filepath.Join("..", "chattemplate", "testdata", "qwen3.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	w, err := model.Generate(model.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Set("tokenizer.chat_template", string(src)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "qwen3-template.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	lo := llama.Options{}.Defaults()
	lo.LibDir, lo.Model = dir, path
	lo.Parallel, lo.Context, lo.Batch = 2, 1024, 256
	lo.Threads, lo.ThreadsBatch = 1, 1
	lo.KVType = llamacpp.KVTypeF32
	b, err := llama.New(lo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	_, srv := testProxy(t, b, nil, nil)
	prompt := func(kwargs map[string]any) int {
		body := map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}, "max_tokens": 2, "seed": 1}
		if kwargs != nil {
			body["chat_template_kwargs"] = kwargs
		}
		code, data := post(t, srv.URL+"/v1/chat/completions", nil, body)
		if code != http.StatusOK {
			t.Fatalf("status %d: %s", code, data)
		}
		var resp struct {
			Usage Usage `json:"usage"`
		}
		if err := json.Unmarshal(data, &resp); err != nil {
			t.Fatal(err)
		}
		return resp.Usage.PromptTokens
	}
	none, on, off := prompt(nil), prompt(map[string]any{"enable_thinking": true}), prompt(map[string]any{"enable_thinking": false})
	think, err := b.Tokenize("<think>\n\n</think>\n\n", false, true)
	if err != nil {
		t.Fatal(err)
	}
	if on != none || off != none+len(think) {
		t.Errorf("prompt tokens: got %d (absent), %d (true), %d (false); want equal, equal, +%d", none, on, off, len(think))
	}
}
