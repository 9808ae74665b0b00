// Package scripted is an inference.Backend whose replies come from a Go
// function instead of a model. It is not a language model: it samples
// nothing, has no weights and cannot be trained. It exists so that tests,
// rule-based baselines and dry runs can drive the same code paths as the
// llama backend (token ids in, token ids out, stop handling, chat template)
// without llama.cpp.
//
// A Rule receives each request and returns the reply text. The backend
// tokenizes the reply with a pure-Go byte-level BPE tokenizer (by default
// the vocabulary of omar's generated tiny models, so ids are compatible with
// `omar model init --preset tiny`), appends the end-of-turn token, and then
// applies MaxTokens, Stop and StopTokens exactly as a sampling backend
// would, token by token. Logprobs and RawLogprobs are all 0 (probability 1:
// the rule is deterministic).
package scripted

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/model"
)

// Rule computes the reply text for a request. When the request carries
// only a token Prompt, the backend fills req.Messages by parsing the ChatML
// turns of the decoded prompt, so a rule can always read Messages. Rules
// are called concurrently when Generate is; they must be safe for that.
type Rule func(req inference.Request) string

// Options configure a Backend.
type Options struct {
	// Rule writes the replies (required).
	Rule Rule
	// Tokenizer is the vocabulary; nil means the vocabulary of the
	// generated tiny models (model.NewModelTokenizer(512)).
	Tokenizer *model.Tokenizer
	// PolicyVersion is reported in every Response.
	PolicyVersion int
}

// Defaults fills unset fields.
func (o Options) Defaults() (Options, error) {
	if o.Tokenizer == nil {
		tok, err := model.NewModelTokenizer(512)
		if err != nil {
			return o, err
		}
		o.Tokenizer = tok
	}
	return o, nil
}

// Validate checks the options.
func (o Options) Validate() error {
	if o.Rule == nil {
		return errors.New("scripted: Options.Rule is required")
	}
	if o.Tokenizer == nil {
		return errors.New("scripted: no tokenizer (call Defaults)")
	}
	if o.Tokenizer.EOT < 0 && o.Tokenizer.EOS < 0 {
		return errors.New("scripted: the tokenizer has no end-of-turn or end-of-sequence token")
	}
	return nil
}

// Backend implements inference.Backend and inference.Tokenizer.
type Backend struct {
	opts   Options
	tok    *model.Tokenizer
	eot    int32
	closed atomic.Bool
}

var (
	_ inference.Backend   = (*Backend)(nil)
	_ inference.Tokenizer = (*Backend)(nil)
)

// New returns a backend.
func New(opts Options) (*Backend, error) {
	opts, err := opts.Defaults()
	if err != nil {
		return nil, err
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	eot := opts.Tokenizer.EOT
	if eot < 0 {
		eot = opts.Tokenizer.EOS
	}
	return &Backend{opts: opts, tok: opts.Tokenizer, eot: eot}, nil
}

// ErrClosed is returned by Generate after Close.
var ErrClosed = errors.New("scripted: backend closed")

// Generate answers every request with its rule's reply.
func (b *Backend) Generate(ctx context.Context, reqs []inference.Request) ([]inference.Response, error) {
	if b.closed.Load() {
		return nil, ErrClosed
	}
	out := make([]inference.Response, len(reqs))
	for i, req := range reqs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if len(req.Messages) == 0 && len(req.Prompt) > 0 {
			text, err := b.Detokenize(req.Prompt)
			if err != nil {
				return nil, fmt.Errorf("scripted: request %d (%s): %w", i, req.Key, err)
			}
			req.Messages = ParseChatML(text)
		}
		out[i] = b.respond(req, b.opts.Rule(req))
	}
	return out, nil
}

// respond turns reply text into tokens and applies the request's limits
// in the order a sampling backend checks them after each token.
func (b *Backend) respond(req inference.Request, reply string) inference.Response {
	toks := append(b.tok.Encode(reply, false), b.eot)
	r := inference.Response{PolicyVersion: b.opts.PolicyVersion}
	var text []byte
	for _, t := range toks {
		r.Tokens = append(r.Tokens, t)
		prev := len(text)
		if !b.tok.IsControl(t) {
			piece, _ := b.tok.Decode([]int32{t})
			text = append(text, piece...)
		}
		switch {
		case b.EOG(t):
			r.Stop = inference.StopEOG
		case slices.Contains(req.StopTokens, t):
			r.Stop = inference.StopString
		case hasStop(text, prev, req.Stop):
			r.Stop = inference.StopString
		case req.MaxTokens > 0 && len(r.Tokens) >= req.MaxTokens:
			r.Stop = inference.StopLength
		}
		if r.Stop != "" {
			break
		}
	}
	r.Text = string(text)
	r.Logprobs = make([]float32, len(r.Tokens))
	r.RawLogprobs = make([]float32, len(r.Tokens))
	return r
}

// hasStop reports whether a stop string ends in the bytes added after prev.
func hasStop(text []byte, prev int, stops []string) bool {
	for _, s := range stops {
		if s == "" {
			continue
		}
		if strings.Contains(string(text[max(0, prev-len(s)+1):]), s) {
			return true
		}
	}
	return false
}

// Close makes later Generate calls fail.
func (b *Backend) Close() error {
	b.closed.Store(true)
	return nil
}

// Tokenize implements inference.Tokenizer. Our vocabularies add no BOS, so
// addSpecial changes nothing.
func (b *Backend) Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	return b.tok.Encode(text, parseSpecial), nil
}

// Detokenize implements inference.Tokenizer; special tokens render as their
// text, so it inverts Tokenize(text, false, true).
func (b *Backend) Detokenize(tokens []int32) (string, error) { return b.tok.Decode(tokens) }

// ChatTemplate implements inference.Tokenizer with ChatML, the template of
// the generated models.
func (b *Backend) ChatTemplate(msgs []inference.Message, addAssistant bool) (string, error) {
	return RenderChatML(msgs, addAssistant), nil
}

// SpecialTexts implements inference.SpecialTexter.
func (b *Backend) SpecialTexts() []string {
	return []string{model.EndOfText, model.IMStart, model.IMEnd}
}

// EOG implements inference.Tokenizer: <|im_end|>, <|endoftext|> and the
// vocabulary's EOS/EOT end a generation.
func (b *Backend) EOG(token int32) bool {
	return token >= 0 && (token == b.tok.EOT || token == b.tok.EOS ||
		token == b.tok.ID(model.IMEnd) || token == b.tok.ID(model.EndOfText))
}

// RenderChatML renders messages as llama.cpp's chatml template does.
func RenderChatML(msgs []inference.Message, addAssistant bool) string {
	var sb strings.Builder
	for _, m := range msgs {
		sb.WriteString(model.IMStart + m.Role + "\n" + m.Content + model.IMEnd + "\n")
	}
	if addAssistant {
		sb.WriteString(model.IMStart + "assistant\n")
	}
	return sb.String()
}

// ParseChatML recovers the complete turns of a ChatML text; text before the
// first turn and an unfinished last turn (such as the opened assistant
// turn) are ignored.
func ParseChatML(text string) []inference.Message {
	var msgs []inference.Message
	for {
		i := strings.Index(text, model.IMStart)
		if i < 0 {
			return msgs
		}
		text = text[i+len(model.IMStart):]
		end := strings.Index(text, model.IMEnd)
		if end < 0 {
			return msgs
		}
		turn := text[:end]
		text = text[end+len(model.IMEnd):]
		role, content, ok := strings.Cut(turn, "\n")
		if !ok {
			role, content = turn, ""
		}
		msgs = append(msgs, inference.Message{Role: role, Content: content})
	}
}
