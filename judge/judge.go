// Package judge backs the SOTOPIA judge with any inference.Backend: the
// policy model, another GGUF through the llama backend, or an Ollama model.
// It is the one place where the sotopia environment meets model code; the
// environment itself only declares sotopia.Completer.
package judge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"sync"

	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/ollama"
	"github.com/omar-selfplay/omar/sotopia"
)

// Completer adapts a Backend to sotopia.Completer. Token-level backends
// (those implementing inference.Tokenizer) get the prompt rendered with the
// model's chat template and tokenised; message-level backends get the
// messages, and those that cannot take a GBNF grammar can look up the
// completion's JSON schema with Format.
type Completer struct {
	backend inference.Backend
	// KeyPrefix names the judge's sequences ("judge" by default); every
	// completion gets its own key so concurrent episodes never share one.
	KeyPrefix string
	// schemas maps a request's Grammar to the JSON schema of the same
	// replies: inference.Request has no schema field, and the judge uses
	// only three grammars per options.
	schemas sync.Map
}

var _ sotopia.Completer = (*Completer)(nil)

// New returns a completer asking b.
func New(b inference.Backend) *Completer { return &Completer{backend: b, KeyPrefix: "judge"} }

// Messages are the chat messages of a completion.
func Messages(c sotopia.Completion) []inference.Message {
	var m []inference.Message
	if c.System != "" {
		m = append(m, inference.Message{Role: "system", Content: c.System})
	}
	return append(m, inference.Message{Role: "user", Content: c.Prompt})
}

// NewOllama returns a completer over an Ollama backend whose replies are
// constrained by each completion's JSON schema (Ollama's format), since
// Ollama cannot take the GBNF grammar. Thinking is off unless o.Think says
// otherwise: a judge's reply must fit MaxTokens and be reproducible. The
// schema cannot say everything the grammar does, so the judge's strict
// parser and retries still decide what is valid.
func NewOllama(o ollama.Options) (*Completer, *ollama.Backend, error) {
	j := &Completer{KeyPrefix: "judge"}
	o.FormatFor = j.Format
	if o.Think == nil {
		o.Think = new(bool)
	}
	b, err := ollama.New(o)
	if err != nil {
		return nil, nil, err
	}
	j.backend = b
	return j, b, nil
}

// Format returns the JSON schema of a request this completer built (nil
// for any other request); it is the ollama backend's FormatFor.
func (j *Completer) Format(req inference.Request) json.RawMessage {
	if s, ok := j.schemas.Load(req.Grammar); ok {
		return s.(json.RawMessage)
	}
	return nil
}

// completionKey names a completion's sequence. Judge seeds derive from the
// judge's own seed, pass, turn and attempt only, so the same seed recurs
// in every episode; the prompt's hash keeps concurrent episodes on
// different keys (a batching backend serialises requests that share one).
func completionKey(prefix string, c sotopia.Completion) string {
	h := fnv.New64a()
	h.Write([]byte(c.System))
	h.Write([]byte{0})
	h.Write([]byte(c.Prompt))
	return prefix + "/" + strconv.FormatUint(c.Seed, 16) + "/" + strconv.FormatUint(h.Sum64(), 16)
}

// Request builds the backend request of a completion.
func (j *Completer) Request(c sotopia.Completion) (inference.Request, error) {
	if len(c.Schema) > 0 && c.Grammar != "" {
		j.schemas.LoadOrStore(c.Grammar, c.Schema)
	}
	req := inference.Request{
		Key:       completionKey(j.KeyPrefix, c),
		Messages:  Messages(c),
		MaxTokens: c.MaxTokens,
		Sampling:  inference.Sampling{Temperature: c.Temperature, Seed: c.Seed},
		Grammar:   c.Grammar,
	}
	if tok, ok := j.backend.(inference.Tokenizer); ok {
		// The transcript holds the players' words: they must not forge
		// control tokens (a fake assistant turn with top scores).
		msgs := slices.Clone(req.Messages)
		msgs[len(msgs)-1].Content = inference.NewDefanger(tok).Defang(msgs[len(msgs)-1].Content)
		text, err := tok.ChatTemplate(msgs, true)
		if err != nil {
			return req, fmt.Errorf("judge: chat template: %w", err)
		}
		if req.Prompt, err = tok.Tokenize(text, true, true); err != nil {
			return req, fmt.Errorf("judge: tokenize: %w", err)
		}
	}
	return req, nil
}

// Complete implements sotopia.Completer. A reply cut short (length or full
// context) is returned as it is: the judge's parser rejects it and retries.
func (j *Completer) Complete(ctx context.Context, c sotopia.Completion) (string, error) {
	req, err := j.Request(c)
	if err != nil {
		return "", err
	}
	resp, err := j.backend.Generate(ctx, []inference.Request{req})
	if errors.Is(err, inference.ErrContextFull) {
		return "", fmt.Errorf("%w: %w", sotopia.ErrPromptTooLong, err)
	}
	if err != nil {
		return "", fmt.Errorf("judge: generate: %w", err)
	}
	if len(resp) != 1 {
		return "", errors.New("judge: backend returned no response")
	}
	return resp[0].Text, nil
}

// NewJudge is sotopia.NewJudge over a backend.
func NewJudge(b inference.Backend, o sotopia.JudgeOptions) (*sotopia.Judge, error) {
	return sotopia.NewJudge(New(b), o)
}
