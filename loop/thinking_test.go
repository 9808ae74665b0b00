package loop

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/internal/strictyaml"
	"github.com/omar-selfplay/omar/selfplay"
)

func TestRolloutThinkingAndChatTemplate(t *testing.T) {
	dir := t.TempDir()
	tmplFile := filepath.Join(dir, "chat.jinja")
	if err := os.WriteFile(tmplFile, []byte("{% for m in messages %}{{ m.content }}{% endfor %}"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		yaml     string
		thinking selfplay.Thinking
		tmpl     string
		err      string
	}{
		{"none", "env: sealedbid\n", selfplay.Thinking{}, "", ""},
		{"off", "thinking: \"off\"\n", selfplay.Thinking{Mode: "off"}, "", ""},
		{"off unquoted", "thinking: off\n", selfplay.Thinking{Mode: "off"}, "", ""},
		{"on unquoted", "thinking: on\n", selfplay.Thinking{Mode: "on"}, "", ""},
		{"budget masked", "thinking: budget 64\nthinking_loss: mask\nthinking_history: stream\n",
			selfplay.Thinking{Mode: "budget", Budget: 64, Loss: "mask", History: "stream"}, "", ""},
		{"inline template", "chat_template: \"{{ messages[0].content }}\"\n", selfplay.Thinking{}, "{{ messages[0].content }}", ""},
		{"template file", "chat_template: " + tmplFile + "\n", selfplay.Thinking{}, "{% for m in messages %}{{ m.content }}{% endfor %}", ""},
		{"missing file", "chat_template: " + filepath.Join(dir, "nope.jinja") + "\n", selfplay.Thinking{}, "", "chat_template: neither a template"},
		{"bad thinking", "thinking: sometimes\n", selfplay.Thinking{}, "", "thinking \"sometimes\""},
		{"bad loss", "thinking: \"on\"\nthinking_loss: half\n", selfplay.Thinking{}, "", "thinking loss \"half\""},
		{"loss without thinking", "thinking_loss: mask\n", selfplay.Thinking{}, "", "need thinking"},
		{"unknown key", "thinkng: \"on\"\n", selfplay.Thinking{}, "", "thinkng"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := RolloutOptions{}.Defaults()
			c.Env = "sealedbid"
			err := strictyaml.Decode(strings.NewReader(tt.yaml), &c)
			if err == nil {
				err = c.Validate()
			}
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			o, err := c.RunnerOptions(nil)
			if err != nil {
				t.Fatal(err)
			}
			if th, err := o.ThinkingSettings(); err != nil || th != tt.thinking {
				t.Errorf("got thinking %+v (err %v), want %+v", th, err, tt.thinking)
			}
			lo, err := c.LlamaOptions("m.gguf", "", 1, 256)
			if err != nil {
				t.Fatal(err)
			}
			if lo.ChatTemplate != tt.tmpl {
				t.Errorf("got chat template %q, want %q", lo.ChatTemplate, tt.tmpl)
			}
		})
	}
}
