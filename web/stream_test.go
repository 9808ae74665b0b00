package web

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/omar-selfplay/omar/chattemplate"
	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/engine/remote"
	"github.com/omar-selfplay/omar/games/sealedbid"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/llama"
	"github.com/omar-selfplay/omar/inference/scripted"
	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/model"
	"github.com/omar-selfplay/omar/players"
	"github.com/omar-selfplay/omar/seeds"
	"github.com/omar-selfplay/omar/selfplay"
)

// streamLM is a token-level test model. Its reply is a function of the
// prompt alone, so two tables that send the same prompts play the same
// episode whatever their sampling seeds; and it answers with the reply's
// characters one token each — ids a model may sample but Tokenize never
// returns — so a seat that re-tokenises its conversation sends other ids
// than one that keeps the sampled ones. It records every request by seat.
type streamLM struct {
	*scripted.Backend

	mu   sync.Mutex
	reqs map[int][]inference.Request
}

func newStreamLM(t *testing.T) *streamLM {
	t.Helper()
	b, err := scripted.New(scripted.Options{Rule: func(inference.Request) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	return &streamLM{Backend: b, reqs: map[int][]inference.Request{}}
}

// seatOfKey reads the seat index out of a request key (".../s<seat>/...").
var seatOfKey = regexp.MustCompile(`/s(\d+)(/|$)`)

func (m *streamLM) Generate(ctx context.Context, reqs []inference.Request) ([]inference.Response, error) {
	out := make([]inference.Response, len(reqs))
	for i, req := range reqs {
		var seat int
		if k := seatOfKey.FindStringSubmatch(req.Key); k != nil {
			fmt.Sscan(k[1], &seat)
		}
		m.mu.Lock()
		m.reqs[seat] = append(m.reqs[seat], req)
		m.mu.Unlock()
		resp, err := m.respond(req)
		if err != nil {
			return nil, err
		}
		out[i] = resp
	}
	return out, nil
}

// respond picks the reply by a hash of the prompt: a bid, a bid after
// reasoning, a bid with spaces around it, a bid that stops without an
// end-of-turn token, or a reply the engine rejects. Stop strings and
// MaxTokens cut it as a sampling backend would.
func (m *streamLM) respond(req inference.Request) (inference.Response, error) {
	h := fnv.New64a()
	for _, id := range req.Prompt {
		fmt.Fprintf(h, "%d,", id)
	}
	v := h.Sum64()
	bid := fmt.Sprintf("BID %d", v/7%101)
	text, eog := []string{bid, "<think>\nOpen low.\n</think>\n\n" + bid, "  " + bid + " ", bid, "I pass."}[v%5], v%5 != 3
	resp := inference.Response{Stop: inference.StopEOG}
	var sofar string
	for _, r := range text {
		ids, err := m.Tokenize(string(r), false, false)
		if err != nil {
			return resp, err
		}
		resp.Tokens = append(resp.Tokens, ids...)
		sofar += string(r)
		if slices.ContainsFunc(req.Stop, func(s string) bool { return s != "" && strings.Contains(sofar, s) }) {
			resp.Stop, eog = inference.StopString, false
			break
		}
	}
	if eog {
		end, err := m.Tokenize("<|im_end|>", false, true)
		if err != nil {
			return resp, err
		}
		resp.Tokens = append(resp.Tokens, end...)
	} else if resp.Stop == inference.StopEOG {
		resp.Stop = inference.StopString
	}
	if len(resp.Tokens) > req.MaxTokens {
		resp.Tokens, resp.Stop = resp.Tokens[:req.MaxTokens], inference.StopLength
	}
	resp.Logprobs = make([]float32, len(resp.Tokens))
	resp.RawLogprobs = make([]float32, len(resp.Tokens))
	text, err := m.Detokenize(resp.Tokens)
	resp.Text = text
	return resp, err
}

// requests returns the requests by seat.
func (m *streamLM) requests() map[int][]inference.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reqs
}

// testLM is a recording test model and its tokenizer.
type testLM interface {
	inference.Backend
	inference.Tokenizer
	requests() map[int][]inference.Request
}

// qwen3LM is streamLM with Qwen3's chat template, whose enable_thinking
// switch the thinking modes set (inference.ChatRenderer).
type qwen3LM struct {
	*streamLM
	tmpl *chattemplate.Template
}

func newQwen3LM(t *testing.T) *qwen3LM {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "chattemplate", "testdata", "qwen3.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chattemplate.Parse(string(src))
	if err != nil {
		t.Fatal(err)
	}
	return &qwen3LM{streamLM: newStreamLM(t), tmpl: tmpl}
}

func (m *qwen3LM) RenderChat(msgs []inference.Message, o inference.ChatOptions) (string, error) {
	cm := make([]chattemplate.Message, len(msgs))
	for i, msg := range msgs {
		cm[i] = chattemplate.Message{Role: msg.Role, Content: msg.Content}
	}
	return m.tmpl.Render(cm, chattemplate.Options{AddGenerationPrompt: o.AddAssistant, EnableThinking: o.Thinking})
}

func (m *qwen3LM) ChatTemplate(msgs []inference.Message, addAssistant bool) (string, error) {
	return m.RenderChat(msgs, inference.ChatOptions{AddAssistant: addAssistant})
}

// servedTable is a sealed-bid auction of two model bidders over several
// rounds, small enough a context that seat streams start new segments.
var servedTable = engine.Params{"bidders": 2, "rounds": 6}

// selfPlayRequests plays episode 0 of a self-play run of seed 3 with
// every seat played by lm, and returns the requests by seat and the seed
// the episode was dealt from.
func selfPlayRequests(t *testing.T, lm testLM, reply selfplay.Reply) (map[int][]inference.Request, uint64) {
	t.Helper()
	o := selfplay.Options{}.Defaults()
	o.Seed, o.Parallel, o.Reply, o.Params = 3, 1, reply, servedTable
	r, err := selfplay.NewRunner(sealedbid.New(), &selfplay.Player{Label: "lm", Backend: lm, Tokenizer: lm}, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(context.Background(), 0, 1, func(*selfplay.EpisodeResult) error { return nil }); err != nil {
		t.Fatal(err)
	}
	return lm.requests(), r.EpisodeSeed(0)
}

// servedRequests plays one episode dealt from seed with every seat given
// to the model through omar serve's API, and returns the requests by seat.
func servedRequests(t *testing.T, lm testLM, reply selfplay.Reply, seed uint64) map[int][]inference.Request {
	t.Helper()
	agents, err := NewModelAgents([]string{"lm"}, []*selfplay.Player{{Label: "lm", Backend: lm, Tokenizer: lm}}, SeatOptions{Reply: reply})
	if err != nil {
		t.Fatal(err)
	}
	ts, _ := newSite(t, Options{}, agents)
	c := &remote.Client{BaseURL: ts.URL, Secret: testSecret}
	ctx := context.Background()
	info, err := c.Create(ctx, remote.CreateRequest{Env: sealedbid.New().ID(), Seed: &seed, Params: servedTable, Agents: []string{"lm"}})
	if err != nil {
		t.Fatal(err)
	}
	for after := int64(0); ; {
		page, err := c.Events(ctx, info.ID, -1, testSecret, after, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if page.Done {
			break
		}
		after = page.Next
	}
	return lm.requests()
}

// segmentOf is the part of a request key after the seat: the segment.
func segmentOf(key string) string {
	loc := seatOfKey.FindStringIndex(key)
	if loc == nil {
		return key
	}
	return key[loc[1]:]
}

// sameRequests reports where a served seat's requests differ from a
// self-play seat's: prompt ids, grammar, limits, stop strings and segment
// (the keys' prefixes and the seeds differ by design).
func sameRequests(t *testing.T, self, served map[int][]inference.Request) {
	t.Helper()
	if len(self) != 2 || len(served) != 2 {
		t.Fatalf("requests of %d self-play seats and %d served seats, want 2 each", len(self), len(served))
	}
	for seat, want := range self {
		got := served[seat]
		if len(got) != len(want) {
			t.Errorf("seat %d: %d served requests, %d in self-play", seat, len(got), len(want))
		}
		for k := range min(len(got), len(want)) {
			g, w := got[k], want[k]
			switch {
			case !slices.Equal(g.Prompt, w.Prompt):
				i := firstDiff(g.Prompt, w.Prompt)
				t.Fatalf("seat %d request %d: served prompt ids differ from self-play's at %d of %d and %d\nserved    …%v\nself-play …%v",
					seat, k, i, len(g.Prompt), len(w.Prompt), g.Prompt[i:min(i+12, len(g.Prompt))], w.Prompt[i:min(i+12, len(w.Prompt))])
			case g.Grammar != w.Grammar || g.MaxTokens != w.MaxTokens || !slices.Equal(g.Stop, w.Stop):
				t.Fatalf("seat %d request %d: served grammar %q, max tokens %d, stop %q; self-play %q, %d, %q",
					seat, k, g.Grammar, g.MaxTokens, g.Stop, w.Grammar, w.MaxTokens, w.Stop)
			case segmentOf(g.Key) != segmentOf(w.Key):
				t.Fatalf("seat %d request %d: served key %q, self-play %q: another segment", seat, k, g.Key, w.Key)
			}
		}
	}
}

// firstDiff is the first index where a and b differ.
func firstDiff(a, b []int32) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

// streamReply is self-play's reply defaults in a context small enough
// that the auction's seat streams start new segments.
func streamReply() selfplay.Reply {
	r := selfplay.DefaultReply()
	r.Context = 700
	return r
}

// TestServedSeatSendsSelfPlayTokens: a served seat sends its backend the
// token ids a self-play seat of the same game, seed and reply settings
// sends, turn after turn — rejected replies and new segments included —
// and samples with self-play's seeds for the episode's seed.
func TestServedSeatSendsSelfPlayTokens(t *testing.T) {
	reply := streamReply()
	self, seed := selfPlayRequests(t, newStreamLM(t), reply)
	served := servedRequests(t, newStreamLM(t), reply, seed)
	sameRequests(t, self, served)
	segments := false
	for seat, reqs := range served {
		for turn, req := range reqs {
			segments = segments || strings.HasSuffix(req.Key, "/g1")
			if want := seeds.Derive(selfplay.SamplingSeed(seed, 0), uint64(seat), uint64(turn)); req.Sampling.Seed != want {
				t.Fatalf("seat %d turn %d samples with seed %d, want %d", seat, turn, req.Sampling.Seed, want)
			}
		}
	}
	if !segments {
		t.Error("no seat stream started a second segment: the test no longer covers segments")
	}
}

// TestServedSeatThinking: a served seat plays a reasoning model's thinking
// settings as self-play does — the template's thinking switch in its
// prompts, the grammar that lets it reason, the reasoning budget, the
// history kept — where it used to ignore them.
func TestServedSeatThinking(t *testing.T) {
	for _, tc := range []struct{ thinking, history string }{
		{"", ""}, {"off", ""}, {"on", ""}, {"on", selfplay.HistoryStream}, {"budget 6", ""},
	} {
		t.Run(tc.thinking+"/"+tc.history, func(t *testing.T) {
			reply := streamReply()
			reply.Thinking, reply.ThinkingHistory = tc.thinking, tc.history
			self, seed := selfPlayRequests(t, newQwen3LM(t), reply)
			lm := newQwen3LM(t)
			served := servedRequests(t, lm, reply, seed)
			sameRequests(t, self, served)
			first := served[0][0]
			prompt, err := lm.Detokenize(first.Prompt)
			if err != nil {
				t.Fatal(err)
			}
			off := strings.HasSuffix(prompt, "<think>\n\n</think>\n\n")
			reasons := strings.HasPrefix(first.Grammar, `root ::= "<think>"`)
			budget := slices.Contains(first.Stop, "</think>") && first.MaxTokens == 6
			if want := tc.thinking == "off"; off != want {
				t.Errorf("the prompt's empty think block %v, want %v: …%q", off, want, prompt[max(0, len(prompt)-60):])
			}
			if want := tc.thinking != "" && tc.thinking != "off"; reasons != want {
				t.Errorf("the reasoning grammar %v, want %v: %q", reasons, want, first.Grammar)
			}
			if want := strings.HasPrefix(tc.thinking, "budget"); budget != want {
				t.Errorf("a reasoning request of the budget %v, want %v (stop %q, max tokens %d)", budget, want, first.Stop, first.MaxTokens)
			}
		})
	}
}

// TestServeChatTemplate: omar serve loads its model players with the
// reply settings' chat_template, as a run loads its policy, so a served
// seat renders its prompts with the template the policy was trained on.
func TestServeChatTemplate(t *testing.T) {
	lib := llamatest.LibDir()
	if lib == "" {
		t.Skip("no llama.cpp libraries in lib/llama/cpu (make llama installs them)")
	}
	mpath := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := model.WriteFile(mpath, model.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	seat := SeatOptions{}.Defaults()
	seat.ChatTemplate = filepath.Join("..", "chattemplate", "testdata", "qwen3.jinja")
	seat.Thinking = selfplay.ThinkingOff
	agents, lineup, err := openPlayers(context.Background(), ServeOptions{Players: []players.Spec{{Kind: players.KindBase}}, Model: mpath,
		Backend: players.Backend{LlamaLib: lib, Threads: 1}, Slots: 1, Context: 1024, Seat: seat})
	if err != nil {
		t.Fatal(err)
	}
	defer lineup.Close()
	b, ok := agents.players[ModelAlias].Tokenizer.(*llama.Backend)
	if !ok {
		t.Fatalf("the model player's tokenizer is %T, want the llama backend", agents.players[ModelAlias].Tokenizer)
	}
	if got := b.ChatTemplateSource(); got != "jinja: the chat_template override" {
		t.Errorf("chat template source %q, want the override", got)
	}
	off := false
	text, err := inference.RenderChat(b, []inference.Message{{Role: "user", Content: "Bid."}}, inference.ChatOptions{AddAssistant: true, Thinking: &off})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(text, "<think>\n\n</think>\n\n") {
		t.Errorf("rendered %q, want Qwen3's no-thinking form", text)
	}
}
