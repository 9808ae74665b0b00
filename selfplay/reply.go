package selfplay

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/omar-selfplay/omar/inference"
)

// Reply is how a model seat replies: the settings that shape its prompt
// and sample its reply. A policy must be evaluated, served and exported
// with the settings it was trained with, so every place a model plays a
// seat — a run's rollouts (Options), an evaluation (arena.Options), a
// served seat (web.SeatOptions), a chat export — embeds this one struct
// and copies it whole, never field by field. Its YAML keys are inlined
// into the section that embeds it.
type Reply struct {
	// MaxTokens bounds one reply.
	MaxTokens int `yaml:"max_tokens" json:"max_tokens"`
	// Context is the token budget of one seat stream; when a turn would
	// leave fewer than MinReplyTokens for the reply, a new segment starts.
	Context        int `yaml:"context" json:"context"`
	MinReplyTokens int `yaml:"min_reply_tokens" json:"min_reply_tokens"`
	// Sampling is temperature, top_k, top_p and min_p (the seed is drawn
	// per episode, seat and turn).
	inference.Sampling `yaml:",inline" json:"-"`
	// Grammar passes each notification's GBNF grammar to the backend.
	Grammar bool `yaml:"grammar" json:"grammar"`
	// MaxLegal is the most legal replies a notification may have for a
	// seat's prompt to list them (0: DefaultMaxLegal; -1: never).
	MaxLegal int `yaml:"max_legal" json:"max_legal,omitempty"`
	// Trace is a reply format for model seats ("" none, TraceToM): the
	// grammar is wrapped and only the trace's move reaches the engine.
	Trace string `yaml:"trace" json:"trace,omitempty"`
	// ChatTemplate overrides the model's chat template: a Jinja template
	// inline (it holds "{{" or "{%") or the path of a file holding one
	// (ChatTemplateSource). Empty: the GGUF's tokenizer.chat_template,
	// rendered by the Jinja engine (llama.cpp's built-in renderer as the
	// fallback). It is applied where the model is loaded.
	ChatTemplate string `yaml:"chat_template" json:"chat_template,omitempty"`
	// Thinking is a reasoning model's reply mode: "" (the template's
	// default), "off", "on" or "budget N" (at most N reasoning tokens);
	// ThinkingLoss trains the reasoning ("train", the default) or masks it
	// ("mask"); ThinkingHistory keeps the conversation as the template
	// renders it ("template", the default: a new segment when the
	// rendering drops earlier reasoning) or as sampled ("stream"). See
	// Thinking and docs/real-models.md.
	Thinking        string `yaml:"thinking" json:"thinking,omitempty"`
	ThinkingLoss    string `yaml:"thinking_loss" json:"thinking_loss,omitempty"`
	ThinkingHistory string `yaml:"thinking_history" json:"thinking_history,omitempty"`
}

// ThinkingSettings returns the thinking keys parsed, naming a bad one by
// its YAML key.
func (r Reply) ThinkingSettings() (Thinking, error) {
	th, err := ParseThinking(r.Thinking)
	if err != nil {
		return th, err
	}
	th.Loss, th.History = r.ThinkingLoss, r.ThinkingHistory
	if (th.Loss != "" || th.History != "") && th.Mode == "" {
		return th, fmt.Errorf("thinking_loss and thinking_history need thinking: off, on or budget N")
	}
	if err := th.Validate(); err != nil {
		return th, fmt.Errorf("thinking: %w", err)
	}
	return th, nil
}

// thinking is ThinkingSettings of a validated Reply.
func (r Reply) thinking() Thinking {
	th, _ := r.ThinkingSettings()
	return th
}

// ChatTemplateSource returns the chat_template override's Jinja text: the
// value itself when it holds "{{" or "{%", else the file it names ("" when
// unset).
func (r Reply) ChatTemplateSource() (string, error) {
	v := r.ChatTemplate
	if v == "" || strings.Contains(v, "{{") || strings.Contains(v, "{%") {
		return v, nil
	}
	b, err := os.ReadFile(v)
	if err != nil {
		return "", fmt.Errorf("chat_template: neither a template (no {{ or {%%) nor a readable file: %w", err)
	}
	if strings.TrimSpace(string(b)) == "" {
		return "", fmt.Errorf("chat_template: %s is empty", v)
	}
	return string(b), nil
}

// DefaultMinReplyTokens is MinReplyTokens' default.
const DefaultMinReplyTokens = 16

// DefaultReply returns the reply defaults of self-play: 48-token replies
// in 2,048-token seat streams, temperature 1 (the policy as it is
// trained), grammars on.
func DefaultReply() Reply {
	return Reply{MaxTokens: 48, Context: 2048, MinReplyTokens: DefaultMinReplyTokens, Sampling: inference.Sampling{Temperature: 1}, Grammar: true}
}

// Validate checks r, naming each field by its YAML key.
func (r Reply) Validate() error {
	switch {
	case r.MaxTokens < 1 || r.MaxTokens > 1<<20:
		return fmt.Errorf("max_tokens %d: want 1..%d", r.MaxTokens, 1<<20)
	case r.MinReplyTokens < 1 || r.MinReplyTokens > r.MaxTokens:
		return fmt.Errorf("min_reply_tokens %d: want 1..max_tokens (%d)", r.MinReplyTokens, r.MaxTokens)
	case r.Context < 2*r.MaxTokens || r.Context > 1<<24:
		return fmt.Errorf("context %d: want 2 × max_tokens (%d) .. %d", r.Context, 2*r.MaxTokens, 1<<24)
	case r.MaxLegal < -1:
		return fmt.Errorf("max_legal %d: want -1 (never), 0 (the default) or a count", r.MaxLegal)
	case r.Trace != "" && !slices.Contains(Traces, r.Trace):
		return fmt.Errorf("trace %q: want one of %v (or none)", r.Trace, Traces)
	}
	if _, err := r.ThinkingSettings(); err != nil {
		return err
	}
	if _, err := r.ChatTemplateSource(); err != nil {
		return err
	}
	return r.Sampling.Validate()
}

// maxLegal is MaxLegal with its default.
func (r Reply) maxLegal() int {
	if r.MaxLegal == 0 {
		return DefaultMaxLegal
	}
	return r.MaxLegal
}
