// Package chattemplate renders chat conversations with a model's own Jinja
// chat template (the GGUF key tokenizer.chat_template, or an override from
// the config), the way Hugging Face's tokenizer.apply_chat_template does.
//
// The engine is github.com/ardanlabs/jinja (pure Go, no cgo, built for LLM
// chat templates): it compiles and renders the real Qwen3, Llama 3 and
// Gemma 3 templates (namespace(), loop.last/loop.index0, reversed slices,
// the Python string methods split/strip/lstrip/rstrip/startswith/endswith,
// raise_exception, tojson, `is string`) with output equal to the reference
// JavaScript engine @huggingface/jinja on every conversation of the parity
// test (parity_test.go; docs/real-models.md). llama.cpp itself has no Jinja
// engine in the C API this project binds (llama_chat_apply_template matches
// a list of known templates and renders ChatML for Qwen3, which is Qwen3's
// template with thinking on and earlier reasoning kept), and the other Go
// engines (pongo2, gonja) lack the Python string methods these templates
// call. What this package adds around the engine: a deterministic
// strftime_now (templates that print today's date would otherwise make
// transcripts depend on the wall clock), the enable_thinking switch, and
// the bos/eos token variables.
package chattemplate

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"
)

// Message is one chat message. Content is always a string (the templates
// test `content is string`); Reasoning, when not empty, is passed as
// reasoning_content, which Qwen3's template prefers to a <think> block in
// Content.
type Message struct {
	Role      string
	Content   string
	Reasoning string
}

// Options are a rendering's variables besides the messages.
type Options struct {
	// AddGenerationPrompt opens the assistant's turn at the end.
	AddGenerationPrompt bool
	// EnableThinking, when not nil, sets the template's enable_thinking
	// variable (Qwen3: false renders an empty think block after the
	// generation prompt, so the model answers without reasoning). Nil
	// leaves it undefined: the template's default.
	EnableThinking *bool
	// BOS and EOS are the texts of the vocabulary's begin- and
	// end-of-sequence tokens (bos_token, eos_token).
	BOS, EOS string
	// Now is the date strftime_now formats; the zero time renders
	// 2026-01-01, so that a transcript never depends on the clock.
	Now time.Time
	// Extra holds further template variables (tools, date_string, …),
	// converted as Go values.
	Extra map[string]any
}

// Template is a compiled chat template, safe for concurrent use.
type Template struct {
	src string
	t   *jinja.Template
}

// ErrTemplate wraps every error of compiling or rendering a template.
var ErrTemplate = errors.New("chattemplate")

// Parse compiles src.
func Parse(src string) (*Template, error) {
	if strings.TrimSpace(src) == "" {
		return nil, fmt.Errorf("%w: empty template", ErrTemplate)
	}
	t, err := jinja.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTemplate, err)
	}
	return &Template{src: src, t: t}, nil
}

// Source returns the template's Jinja text.
func (t *Template) Source() string { return t.src }

// defaultNow is the date of a zero Options.Now.
var defaultNow = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Render renders msgs. A template's raise_exception (Gemma 3 refuses
// roles that do not alternate) is returned as an error.
func (t *Template) Render(msgs []Message, o Options) (string, error) {
	ms := make([]any, len(msgs))
	for i, m := range msgs {
		d := map[string]any{"role": m.Role, "content": m.Content}
		if m.Reasoning != "" {
			d["reasoning_content"] = m.Reasoning
		}
		ms[i] = d
	}
	data := make(map[string]any, 8+len(o.Extra))
	for k, v := range o.Extra {
		data[k] = v
	}
	data["messages"] = ms
	data["add_generation_prompt"] = o.AddGenerationPrompt
	data["bos_token"] = o.BOS
	data["eos_token"] = o.EOS
	if o.EnableThinking != nil {
		data["enable_thinking"] = *o.EnableThinking
	}
	vals := make(map[string]jinja.Value, len(data)+1)
	for k, v := range data {
		vals[k] = jinja.FromGoValue(v)
	}
	now := o.Now
	if now.IsZero() {
		now = defaultNow
	}
	vals["strftime_now"] = jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		if len(args) != 1 || !args[0].IsString() {
			return jinja.Undefined(), fmt.Errorf("strftime_now: want one format string")
		}
		return jinja.NewString(strftime(now, args[0].AsString())), nil
	})
	out, err := t.t.RenderValues(vals)
	if err != nil {
		return "", fmt.Errorf("%w: render: %v", ErrTemplate, err)
	}
	return out, nil
}

// strftime formats now with Python's strftime directives (the ones chat
// templates use: dates for "Today Date:" lines). An unknown directive is
// kept as written.
func strftime(now time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		switch format[i] {
		case 'd':
			fmt.Fprintf(&b, "%02d", now.Day())
		case '-':
			// %-d: the day without padding (glibc).
			if i+1 < len(format) && format[i+1] == 'd' {
				i++
				fmt.Fprintf(&b, "%d", now.Day())
			} else {
				b.WriteString("%-")
			}
		case 'm':
			fmt.Fprintf(&b, "%02d", int(now.Month()))
		case 'Y':
			fmt.Fprintf(&b, "%04d", now.Year())
		case 'y':
			fmt.Fprintf(&b, "%02d", now.Year()%100)
		case 'b':
			b.WriteString(now.Month().String()[:3])
		case 'B':
			b.WriteString(now.Month().String())
		case 'a':
			b.WriteString(now.Weekday().String()[:3])
		case 'A':
			b.WriteString(now.Weekday().String())
		case 'H':
			fmt.Fprintf(&b, "%02d", now.Hour())
		case 'M':
			fmt.Fprintf(&b, "%02d", now.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", now.Second())
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(format[i])
		}
	}
	return b.String()
}
