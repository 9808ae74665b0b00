package llama

import (
	"errors"
	"fmt"
	"strings"

	"github.com/omar-selfplay/omar/chattemplate"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/llamacpp"
)

// chatTemplate is how a backend renders chat messages: the Jinja template
// (Options.ChatTemplate, else the GGUF's tokenizer.chat_template) rendered
// by package chattemplate, or, when the GGUF's template does not compile or
// render, llama.cpp's built-in renderer, which recognises a list of known
// templates by their text (it renders Qwen3's as plain ChatML: thinking on,
// earlier reasoning kept).
type chatTemplate struct {
	jinja *chattemplate.Template // nil: llama.cpp's built-in renderer
	gguf  string                 // the GGUF's template, for llama.cpp
	// bos and eos are the texts of the vocabulary's BOS and EOS tokens
	// (bos_token, eos_token); stripBOS drops a leading BOS from the
	// rendering when tokenising adds one (see render).
	bos, eos string
	stripBOS bool
	source   string // which renderer, in words (ChatTemplateSource)
}

// probe is the conversation a GGUF's template must render for the Jinja
// engine to be trusted with it.
var probe = []chattemplate.Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "hello"}, {Role: "user", Content: "bye"}}

// newChatTemplate picks the renderer of a model whose GGUF template is
// gguf; override is Options.ChatTemplate (already validated).
func newChatTemplate(v *llamacpp.Vocab, gguf, override string) *chatTemplate {
	c := &chatTemplate{gguf: gguf, stripBOS: v.AddBOS()}
	if t := v.BOS(); t >= 0 {
		c.bos = v.Piece(t, true)
	}
	if t := v.EOS(); t >= 0 {
		c.eos = v.Piece(t, true)
	}
	if override != "" {
		c.jinja, _ = chattemplate.Parse(override)
		c.source = "jinja: the chat_template override"
		return c
	}
	if gguf == "" {
		c.source = "none: the GGUF has no tokenizer.chat_template"
		return c
	}
	t, err := chattemplate.Parse(gguf)
	if err == nil {
		_, err = t.Render(probe, chattemplate.Options{AddGenerationPrompt: true, BOS: c.bos, EOS: c.eos})
	}
	if err != nil {
		c.source = fmt.Sprintf("llama.cpp built-in: the Jinja engine refused the GGUF's template (%v)", err)
		return c
	}
	c.jinja, c.source = t, "jinja: the GGUF's tokenizer.chat_template"
	return c
}

// errNoThinkingSwitch is returned when thinking is set on a model rendered
// by llama.cpp's built-in renderer, which has no enable_thinking.
var errNoThinkingSwitch = errors.New("llama: llama.cpp's built-in chat renderer cannot switch thinking on or off (the model's template did not compile; set chat_template)")

// render renders msgs. The text never begins with the BOS token when
// tokenising adds one (Tokenize with addSpecial), as llama.cpp's built-in
// renderer never writes it: Llama 3's and Gemma 3's templates print
// bos_token, and both together would be two BOS tokens.
func (c *chatTemplate) render(model string, msgs []inference.Message, o inference.ChatOptions) (string, error) {
	if c.jinja == nil {
		if c.gguf == "" {
			return "", fmt.Errorf("llama: model %s has no chat template (set chat_template)", model)
		}
		if o.Thinking != nil {
			return "", errNoThinkingSwitch
		}
		cm := make([]llamacpp.ChatMessage, len(msgs))
		for i, m := range msgs {
			cm[i] = llamacpp.ChatMessage{Role: m.Role, Content: m.Content}
		}
		return llamacpp.ApplyChatTemplate(c.gguf, cm, o.AddAssistant)
	}
	cm := make([]chattemplate.Message, len(msgs))
	for i, m := range msgs {
		cm[i] = chattemplate.Message{Role: m.Role, Content: m.Content}
	}
	text, err := c.jinja.Render(cm, chattemplate.Options{AddGenerationPrompt: o.AddAssistant, EnableThinking: o.Thinking, BOS: c.bos, EOS: c.eos})
	if err != nil {
		return "", fmt.Errorf("llama: %w", err)
	}
	if c.stripBOS && c.bos != "" {
		text = strings.TrimPrefix(text, c.bos)
	}
	return text, nil
}

// RenderChat implements inference.ChatRenderer.
func (b *Backend) RenderChat(msgs []inference.Message, o inference.ChatOptions) (string, error) {
	return b.tmpl.render(b.opts.Model, msgs, o)
}

// ChatTemplateSource says which renderer the backend's chat template goes
// through: the Jinja engine with the GGUF's template or the override, or
// llama.cpp's built-in renderer and why.
func (b *Backend) ChatTemplateSource() string { return b.tmpl.source }

// ChatTemplateJinja reports whether the chat template is rendered by the
// Jinja engine (and so takes enable_thinking).
func (b *Backend) ChatTemplateJinja() bool { return b.tmpl.jinja != nil }
