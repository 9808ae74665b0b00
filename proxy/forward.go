package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/omar-selfplay/omar/inference"
)

// In forwarding mode (Options.Forward) chat calls are answered by another
// OpenAI-compatible endpoint: a teacher served elsewhere. The proxy records
// the conversation as the policy would have seen it: the prompt rendered
// by the policy's own chat template and tokenised with its tokenizer, the
// teacher's reply (content and calls in the template's form) tokenised the
// same way and closed with the template's end of turn. Those reply tokens
// carry the mask, so a forwarded session trains the policy to say what the
// teacher said (SFT, distillation); they were never sampled by the policy
// and have no behaviour logprobs, so every forwarded turn is flagged
// (forwardedFlag) and PPO gives it no credit.

// forwardedFlag is the TurnFlags reason of a turn the policy did not sample.
const forwardedFlag = "forwarded: not sampled by the policy"

// probeText is an assistant reply whose rendering shows what the chat
// template writes after a reply: its end of turn.
const probeText = "omar-forward-probe"

// maxUpstreamBytes bounds an upstream answer.
const maxUpstreamBytes = 16 << 20

// forwardError reports forwarding options that cannot work.
func (o Options) forwardError() error {
	if o.Forward == "" {
		if o.ForwardKey != "" || o.ForwardModel != "" {
			return errors.New("forward key or model without a forward URL")
		}
		return nil
	}
	u, err := url.Parse(o.Forward)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("forward URL %q: want http(s)://host[:port]/path (the base of …/chat/completions)", o.Forward)
	}
	return nil
}

// upstreamAnswer is what the proxy reads of an upstream chat completion.
type upstreamAnswer struct {
	Choices []struct {
		Message struct {
			Content   *string    `json:"content"`
			ToolCalls []ToolCall `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Error *APIError `json:"error"`
}

// askUpstream sends req to the forward endpoint, without streaming, and
// returns the reply's content, calls and finish reason.
func (p *Proxy) askUpstream(ctx context.Context, req ChatRequest) (string, []ToolCall, string, *APIError) {
	if p.opts.ForwardModel != "" {
		req.Model = p.opts.ForwardModel
	}
	req.Stream, req.StreamOptions = false, nil
	body, err := json.Marshal(&req)
	if err != nil {
		return "", nil, "", &APIError{Status: http.StatusInternalServerError, Message: fmt.Sprintf("forward: %v", err)}
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(p.opts.Forward, "/")+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return "", nil, "", &APIError{Status: http.StatusInternalServerError, Message: fmt.Sprintf("forward: %v", err)}
	}
	hr.Header.Set("Content-Type", "application/json")
	if p.opts.ForwardKey != "" {
		hr.Header.Set("Authorization", "Bearer "+p.opts.ForwardKey)
	}
	client := p.opts.ForwardClient
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Minute}
	}
	resp, err := client.Do(hr)
	if err != nil {
		return "", nil, "", &APIError{Status: http.StatusBadGateway, Type: "server_error", Code: "upstream", Message: fmt.Sprintf("forward: %v", err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxUpstreamBytes))
	if err != nil {
		return "", nil, "", &APIError{Status: http.StatusBadGateway, Type: "server_error", Code: "upstream", Message: fmt.Sprintf("forward: reading the answer: %v", err)}
	}
	var ans upstreamAnswer
	jsonErr := json.Unmarshal(data, &ans)
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(data[:min(len(data), 512)]))
		if jsonErr == nil && ans.Error != nil {
			msg = ans.Error.Message
		}
		// The upstream's refusal of a request is the caller's; its own
		// failure is a bad gateway.
		status := http.StatusBadGateway
		if resp.StatusCode >= 400 && resp.StatusCode < 500 {
			status = resp.StatusCode
		}
		return "", nil, "", &APIError{Status: status, Code: "upstream", Message: fmt.Sprintf("forward: the upstream answered %d: %s", resp.StatusCode, msg)}
	}
	if jsonErr != nil || len(ans.Choices) != 1 {
		return "", nil, "", &APIError{Status: http.StatusBadGateway, Type: "server_error", Code: "upstream", Message: "forward: the upstream's answer is not a chat completion with one choice"}
	}
	ch := ans.Choices[0]
	content := ""
	if ch.Message.Content != nil {
		content = *ch.Message.Content
	}
	calls := ch.Message.ToolCalls
	for i := range calls {
		calls[i].Index = nil
		if calls[i].Type == "" {
			calls[i].Type = "function"
		}
	}
	if e := checkToolCalls("choices[0].message", calls); e != nil {
		return "", nil, "", &APIError{Status: http.StatusBadGateway, Type: "server_error", Code: "upstream", Message: "forward: the upstream's " + e.Message}
	}
	return content, calls, ch.FinishReason, nil
}

// endOfTurn returns the ids the chat template writes after an assistant
// reply up to and including its end-of-generation token, learnt once by
// rendering a probe reply.
func (p *Proxy) endOfTurn() ([]int32, string, error) {
	p.eotOnce.Do(func() {
		user := []inference.Message{{Role: "user", Content: "x"}}
		full, err := inference.RenderChat(p.tok, append(user, inference.Message{Role: "assistant", Content: probeText}), inference.ChatOptions{})
		if err != nil {
			p.eotErr = fmt.Errorf("forward: the chat template: %w", err)
			return
		}
		i := strings.LastIndex(full, probeText)
		if i < 0 {
			p.eotErr = errors.New("forward: the chat template does not render an assistant reply")
			return
		}
		ids, err := p.tok.Tokenize(full[i+len(probeText):], false, true)
		if err != nil {
			p.eotErr = err
			return
		}
		for k, t := range ids {
			if p.tok.EOG(t) {
				p.eot = ids[:k+1]
				p.eotText, p.eotErr = p.tok.Detokenize(p.eot)
				return
			}
		}
		p.eotErr = errors.New("forward: the chat template ends an assistant reply with no end-of-generation token")
	})
	return p.eot, p.eotText, p.eotErr
}

// forwardCall answers a chat call from the upstream and records it in s
// (nil: no session) re-tokenised for the policy.
func (p *Proxy) forwardCall(ctx context.Context, s *session, pl *plan) (*result, *APIError) {
	eot, eotText, err := p.endOfTurn()
	if err != nil {
		return nil, &APIError{Status: http.StatusInternalServerError, Message: err.Error()}
	}
	text, err := inference.RenderChat(p.tok, pl.messages, inference.ChatOptions{AddAssistant: true, Thinking: pl.thinking})
	if err != nil {
		return nil, &APIError{Status: http.StatusInternalServerError, Message: fmt.Sprintf("chat template: %v", err)}
	}
	tokenize := func(t string, addSpecial bool) ([]int32, error) { return p.tokenize(ctx, t, addSpecial) }
	var prompt []int32
	seg, fresh := 0, 0
	if s != nil {
		prompt, seg, fresh, err = s.extend(text, nil, false, tokenize)
	} else {
		prompt, err = tokenize(text, true)
		fresh = len(prompt)
	}
	if err != nil {
		return nil, &APIError{Status: http.StatusInternalServerError, Message: fmt.Sprintf("tokenize: %v", err)}
	}
	if len(prompt) > p.opts.MaxPromptTokens {
		return nil, &APIError{Status: http.StatusBadRequest, Code: "prompt_too_long", Param: "messages",
			Message: fmt.Sprintf("the prompt has %d tokens (with its session's stream), over the %d a call may have", len(prompt), p.opts.MaxPromptTokens)}
	}
	started := time.Now()
	content, calls, finish, e := p.askUpstream(ctx, *pl.forward)
	if e != nil {
		return nil, e
	}
	// The teacher's text is data: parsing no special tokens in it keeps it
	// from forging the policy's control tokens.
	echo := callsText(content, calls)
	reply, err := p.tok.Tokenize(echo, false, false)
	if err != nil {
		return nil, &APIError{Status: http.StatusInternalServerError, Message: fmt.Sprintf("tokenize: %v", err)}
	}
	stop := inference.StopEOG
	if finish == "length" {
		stop = inference.StopLength // the teacher did not end its turn
	} else {
		reply = append(reply, eot...)
	}
	return p.forwardResult(s, pl, forwarded{prompt: prompt, reply: reply, seg: seg, fresh: fresh, text: text,
		content: content, calls: calls, echo: echo, eotText: eotText, stop: stop, started: started})
}

// forwarded is one forwarded call, re-tokenised.
type forwarded struct {
	prompt, reply       []int32
	seg, fresh          int
	text, content, echo string
	eotText             string
	calls               []ToolCall
	stop                inference.StopReason
	started             time.Time
}

// forwardResult builds the answer of a forwarded call and records it.
func (p *Proxy) forwardResult(s *session, pl *plan, f forwarded) (*result, *APIError) {
	zeros := make([]float32, len(f.reply))
	resp := inference.Response{Tokens: f.reply, Text: f.content, Stop: f.stop, Logprobs: zeros, RawLogprobs: zeros, PolicyVersion: -1}
	pieces := make([]string, len(f.reply))
	for i, t := range f.reply {
		pieces[i] = p.piece(t)
	}
	res := &result{id: newID(), created: f.started.Unix(), resp: resp, pieces: pieces, prompt: len(f.prompt),
		content: f.content, info: &CallInfo{PolicyVersion: -1}}
	if f.calls != nil {
		res.calls, res.callText = f.calls, f.content
	}
	p.mu.Lock()
	p.stats.Calls++
	p.mu.Unlock()
	if s == nil {
		return res, nil
	}
	if e := p.admit(s, callBytes(len(f.prompt), f.fresh, len(f.reply))); e != nil {
		return nil, e
	}
	c := Call{
		Endpoint: "chat", Prompt: f.prompt, NewPrompt: f.fresh, Tokens: f.reply, Logprobs: zeros, RawLogprobs: zeros,
		PolicyVersion: -1, Sampling: pl.sampling, MaxTokens: pl.maxTokens, Stop: f.stop,
		Started: f.started, Finished: time.Now(), ToolCalls: f.calls, Forwarded: true,
	}
	newSeg := f.seg == len(s.segments)
	tail := ""
	if f.stop == inference.StopEOG {
		tail = f.eotText
	}
	s.record(c, f.seg, f.text, false, f.echo, tail)
	p.grow(s, callBytes(len(f.prompt), f.fresh, len(f.reply)))
	if newSeg {
		p.mu.Lock()
		p.stats.Segments++
		p.mu.Unlock()
	}
	res.info.Session, res.info.Segment, res.info.Call = s.key, f.seg, len(s.calls)-1
	return res, nil
}
