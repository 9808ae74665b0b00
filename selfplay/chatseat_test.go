package selfplay

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/games/sealedbid"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/ollama"
	"github.com/omar-selfplay/omar/inference/ollama/ollamatest"
)

// adapterLM records the adapters of the requests it serves.
type adapterLM struct {
	*fakeLM
	mu       sync.Mutex
	adapters map[string]int
}

func (a *adapterLM) Generate(ctx context.Context, reqs []inference.Request) ([]inference.Response, error) {
	a.mu.Lock()
	for _, r := range reqs {
		a.adapters[r.Adapter]++
	}
	a.mu.Unlock()
	return a.fakeLM.Generate(ctx, reqs)
}

// TestNamedPlayers: named players share the policy's backend with their
// own adapters, are labelled in the record, and keep no trajectories.
func TestNamedPlayers(t *testing.T) {
	lm := &adapterLM{fakeLM: newFakeLM(byteTokenizer{}), adapters: map[string]int{}}
	pol := &Player{Label: "policy", Backend: lm, Tokenizer: lm.tok}
	opts := testOptions(func(o *Options) {
		o.Players = map[string]*Player{
			"trained": {Label: "adapter:x", Backend: lm, Tokenizer: lm.tok, Adapter: "x"},
			"base":    {Label: "base", Backend: lm, Tokenizer: lm.tok, Adapter: inference.AdapterBase},
		}
		o.Agents = map[string]string{"seat0": "trained", "seat1": "base", "seat2": "policy"}
	})
	r, err := NewRunner(sealedbid.New(), pol, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	var res []*EpisodeResult
	if _, err := r.Run(context.Background(), 0, 4, func(e *EpisodeResult) error { res = append(res, e); return nil }); err != nil {
		t.Fatal(err)
	}
	for _, e := range res {
		var labels []string
		for _, s := range e.Record.Seats {
			labels = append(labels, s.Agent)
		}
		if want := []string{"adapter:x", "base", "policy"}; !slices.Equal(labels, want) {
			t.Errorf("episode %d: agents %v, want %v", e.Index, labels, want)
		}
		for _, tr := range e.Trajectories {
			if tr.Seat != 2 {
				t.Errorf("episode %d: trajectory of seat %d kept, want only the policy's seat 2", e.Index, tr.Seat)
			}
		}
	}
	for _, a := range []string{"", "x", inference.AdapterBase} {
		if lm.adapters[a] == 0 {
			t.Errorf("no request with adapter %q (got %v)", a, lm.adapters)
		}
	}
	checkTokenInTokenOut(t, lm.fakeLM, res)
}

func TestNamedPlayersValidate(t *testing.T) {
	lm := newFakeLM(byteTokenizer{})
	p := &Player{Label: "p", Backend: lm, Tokenizer: lm.tok}
	tests := []struct {
		what    string
		players map[string]*Player
		agents  map[string]string
		want    string
	}{
		{"reserved name", map[string]*Player{"frozen": p}, nil, "reserved"},
		{"reserved scripted name", map[string]*Player{"scripted:naive": p}, nil, "reserved"},
		{"no backend", map[string]*Player{"x": {Label: "x"}}, nil, "no backend"},
		{"unknown agent", map[string]*Player{"x": p}, map[string]string{"*": "y"}, `agent "y"`},
	}
	for _, tt := range tests {
		t.Run(tt.what, func(t *testing.T) {
			o := testOptions(func(o *Options) { o.Players, o.Agents = tt.players, tt.agents })
			err := o.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate: err %v, want one containing %q", err, tt.want)
			}
		})
	}
	// Every seat a named player: no policy needed.
	o := testOptions(func(o *Options) { o.Players, o.Agents = map[string]*Player{"x": p}, map[string]string{"*": "x"} })
	if _, err := NewRunner(sealedbid.New(), nil, nil, o); err != nil {
		t.Errorf("all seats named players, no policy: %v", err)
	}
}

// passFirst answers sealed-bid seats: "I pass." (invalid) to a
// conversation's first notification, then a bid.
func passFirst(c ollamatest.Call) ollamatest.Reply {
	if len(c.Messages) <= 2 {
		return ollamatest.Reply{Content: "I pass."}
	}
	return ollamatest.Reply{Content: "BID 40"}
}

// TestChatSeat plays a seat through the Ollama backend against
// ollamatest's protocol-faithful server: the seat sends the whole conversation as messages, sees the
// engine's rejection of an invalid reply and plays on.
func TestChatSeat(t *testing.T) {
	srv := ollamatest.New(t, ollamatest.Options{Models: []ollamatest.Model{{Name: "fake:1b"}}, Reply: passFirst})
	ob, err := ollama.New(ollama.Options{Host: srv.URL, Model: "fake:1b"})
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	opts := testOptions(func(o *Options) {
		o.Players = map[string]*Player{"remote": {Label: "ollama:fake:1b", Backend: ob}}
		o.Agents = map[string]string{"seat0": "remote", "*": "scripted:shading"}
		o.Grammar = true
	})
	r, err := NewRunner(sealedbid.New(), nil, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	var res []*EpisodeResult
	if _, err := r.Run(context.Background(), 0, 2, func(e *EpisodeResult) error { res = append(res, e); return nil }); err != nil {
		t.Fatal(err)
	}
	for _, e := range res {
		if got := e.Record.Seats[0].Agent; got != "ollama:fake:1b" {
			t.Errorf("seat 0 agent %q, want ollama:fake:1b", got)
		}
		if len(e.Trajectories) != 0 {
			t.Errorf("episode %d: %d trajectories from a message-level seat, want 0", e.Index, len(e.Trajectories))
		}
		var rejected, bids int
		for _, ev := range e.Record.Events {
			switch {
			case ev.Kind == engine.KindValidationError && ev.Seat == 0:
				rejected++
			case ev.Kind == engine.KindAck && ev.Seat == 0:
				bids++
			}
		}
		if rejected != 1 || bids == 0 {
			t.Errorf("episode %d: %d rejections and %d accepted replies of seat 0, want 1 and some", e.Index, rejected, bids)
		}
	}
	reqs := srv.ChatRequests()
	if len(reqs) == 0 {
		t.Fatal("the server got no request")
	}
	seen := map[int]bool{}
	for _, req := range reqs {
		ms := req.Messages
		if ms[0].Role != "system" || !strings.Contains(ms[0].Content, "bid") {
			t.Errorf("first message %q/%q, want the system briefing", ms[0].Role, ms[0].Content)
		}
		for i := 1; i < len(ms); i++ {
			if want := map[bool]string{true: "user", false: "assistant"}[i%2 == 1]; ms[i].Role != want {
				t.Errorf("message %d of %d has role %q, want %q (roles alternate after the system message)", i, len(ms), ms[i].Role, want)
			}
		}
		if len(ms) == 4 && !strings.Contains(ms[3].Content, "Your reply was rejected") {
			t.Errorf("the retry's last message %q does not give the rejection", ms[3].Content)
		}
		seed, _ := req.Options["seed"].(float64)
		seen[int(seed)] = true
	}
	if len(seen) < 2 {
		t.Errorf("every request had the same sampling seed: %v", seen)
	}
}
