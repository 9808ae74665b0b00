// Package judgetest fakes an Ollama server for tests of the SOTOPIA judge
// over Ollama, so that no test needs a real Ollama or model. It is
// ollamatest's protocol-faithful server with a scripted judge model.
package judgetest

import (
	"strings"
	"sync"
	"testing"

	"github.com/ollama/ollama/api"
	"github.com/omar-selfplay/omar/inference/ollama/ollamatest"
)

// Ollama is a server whose one model follows the request's format: every
// reply is ollamatest.Instance of the format's JSON schema (every integer
// at its maximum, every string "ok", every boolean true, every array at
// its minItems). The model can think, and when a request lets it, its
// thinking alone fills num_predict, so a judge that leaves thinking on
// never gets a judgement.
type Ollama struct {
	// URL is the server's base URL.
	URL string
	// Model is the only model pulled ("judge:test"); asking for another
	// gets Ollama's not-found error.
	Model string
	// GarbageFirst makes the first reply to every distinct conversation
	// run out of tokens before its JSON starts (whitespace up to
	// num_predict, as Ollama's docs warn a model in JSON mode may write),
	// so that every judgement needs one retry.
	GarbageFirst bool

	srv  *ollamatest.Server
	mu   sync.Mutex
	seen map[string]bool
}

// NewOllama starts a fake server, closed when t ends.
func NewOllama(t testing.TB, garbageFirst bool) *Ollama {
	f := &Ollama{Model: "judge:test", GarbageFirst: garbageFirst, seen: map[string]bool{}}
	f.srv = ollamatest.New(t, ollamatest.Options{Models: []ollamatest.Model{{Name: f.Model, Thinking: true}}, Reply: f.reply})
	f.URL = f.srv.URL
	return f
}

// Requests returns the chat requests received so far.
func (f *Ollama) Requests() []api.ChatRequest {
	var out []api.ChatRequest
	for _, r := range f.srv.ChatRequests() {
		if ollamatest.FullName(r.Model) == ollamatest.FullName(f.Model) {
			out = append(out, r)
		}
	}
	return out
}

func (f *Ollama) reply(c ollamatest.Call) ollamatest.Reply {
	var conv strings.Builder
	for _, m := range c.Messages {
		conv.WriteString(m.Role + "\x00" + m.Content + "\x00")
	}
	f.mu.Lock()
	garbage := f.GarbageFirst && !f.seen[conv.String()]
	f.seen[conv.String()] = true
	f.mu.Unlock()
	r := ollamatest.DefaultReply(c)
	n := c.Options.NumPredict
	if n <= 0 {
		n = 10 * c.Options.NumCtx
	}
	// A token is at most four bytes: this much text fills the budget.
	fill := 4*n + 4
	r.Thinking = strings.Repeat("Let me weigh each dimension. ", fill/29+1)
	if garbage {
		r.Content = strings.Repeat(" ", fill) + r.Content
	}
	return r
}
