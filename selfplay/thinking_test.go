package selfplay

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/games/sealedbid"
	"github.com/omar-selfplay/omar/inference/llama"
	"github.com/omar-selfplay/omar/llamacpp"
	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/model"
	"github.com/omar-selfplay/omar/werewolf"
)

func TestParseThinking(t *testing.T) {
	tests := []struct {
		in   string
		want Thinking
		err  bool
	}{
		{"", Thinking{}, false},
		{"off", Thinking{Mode: ThinkingOff}, false},
		{"on", Thinking{Mode: ThinkingOn}, false},
		{"budget 256", Thinking{Mode: ThinkingBudget, Budget: 256}, false},
		{"  budget   3 ", Thinking{Mode: ThinkingBudget, Budget: 3}, false},
		{"budget", Thinking{}, true},
		{"budget 0", Thinking{}, true},
		{"budget x", Thinking{}, true},
		{"maybe", Thinking{}, true},
		{"on 3", Thinking{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseThinking(tt.in)
			if (err != nil) != tt.err || got != tt.want {
				t.Errorf("got %+v (err %v), want %+v (error %v)", got, err, tt.want, tt.err)
			}
			if err == nil {
				if err := got.Validate(); err != nil {
					t.Errorf("Validate: %v", err)
				}
			}
		})
	}
	for _, bad := range []Thinking{{Mode: "x"}, {Mode: ThinkingOn, Budget: 3}, {Loss: "x"}, {History: "x"}, {Mode: ThinkingBudget}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v): got nil, want an error", bad)
		}
	}
}

func TestThinkingGrammar(t *testing.T) {
	g := thinkingGrammar("root ::= \"SAY \" [^\\r\\n]+")
	want := "root ::= \"<think>\" think-text \"</think>\\n\\n\" think-move\nthink-text ::= [^<]*\nthink-move ::= \"SAY \" [^<\\r\\n]+"
	if g != want {
		t.Errorf("got %q, want %q", g, want)
	}
	if thinkingGrammar("") != "" {
		t.Error("an empty move grammar must stay empty (free reply)")
	}
}

// setThinking puts th into o's reply settings in their config form.
func setThinking(o *Options, th Thinking) {
	o.Thinking = th.Mode
	if th.Mode == ThinkingBudget {
		o.Thinking = fmt.Sprintf("%s %d", th.Mode, th.Budget)
	}
	o.ThinkingLoss, o.ThinkingHistory = th.Loss, th.History
	if got := o.thinking(); got != th {
		panic(fmt.Sprintf("setThinking: got %+v back, want %+v", got, th))
	}
}

// thinkingModel writes the tiny model with Qwen3's chat template in its
// GGUF metadata and opens it.
func thinkingModel(t testing.TB, parallel int) *llama.Backend {
	t.Helper()
	lib := llamatest.LibDir()
	if lib == "" {
		t.Skip("llama.cpp libraries not installed in lib/llama/cpu (run scripts/install-llama.sh cpu)")
	}
	tmpl, err := os.ReadFile(filepath.Join("..", "chattemplate", "testdata", "qwen3.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	w, err := model.Generate(model.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Set("tokenizer.chat_template", string(tmpl)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "qwen3-template.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	o := llama.Options{}.Defaults()
	o.LibDir, o.Model = lib, path
	o.Parallel, o.Context = parallel, 4096
	o.Threads, o.ThreadsBatch = 1, 1
	o.KVType = llamacpp.KVTypeF32
	b, err := llama.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if got := b.ChatTemplateSource(); !strings.HasPrefix(got, "jinja") {
		t.Fatalf("chat template source %q, want the Jinja engine", got)
	}
	return b
}

// TestThinkingSeatStream plays sealed-bid episodes with the tiny model
// under Qwen3's template in each thinking mode and checks the seat
// streams: what the template renders, what was sampled, what is trained.
func TestThinkingSeatStream(t *testing.T) {
	be := thinkingModel(t, 6)
	tests := []struct {
		name     string
		thinking Thinking
		grammar  bool
	}{
		{"off", Thinking{Mode: ThinkingOff}, true},
		{"off stream history", Thinking{Mode: ThinkingOff, History: HistoryStream}, true},
		{"on grammar", Thinking{Mode: ThinkingOn}, true},
		{"on grammar masked", Thinking{Mode: ThinkingOn, Loss: ThinkingMask}, true},
		{"budget", Thinking{Mode: ThinkingBudget, Budget: 4}, true},
		{"budget free", Thinking{Mode: ThinkingBudget, Budget: 4}, false},
		{"budget fills max_tokens", Thinking{Mode: ThinkingBudget, Budget: 12}, true},
		{"on masked short", Thinking{Mode: ThinkingOn, Loss: ThinkingMask}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{}.Defaults()
			o.Seed, o.Parallel, o.MaxTokens, o.MinReplyTokens, o.Context = 3, 2, 40, 8, 4096
			if strings.HasSuffix(tt.name, "max_tokens") || strings.HasSuffix(tt.name, "short") {
				// No room for the move after the reasoning (budget), or
				// replies cut inside their reasoning (masked).
				o.MaxTokens = 12
			}
			o.Grammar = tt.grammar
			setThinking(&o, tt.thinking)
			o.Params = engine.Params{"rounds": 2}
			r, err := NewRunner(sealedbid.New(), &Player{Label: "tiny", Backend: be, Tokenizer: be}, nil, o)
			if err != nil {
				t.Fatal(err)
			}
			var res []*EpisodeResult
			st, err := r.Run(context.Background(), 0, 2, func(e *EpisodeResult) error { res = append(res, e); return nil })
			if err != nil {
				t.Fatal(err)
			}
			turns := 0
			for _, e := range res {
				for _, tr := range e.Trajectories {
					if err := tr.Validate(); err != nil {
						t.Fatal(err)
					}
					turns += len(tr.TurnEnds)
					checkThinkingStream(t, be, tt.thinking, tt.grammar, tr)
				}
			}
			if strings.HasSuffix(tt.name, "short") {
				// Every reply is cut inside its reasoning, all of it
				// masked: no trained token, so no turn is recorded (a turn
				// must end on a trained token).
				if turns != 0 || st.Turns == 0 {
					t.Fatalf("got %d recorded turns of %d played, want 0 recorded", turns, st.Turns)
				}
				return
			}
			if turns == 0 {
				t.Fatal("no turns")
			}
			switch {
			case tt.thinking.Mode == ThinkingOff && tt.thinking.History == HistoryStream && st.Segments != 0:
				t.Errorf("segments: got %d, want 0 with history stream", st.Segments)
			case tt.thinking.Mode == ThinkingOff && tt.thinking.History == "" && st.Breaks == 0:
				t.Errorf("breaks: got 0, want a new segment whenever the template drops the empty think block")
			}
		})
	}
}

// markup are the texts a thinking reply may hold that start with '<'.
var markup = []string{"<think>", "</think>", "<|im_end|>", "<|endoftext|>"}

// checkThinkingStream checks each turn of tr: its reply runs from the
// turn's first sampled token to its end.
func checkThinkingStream(t *testing.T, be *llama.Backend, th Thinking, grammar bool, tr Trajectory) {
	t.Helper()
	detok := func(ids []int32) string {
		s, err := be.Detokenize(ids)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	start := 0
	for k, end := range tr.TurnEnds {
		first := start
		for first <= end && !tr.Mask[first] {
			first++
		}
		if first > end {
			// Nothing trained in the turn: reasoning masked that never
			// closed.
			if th.Loss != ThinkingMask {
				t.Errorf("segment %d turn %d: no sampled token", tr.Segment, k)
			}
			start = end + 1
			continue
		}
		before, reply := detok(tr.Tokens[:first]), detok(tr.Tokens[first:end+1])
		sampled := 0
		for i := first; i <= end; i++ {
			if tr.Mask[i] {
				sampled++
			}
		}
		where := func() string { return "segment " + itoa(tr.Segment) + " turn " + itoa(k) + ": " }
		if k == 0 && th.reasons() && th.Loss != ThinkingMask && th.History != HistoryStream && strings.Contains(before, "</think>") {
			// A segment starts with the conversation as the template
			// renders it: earlier replies without their reasoning.
			t.Errorf("%sthe segment's prompt holds earlier reasoning: %q", where(), before)
		}
		switch {
		case th.Mode == ThinkingOff:
			if !strings.HasSuffix(before, "<|im_start|>assistant\n<think>\n\n</think>\n\n") {
				t.Errorf("%sthe reply does not follow the empty think block: %q", where(), before[max(0, len(before)-60):])
			}
		case th.Mode == ThinkingOn && th.Loss == ThinkingMask:
			if strings.Contains(reply, "<think>") || !strings.HasSuffix(before, "</think>") {
				t.Errorf("%sthe trained reply %q holds reasoning, or it does not follow </think>", where(), reply)
			}
		case th.Mode == ThinkingOn && grammar:
			if !strings.HasPrefix(reply, "<think>") {
				t.Errorf("%sgot reply %q, want it to open with <think> (grammar)", where(), reply)
			}
		case th.Mode == ThinkingBudget:
			// The turn ends on its last sampled token: what was written
			// for the model may follow it, before the next turn's prompt.
			next := len(tr.Tokens)
			if k+1 < len(tr.TurnEnds) {
				next = tr.TurnEnds[k+1]
			}
			upto := end + 1
			for upto < next && !tr.Mask[upto] {
				upto++
			}
			closing := detok(tr.Tokens[first:upto])
			if !strings.Contains(closing, "</think>\n\n") && !(be.EOG(tr.Tokens[end]) && sampled <= th.Budget) {
				t.Errorf("%sreply %q: the reasoning did not close, nor did the reply end within the budget", where(), reply)
				break
			}
			// Sampled reasoning tokens: those of the first phase, before
			// the tokens written for the model.
			n := 0
			for j := first; j <= end && tr.Mask[j]; j++ {
				n++
			}
			if n > th.Budget {
				t.Errorf("%s%d reasoning tokens sampled, budget %d", where(), n, th.Budget)
			}
		}
		if grammar && th.Mode != "" {
			rest := reply
			for _, m := range markup {
				rest = strings.ReplaceAll(rest, m, "")
			}
			// A reply cut at max_tokens may end inside </think>.
			if i := strings.LastIndex(rest, "<"); i >= 0 && strings.HasPrefix("</think>", rest[i:]) && !be.EOG(tr.Tokens[end]) {
				rest = rest[:i]
			}
			if strings.Contains(rest, "<") {
				t.Errorf("%sa grammar-constrained reply holds markup: %q", where(), reply)
			}
		}
		start = end + 1
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// BenchmarkThinkingHistory plays Werewolf episodes (6 seats, the default
// rules: a conversation of 15-30 turns a seat) with the tiny model under
// Qwen3's template and thinking off — every reply's empty think block is
// dropped by the template from the next rendering — and compares the two
// histories: "template" (a new segment, re-rendered, whenever the
// rendering no longer extends the stream) and "stream" (one append-only
// stream; replies kept as sampled). Reported per episode: tokens decoded
// by llama_decode (prefill and generation), segments, and tokens in the
// seat streams (what training scores).
func BenchmarkThinkingHistory(b *testing.B) {
	be := thinkingModel(b, 6)
	for _, history := range []string{HistoryTemplate, HistoryStream} {
		b.Run("history="+history, func(b *testing.B) {
			o := Options{}.Defaults()
			o.Seed, o.Parallel, o.MaxTokens, o.MinReplyTokens, o.Context = 5, 1, 32, 8, 4096
			setThinking(&o, Thinking{Mode: ThinkingOff, History: history})
			r, err := NewRunner(werewolf.New(), &Player{Label: "tiny", Backend: be, Tokenizer: be}, nil, o)
			if err != nil {
				b.Fatal(err)
			}
			var episodes, segments, streamTokens, turns int64
			before := be.Stats()
			first := 0
			for b.Loop() {
				st, err := r.Run(context.Background(), first, 1, func(e *EpisodeResult) error {
					for _, tr := range e.Trajectories {
						streamTokens += int64(len(tr.Tokens))
					}
					segments += int64(len(e.Trajectories))
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				turns += st.Turns
				first++
				episodes++
			}
			after := be.Stats()
			ep := float64(episodes)
			b.ReportMetric(float64(after.DecodedTokens-before.DecodedTokens)/ep, "decoded/episode")
			b.ReportMetric(float64(segments)/ep, "segments/episode")
			b.ReportMetric(float64(streamTokens)/ep, "stream_tokens/episode")
			b.ReportMetric(float64(turns)/ep, "turns/episode")
		})
	}
}

// TestThinkingBudgetDeterministic plays the same sealed-bid episodes
// (a simultaneous move: every bidder is asked at once) twice under a
// reasoning budget, whose second request per turn is sent when the first
// returns, and requires the same tokens.
func TestThinkingBudgetDeterministic(t *testing.T) {
	be := thinkingModel(t, 6)
	run := func() []string {
		o := Options{}.Defaults()
		o.Seed, o.Parallel, o.MaxTokens, o.MinReplyTokens, o.Context = 11, 2, 40, 8, 4096
		setThinking(&o, Thinking{Mode: ThinkingBudget, Budget: 6})
		o.Params = engine.Params{"rounds": 2}
		r, err := NewRunner(sealedbid.New(), &Player{Label: "tiny", Backend: be, Tokenizer: be}, nil, o)
		if err != nil {
			t.Fatal(err)
		}
		out := map[int][]string{}
		if _, err := r.Run(context.Background(), 0, 2, func(e *EpisodeResult) error {
			for _, tr := range e.Trajectories {
				out[e.Index] = append(out[e.Index], fmt.Sprint(tr.Seat, tr.Segment, tr.Tokens, tr.Mask))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return append(out[0], out[1]...)
	}
	a, b := run(), run()
	if len(a) == 0 || !slices.Equal(a, b) {
		t.Errorf("two runs of the same seed differ:\n%v\n%v", a, b)
	}
}
