package proxy

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// seedCorpus adds every recorded request body (good and malformed) to f.
func seedCorpus(f *testing.F, endpoint string) {
	files, _ := filepath.Glob("testdata/clients/*.json")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		var c compatCase
		if err := json.Unmarshal(data, &c); err != nil {
			f.Fatal(err)
		}
		if c.Endpoint == endpoint {
			f.Add([]byte(c.Body))
		}
	}
	data, err := os.ReadFile("testdata/malformed.json")
	if err != nil {
		f.Fatal(err)
	}
	var cases []malformedCase
	if err := json.Unmarshal(data, &cases); err != nil {
		f.Fatal(err)
	}
	for _, c := range cases {
		if c.Endpoint != endpoint {
			continue
		}
		if c.Raw != nil {
			f.Add([]byte(*c.Raw))
		} else {
			f.Add([]byte(c.Body))
		}
	}
}

func fuzzOptions() Options {
	o := Options{}.Defaults()
	o.Vocab = 512
	o.MaxTokens = 64
	return o
}

// checkPlan checks what every accepted request must satisfy.
func checkPlan(t *testing.T, p *plan, o *Options) {
	t.Helper()
	if err := p.sampling.Validate(); err != nil {
		t.Fatalf("accepted sampling the backend refuses: %v", err)
	}
	if p.maxTokens < 0 || p.maxTokens > o.MaxTokens {
		t.Fatalf("accepted max tokens %d (bound %d)", p.maxTokens, o.MaxTokens)
	}
	if p.top < 0 || p.top > maxTopLogprobs || (p.top > 0 && !p.logprobs) {
		t.Fatalf("accepted top logprobs %d (logprobs %v)", p.top, p.logprobs)
	}
	if len(p.stop) > maxStops {
		t.Fatalf("accepted %d stop strings", len(p.stop))
	}
	for _, s := range p.stop {
		if s == "" {
			t.Fatal("accepted an empty stop string")
		}
	}
	if p.chat && len(p.messages) == 0 {
		t.Fatal("accepted a chat request without messages")
	}
	if !p.chat {
		for _, id := range p.prompt.Tokens {
			if id < 0 || int(id) >= o.Vocab {
				t.Fatalf("accepted token id %d outside the vocabulary of %d", id, o.Vocab)
			}
		}
	}
}

// FuzzChatRequest decodes arbitrary chat bodies: no input panics, every
// refusal is a 4xx in OpenAI's shape, every accepted request passes the
// checks the backend relies on, and re-encoding an accepted request gives
// the same plan (the decoder reads what the types write).
func FuzzChatRequest(f *testing.F) {
	seedCorpus(f, "/v1/chat/completions")
	o := fuzzOptions()
	f.Fuzz(func(t *testing.T, body []byte) {
		var r ChatRequest
		if e := decodeRequest(bytes.NewReader(body), o.MaxBodyBytes, &r); e != nil {
			checkRefusal(t, e)
			return
		}
		p, e := chatPlan(&r, &o)
		if e != nil {
			checkRefusal(t, e)
			return
		}
		checkPlan(t, p, &o)
		again, err := json.Marshal(&r)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		var r2 ChatRequest
		if e := decodeRequest(bytes.NewReader(again), o.MaxBodyBytes, &r2); e != nil {
			t.Fatalf("re-encoded request %s refused: %v", again, e)
		}
		p2, e := chatPlan(&r2, &o)
		if e != nil {
			t.Fatalf("re-encoded request %s refused: %v", again, e)
		}
		if !reflect.DeepEqual(p, p2) {
			t.Fatalf("re-encoding changed the plan:\n%+v\n%+v", p, p2)
		}
	})
}

// FuzzCompletionRequest is FuzzChatRequest for /v1/completions.
func FuzzCompletionRequest(f *testing.F) {
	seedCorpus(f, "/v1/completions")
	o := fuzzOptions()
	f.Fuzz(func(t *testing.T, body []byte) {
		var r CompletionRequest
		if e := decodeRequest(bytes.NewReader(body), o.MaxBodyBytes, &r); e != nil {
			checkRefusal(t, e)
			return
		}
		p, e := completionPlan(&r, &o)
		if e != nil {
			checkRefusal(t, e)
			return
		}
		checkPlan(t, p, &o)
		if p.prompt.Count != 1 || (p.prompt.IsTokens && len(p.prompt.Tokens) == 0) || (!p.prompt.IsTokens && p.prompt.Text == "") {
			t.Fatalf("accepted prompt %+v", p.prompt)
		}
	})
}

func checkRefusal(t *testing.T, e *APIError) {
	t.Helper()
	if e.Status < 400 || e.Status >= 500 || e.Message == "" || e.Type != "invalid_request_error" {
		t.Fatalf("refusal %+v: want a 4xx invalid_request_error with a message", e)
	}
	if strings.Contains(e.Message, "%!") {
		t.Fatalf("refusal message %q is badly formatted", e.Message)
	}
}
