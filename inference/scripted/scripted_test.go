package scripted

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/model"
)

func newBackend(t testing.TB, rule Rule) *Backend {
	t.Helper()
	b, err := New(Options{Rule: rule})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func constant(s string) Rule { return func(inference.Request) string { return s } }

type stopCase struct {
	name     string
	reply    string
	req      inference.Request
	wantText string
	wantStop inference.StopReason
	wantEOT  bool // last token is <|im_end|>
}

func TestGenerateStops(t *testing.T) {
	tests := []stopCase{
		{"plain", "I offer 120 dollars.", inference.Request{}, "I offer 120 dollars.", inference.StopEOG, true},
		{"empty", "", inference.Request{}, "", inference.StopEOG, true},
		{"stop string", "VOTE: Carol\nbecause she lied", inference.Request{Stop: []string{"\n"}}, "VOTE: Carol\n", inference.StopString, false},
		{"stop not found", "hello", inference.Request{Stop: []string{"zzz"}}, "hello", inference.StopEOG, true},
	}
	// MaxTokens cases depend on how the vocabulary splits the reply.
	tok, _ := model.NewModelTokenizer(512)
	long := "one two three four five six"
	ids := tok.Encode(long, false)
	prefix, _ := tok.Decode(ids[:3])
	tests = append(tests,
		stopCase{"max tokens", long, inference.Request{MaxTokens: 3}, prefix, inference.StopLength, false},
		stopCase{"max tokens reaches EOT", long, inference.Request{MaxTokens: len(ids) + 1}, long, inference.StopEOG, true},
	)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBackend(t, constant(tt.reply))
			resp, err := b.Generate(context.Background(), []inference.Request{tt.req})
			if err != nil {
				t.Fatal(err)
			}
			r := resp[0]
			if r.Text != tt.wantText || r.Stop != tt.wantStop {
				t.Errorf("got %q (%s), want %q (%s)", r.Text, r.Stop, tt.wantText, tt.wantStop)
			}
			if got := len(r.Tokens) > 0 && r.Tokens[len(r.Tokens)-1] == b.tok.EOT; got != tt.wantEOT {
				t.Errorf("ends with <|im_end|>: got %v, want %v (tokens %v)", got, tt.wantEOT, r.Tokens)
			}
			if len(r.Logprobs) != len(r.Tokens) || len(r.RawLogprobs) != len(r.Tokens) {
				t.Errorf("logprobs: %d/%d for %d tokens", len(r.Logprobs), len(r.RawLogprobs), len(r.Tokens))
			}
			for _, lp := range r.Logprobs {
				if lp != 0 {
					t.Errorf("logprob %v, want 0", lp)
				}
			}
			// Tokens decode to the text (plus the end-of-turn marker).
			dec, _ := b.Detokenize(r.Tokens)
			if want := r.Text + map[bool]string{true: model.IMEnd}[tt.wantEOT]; dec != want {
				t.Errorf("tokens decode to %q, want %q", dec, want)
			}
		})
	}
}

func TestStopTokens(t *testing.T) {
	b := newBackend(t, constant("yes, deal"))
	comma := b.tok.Encode(",", false)[0]
	resp, err := b.Generate(context.Background(), []inference.Request{{StopTokens: []int32{comma}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := resp[0]; r.Text != "yes," || r.Stop != inference.StopString || r.Tokens[len(r.Tokens)-1] != comma {
		t.Errorf("got %q %s %v, want \"yes,\" stop ending with %d", r.Text, r.Stop, r.Tokens, comma)
	}
}

func TestRuleSeesMessages(t *testing.T) {
	var mu sync.Mutex
	var seen [][]inference.Message
	b := newBackend(t, func(req inference.Request) string {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, req.Messages)
		return "ok"
	})
	msgs := []inference.Message{{Role: "system", Content: "You are Alice."}, {Role: "user", Content: "Your move?\nChoose."}}
	prompt, _ := b.ChatTemplate(msgs, true)
	ids, _ := b.Tokenize(prompt, false, true)
	if _, err := b.Generate(context.Background(), []inference.Request{{Prompt: ids}, {Messages: msgs[:1]}}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(seen[0], msgs) || !reflect.DeepEqual(seen[1], msgs[:1]) {
		t.Errorf("rule saw %+v, want %+v and %+v", seen, msgs, msgs[:1])
	}
}

func TestTokenizerInterface(t *testing.T) {
	b := newBackend(t, constant(""))
	text := "<|im_start|>user\nHéllo, 42 wörld!<|im_end|>\n"
	ids, _ := b.Tokenize(text, true, true)
	if back, _ := b.Detokenize(ids); back != text {
		t.Errorf("round trip: got %q, want %q", back, text)
	}
	if !b.EOG(b.tok.ID(model.IMEnd)) || !b.EOG(b.tok.ID(model.EndOfText)) || b.EOG(ids[1]) {
		t.Error("EOG: want true for <|im_end|> and <|endoftext|>, false for ordinary tokens")
	}
	got, _ := b.ChatTemplate([]inference.Message{{Role: "user", Content: "Hi"}}, true)
	if want := "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"; got != want {
		t.Errorf("ChatTemplate: got %q, want %q", got, want)
	}
}

func TestConcurrentAndClose(t *testing.T) {
	b := newBackend(t, func(req inference.Request) string { return "reply to " + req.Key })
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := strings.Repeat("k", i+1)
			resp, err := b.Generate(context.Background(), []inference.Request{{Key: key}})
			if err != nil || resp[0].Text != "reply to "+key {
				t.Errorf("got %+v, %v", resp, err)
			}
		}()
	}
	wg.Wait()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Generate(ctx, []inference.Request{{}}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: got %v", err)
	}
	b.Close()
	if _, err := b.Generate(context.Background(), []inference.Request{{}}); !errors.Is(err, ErrClosed) {
		t.Errorf("closed: got %v, want ErrClosed", err)
	}
	if _, err := New(Options{}); err == nil {
		t.Error("New without a rule: got nil error")
	}
}

func TestParseChatML(t *testing.T) {
	tests := []struct {
		in   string
		want []inference.Message
	}{
		{"", nil},
		{"preamble <|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", []inference.Message{{Role: "user", Content: "hi"}}},
		{"<|im_start|>system<|im_end|>", []inference.Message{{Role: "system", Content: ""}}},
		{"<|im_start|>user\na\nb<|im_end|><|im_start|>assistant\nc<|im_end|>", []inference.Message{{Role: "user", Content: "a\nb"}, {Role: "assistant", Content: "c"}}},
		{"<|im_end|><|im_start|>", nil},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := ParseChatML(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func FuzzParseChatML(f *testing.F) {
	f.Add("user", "hello", "")
	f.Add("system", "a\nb", "<|im_start|>x")
	f.Fuzz(func(t *testing.T, role, content, junk string) {
		ParseChatML(junk) // never panics
		if strings.Contains(role+content, "<|im_") || strings.Contains(role, "\n") {
			return
		}
		msgs := []inference.Message{{Role: role, Content: content}}
		if got := ParseChatML(RenderChatML(msgs, true)); !reflect.DeepEqual(got, msgs) {
			t.Errorf("got %+v, want %+v", got, msgs)
		}
	})
}

func BenchmarkGenerate(b *testing.B) {
	be := newBackend(b, constant("I propose that you take the books and I take the hats."))
	reqs := make([]inference.Request, 32)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := be.Generate(context.Background(), reqs); err != nil {
			b.Fatal(err)
		}
	}
}
