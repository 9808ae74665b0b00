// Package inference is the one seam between "the model" and the rest of omar.
//
// A Backend turns requests into sampled tokens. Requests are token-in/token-out:
// a trainable backend receives the exact prompt token ids and returns the exact
// sampled ids together with their log-probabilities, so that training never
// re-tokenises decoded text. Backends that only speak chat messages (Ollama)
// read Messages instead and cannot be trained on.
//
// Optional interfaces add what a batching backend can do beyond Generate:
// Releaser (finished sequences' caches go first), EachGenerator (a
// simultaneous move's requests in one submission) and Scheduler (a
// deterministic decode schedule, so that runs are reproducible to the bit
// whatever the callers' timing).
//
// Implementations live in sub-packages: llama (embedded llama.cpp with
// continuous batching), ollama (HTTP) and scripted (rule-based, for tests and
// baselines).
package inference

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// Message is one chat message, used by backends that take messages rather
// than tokens and by chat templates.
type Message struct {
	Role    string `json:"role"` // "system", "user" or "assistant"
	Content string `json:"content"`
}

// Sampling holds the sampler settings of one request. The zero value means
// greedy decoding (temperature 0).
type Sampling struct {
	Temperature float32 `json:"temperature" yaml:"temperature"`
	TopK        int     `json:"top_k,omitempty" yaml:"top_k"`
	TopP        float32 `json:"top_p,omitempty" yaml:"top_p"` // 0 or 1 disables
	MinP        float32 `json:"min_p,omitempty" yaml:"min_p"` // 0 disables
	Seed        uint64  `json:"seed" yaml:"-"`
}

// Temperature bounds: beyond them 1/T overflows or flattens every logit
// to the same value, and samplers misbehave (llama.cpp aborts on the
// NaN logits an infinite temperature makes under a grammar).
const (
	MinTemperature = 1e-6
	MaxTemperature = 1e6
)

// Validate reports settings no sampler can use, naming the field: a
// temperature that is negative, NaN, infinite or outside
// [MinTemperature, MaxTemperature] (0 is greedy), top_p or min_p outside
// [0, 1], a negative top_k. Backends call it before any sampler sees the
// values.
func (s Sampling) Validate() error {
	var errs []error
	t := float64(s.Temperature)
	switch {
	case math.IsNaN(t) || math.IsInf(t, 0):
		errs = append(errs, fmt.Errorf("temperature %v: want a finite number", s.Temperature))
	case t < 0:
		errs = append(errs, fmt.Errorf("temperature %v < 0 (0 is greedy)", s.Temperature))
	case t != 0 && (t < MinTemperature || t > MaxTemperature):
		errs = append(errs, fmt.Errorf("temperature %v outside [%g, %g] (0 is greedy)", s.Temperature, MinTemperature, MaxTemperature))
	}
	// The negated comparisons also catch NaN.
	if !(s.TopP >= 0 && s.TopP <= 1) {
		errs = append(errs, fmt.Errorf("top_p %v outside [0, 1]", s.TopP))
	}
	if !(s.MinP >= 0 && s.MinP <= 1) {
		errs = append(errs, fmt.Errorf("min_p %v outside [0, 1]", s.MinP))
	}
	if s.TopK < 0 {
		errs = append(errs, fmt.Errorf("top_k %d < 0 (0 disables)", s.TopK))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("inference: sampling: %w", err)
	}
	return nil
}

// Request asks for one continuation of one sequence.
type Request struct {
	// Key names the sequence (for example "ep12/seat3"). A backend with a KV
	// cache reuses the cached prefix of the previous request with the same
	// key, so a seat's next turn decodes only its new tokens.
	Key string
	// Prompt is the complete token stream of the sequence so far.
	Prompt []int32
	// Messages is used instead of Prompt by message-level backends.
	Messages []Message

	MaxTokens int
	Sampling  Sampling
	// Grammar is a GBNF grammar (root rule "root") constraining the reply.
	Grammar string
	// Stop ends generation when the decoded reply ends with one of these
	// strings; the stop string stays in the reply.
	Stop []string
	// StopTokens end generation when sampled (in addition to end-of-generation
	// tokens of the vocabulary). The stop token is part of the reply.
	StopTokens []int32
	// Adapter selects the weights the sequence is decoded with: "" the
	// backend's current adapter (what it was opened or last swapped with),
	// AdapterBase the base weights without any adapter, any other name an
	// adapter the backend registered under it (llama: LoadAdapter). One
	// backend can so serve several players of one base model at once.
	// The llama backend rejects names it does not know; backends without
	// adapters (ollama, scripted) ignore the field.
	Adapter string
	// TopLogprobs asks for the n most likely tokens of the model's raw
	// softmax at every generated position (Response.TopLogprobs), as
	// OpenAI's top_logprobs; 0 asks for none. Backends that cannot compute
	// them leave the response's field nil.
	TopLogprobs int
}

// TokenLogprob is a token and its log-probability.
type TokenLogprob struct {
	Token   int32   `json:"token"`
	Logprob float32 `json:"logprob"`
}

// AdapterBase is the Request.Adapter that selects a model's base weights.
const AdapterBase = "<base>"

// StopReason says why a generation ended.
type StopReason string

const (
	StopEOG    StopReason = "eog"    // an end-of-generation token was sampled
	StopString StopReason = "stop"   // a stop string or stop token matched
	StopLength StopReason = "length" // MaxTokens reached
	StopFull   StopReason = "full"   // the context has no room left
)

// Response is the result of one Request.
type Response struct {
	// Tokens are the sampled token ids, exactly as sampled.
	Tokens []int32
	// Logprobs[i] is the log-probability of Tokens[i] under the distribution
	// it was sampled from (after temperature and filters). Behaviour
	// log-probabilities for importance ratios.
	Logprobs []float32
	// RawLogprobs[i] is the log-probability of Tokens[i] under the model's
	// untempered, unfiltered softmax. This is what a trainer recomputes.
	RawLogprobs []float32
	Text        string
	Stop        StopReason
	// PolicyVersion identifies the weights (adapter) that produced the reply.
	PolicyVersion int
	// ReusedTokens counts prompt tokens served from the KV cache.
	ReusedTokens int
	// TopLogprobs[i] are the Request.TopLogprobs most likely tokens at
	// position i under the raw softmax (RawLogprobs' distribution), most
	// likely first; nil when none were asked for.
	TopLogprobs [][]TokenLogprob
	// Allowed[i] is the set of tokens the request's grammar allowed at
	// position i, recorded where it held at most MaxRecordedAllowed
	// tokens (a move menu, a number); its IDs are nil elsewhere (free
	// text, no grammar). Nil when the backend records none. A trainer
	// renormalises over it to train the distribution the token was
	// sampled from (docs/learning.md#grammar-logprobs).
	Allowed []AllowedTokens
}

// MaxRecordedAllowed is the largest grammar-allowed set a backend records
// in Response.Allowed: structured moves allow a handful of tokens per
// position, free text nearly the whole vocabulary.
const MaxRecordedAllowed = 256

// AllowedTokens is the set of tokens a grammar allowed at one sampled
// position.
type AllowedTokens struct {
	// IDs are the allowed tokens in increasing order (nil: not recorded).
	IDs []int32 `json:"ids"`
	// LogMass is the log of the set's probability under the model's
	// untempered softmax, log Σ_{a∈IDs} π(a): RawLogprobs[i] − LogMass is
	// the sampled token's log-probability renormalised over the set.
	LogMass float32 `json:"log_mass"`
}

// Backend generates continuations. Generate is safe for concurrent use:
// batching backends merge the requests of concurrent callers into one decode
// loop, so many goroutines (one per episode) keep the batch full.
type Backend interface {
	Generate(ctx context.Context, reqs []Request) ([]Response, error)
	Close() error
}

// EachGenerator is implemented by batching backends that accept several
// independent requests in one submission. GenerateEach decodes reqs as
// concurrent Generate calls would, request i under ctxs[i], and returns
// each request's response or error; they reach the decode loop together,
// in order, as one submission. Callers with simultaneous requests (the seats
// of one move) use it so that which sequences are decoded together — and
// with it the last bits of their logits — does not depend on goroutine
// timing.
type EachGenerator interface {
	GenerateEach(ctxs []context.Context, reqs []Request) ([]Response, []error)
}

// Scheduler is implemented by batching backends that can make the
// sequences they decode together a function of what their callers ask,
// not of when: a caller opens a Session, and while any open session has
// no request in flight (its caller is working out the next one), the
// backend decodes nothing; submissions made meanwhile enter the decode in
// the sessions' order. A fixed set of automated callers then gets the same
// tokens and logprobs, to the bit, on every run. The price is that every
// decode step waits for the slowest caller's turn-around, so a session
// must only be held by a caller that answers without waiting on anything
// else (not a person, nor a remote client); Close ends it.
type Scheduler interface {
	Session(order int) Session
}

// Session is one caller of a Scheduler.
type Session interface {
	EachGenerator
	Close()
	// Scheduler is the backend the session belongs to.
	Scheduler() Scheduler
}

type sessionKey struct{}

// WithSession returns a context under which the calls a Scheduler gets
// (Generate, GenerateEach) count as s's: whatever the caller asks of the
// backend while s has nothing in flight — a judge scoring the episode,
// say — joins s's schedule instead of waiting for it.
func WithSession(ctx context.Context, s Session) context.Context {
	return context.WithValue(ctx, sessionKey{}, s)
}

// SessionOf returns the session ctx carries (WithSession), or nil.
func SessionOf(ctx context.Context) Session {
	s, _ := ctx.Value(sessionKey{}).(Session)
	return s
}

// Releaser is implemented by backends that keep state per Request.Key (a
// KV cache per sequence). Release says that the sequences whose keys start
// with one of prefixes are finished (for example "r1/e12/" when episode 12
// of run r1 has ended): such a backend may keep their state only as a
// low-priority cache, given up before that of live sequences. A key
// released and then used again is live again. Release never fails and
// never changes the responses of later requests, only what they cost.
type Releaser interface {
	Release(prefixes ...string)
}

// Tokenizer is implemented by token-level backends.
type Tokenizer interface {
	Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error)
	Detokenize(tokens []int32) (string, error)
	// ChatTemplate renders messages with the model's chat template.
	// addAssistant appends the opening of an assistant turn.
	ChatTemplate(msgs []Message, addAssistant bool) (string, error)
	// EOG reports whether a token ends generation (end of turn/text).
	EOG(token int32) bool
}

// ChatOptions are a chat template's settings besides the messages.
type ChatOptions struct {
	// AddAssistant appends the opening of an assistant turn.
	AddAssistant bool
	// Thinking, when not nil, sets the template's enable_thinking
	// variable: false renders a thinking model's no-reasoning form (Qwen3:
	// an empty <think></think> block after the opening). Nil is the
	// template's default.
	Thinking *bool
}

// ChatRenderer is implemented by tokenizers whose chat template takes
// ChatOptions (a Jinja template: the llama backend).
type ChatRenderer interface {
	RenderChat(msgs []Message, o ChatOptions) (string, error)
}

// RenderChat renders msgs with t's chat template and o: through
// ChatRenderer when t implements it, else through ChatTemplate, which
// cannot set Thinking.
func RenderChat(t Tokenizer, msgs []Message, o ChatOptions) (string, error) {
	if r, ok := t.(ChatRenderer); ok {
		return r.RenderChat(msgs, o)
	}
	if o.Thinking != nil {
		return "", errors.New("inference: this tokenizer's chat template cannot switch thinking on or off")
	}
	return t.ChatTemplate(msgs, o.AddAssistant)
}

// SpecialTexter is implemented by tokenizers that can list the texts of
// their special tokens: the strings that Tokenize turns into control tokens
// when parseSpecial is true (e.g. "<|im_start|>"). Callers that render text
// written by a model or a remote participant into a prompt use it to keep
// that text from forging control tokens (a fake end of turn or system
// message).
type SpecialTexter interface {
	SpecialTexts() []string
}

// ErrContextFull is returned (wrapped) when a prompt does not fit the context.
var ErrContextFull = errors.New("inference: prompt does not fit the context")

// PromptTokens tokenises a prompt for t: with chat, user (after system,
// when not empty) rendered by the model's chat template up to the opening
// of the assistant's turn; without, user as raw text with the model's
// start-of-text token.
func PromptTokens(t Tokenizer, system, user string, chat bool) ([]int32, error) {
	if !chat {
		return t.Tokenize(user, true, true)
	}
	var msgs []Message
	if system != "" {
		msgs = append(msgs, Message{Role: "system", Content: system})
	}
	text, err := t.ChatTemplate(append(msgs, Message{Role: "user", Content: user}), true)
	if err != nil {
		return nil, err
	}
	return t.Tokenize(text, false, true)
}
