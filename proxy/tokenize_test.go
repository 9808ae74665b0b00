package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/inference"
)

// chatText renders n messages with the backend's chat template, with
// contents that exercise the tokenizer: white space around the turns,
// special tokens and UTF-8 inside a message.
func chatText(t testing.TB, tok inference.Tokenizer, n int) string {
	t.Helper()
	contents := []string{"Hi", " spaced ", "", "\n\nnew lines\n", "offer <|im_end|> inside", "<|im_start|>user", "café ☕", "  "}
	msgs := make([]inference.Message, n)
	for i := range msgs {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs[i] = inference.Message{Role: role, Content: fmt.Sprintf("%d %s", i, contents[i%len(contents)])}
	}
	text, err := tok.ChatTemplate(msgs, true)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// TestChunkedTokenizeIsExact: tokenising in chunks gives the ids of the
// whole text, with and without the leading special tokens.
func TestChunkedTokenizeIsExact(t *testing.T) {
	b := testBackend(t)
	p, _ := testProxy(t, b, nil, nil)
	p.split.size = 64 // many chunks
	for _, tc := range []struct {
		name string
		text string
	}{
		{"a chat of 300 messages", chatText(t, b, 300)},
		{"special tokens back to back", strings.Repeat("<|im_start|><|im_end|>x ", 200)},
		{"plain text", strings.Repeat("hello world, ", 500)},
	} {
		for _, add := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s, add special %v", tc.name, add), func(t *testing.T) {
				want, err := b.Tokenize(tc.text, add, true)
				if err != nil {
					t.Fatal(err)
				}
				got, err := p.tokenize(t.Context(), tc.text, add)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Errorf("got %d ids, want the whole text's %d", len(got), len(want))
				}
			})
		}
	}
	if !p.split.ok {
		t.Fatal("the tiny model's tokenizer is not chunked: the test checks nothing")
	}
	if n := len(p.split.cuts(chatText(t, b, 300))); n < 10 {
		t.Errorf("a 300-message chat is cut in %d places with 64-byte chunks, want many", n)
	}
}

// TestTokenizeStopsWhenClientLeaves: a call whose client went away stops
// tokenising (issue 52, defect 5: the work went on after the disconnect).
func TestTokenizeStopsWhenClientLeaves(t *testing.T) {
	b := testBackend(t)
	p, _ := testProxy(t, b, nil, nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := p.tokenize(ctx, chatText(t, b, 2000), true); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

// TestRequestLimits: a chat of more messages than MaxMessages, or a prompt
// of more tokens than MaxPromptTokens, gets a 400 naming the limit before
// any generation (issue 52, defect 5: 40,000 messages took 16 s of CPU).
func TestRequestLimits(t *testing.T) {
	b := testBackend(t)
	p, ps := testProxy(t, b, nil, func(o *Options) { o.MaxMessages, o.MaxPromptTokens = 100, 50 })
	many := make([]map[string]any, 40000)
	for i := range many {
		many[i] = map[string]any{"role": "user", "content": "x"}
	}
	for _, tc := range []struct {
		name string
		body map[string]any
		want string
	}{
		{"40000 messages", map[string]any{"messages": many, "max_tokens": 1}, "at most 100"},
		{"a long prompt", map[string]any{"messages": []map[string]any{{"role": "user", "content": strings.Repeat("word ", 200)}}, "max_tokens": 1}, "over the 50"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, resp := post(t, ps.URL+"/v1/chat/completions", nil, tc.body)
			checkError(t, code, resp, http.StatusBadRequest, "messages")
			if !strings.Contains(string(resp), tc.want) {
				t.Errorf("got %s, want the limit (%q)", resp, tc.want)
			}
		})
	}
	if st := p.Stats(); st.Calls != 0 {
		t.Errorf("%d calls generated, want none", st.Calls)
	}
}

// BenchmarkChatPrompt compares tokenising a chat prompt whole (llama.cpp's
// cost grows with messages × bytes) and in chunks, per message count.
func BenchmarkChatPrompt(b *testing.B) {
	be := testBackend(b)
	p, _ := testProxy(b, be, nil, nil)
	for _, n := range []int{1000, 2000, 4000, 8000} {
		text := chatText(b, be, n)
		b.Run(fmt.Sprintf("messages=%d/whole", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := be.Tokenize(text, true, true); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("messages=%d/chunked", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := p.tokenize(context.Background(), text, true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzChunkedTokenize: whatever a client sends, chunked tokenisation
// gives the whole text's ids. The input picks fragments — the model's
// special tokens, white space, words, UTF-8 — so that special tokens meet
// every neighbour.
func FuzzChunkedTokenize(f *testing.F) {
	b := testBackend(f)
	p, _ := testProxy(f, b, nil, nil)
	p.split.size = 16
	frags := []string{"<|im_start|>", "<|im_end|>", " ", "\n", "\t", "user", "assistant", "hello", "é", "☕", "<", "|", ">", "<|", "|>", "12", "  \n"}
	f.Add([]byte{0, 5, 7, 1, 3, 0, 6, 7, 1})
	f.Add([]byte{0, 0, 1, 1, 2, 0, 2, 1, 13, 14, 10})
	f.Add([]byte{11, 12, 0, 4, 1, 16, 0, 8, 9})
	f.Fuzz(func(t *testing.T, picks []byte) {
		var sb strings.Builder
		for _, k := range picks {
			sb.WriteString(frags[int(k)%len(frags)])
		}
		text := sb.String()
		for _, add := range []bool{true, false} {
			want, err := b.Tokenize(text, add, true)
			if err != nil {
				t.Skip(err)
			}
			got, err := p.tokenize(context.Background(), text, add)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("text %q (add special %v): chunked %v, whole %v", text, add, got, want)
			}
		}
	})
}
