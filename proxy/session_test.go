package proxy

import (
	"slices"
	"strings"
	"testing"
)

// byteTokens tokenises text one byte per token, with "<e>" and "<x>" as
// special tokens 256 and 257: enough to see which ids a stream keeps.
func byteTokens(text string, _ bool) ([]int32, error) {
	var out []int32
	for len(text) > 0 {
		switch {
		case strings.HasPrefix(text, "<e>"):
			out, text = append(out, 256), text[3:]
		case strings.HasPrefix(text, "<x>"):
			out, text = append(out, 257), text[3:]
		default:
			out, text = append(out, int32(text[0])), text[1:]
		}
	}
	return out, nil
}

// TestExtend checks which prompts extend a session's stream: the client
// renders its history with its own template, so the stream's reply must
// be recognised whatever end-of-turn token or stop string ended it.
func TestExtend(t *testing.T) {
	type reply struct {
		tokens        []int32
		content, tail string
	}
	tests := []struct {
		name string
		// first call: prompt text and reply
		prompt string
		reply  reply
		// second call's rendered prompt
		next      string
		wantSeg   int
		wantFresh []int32 // the ids the second call appends
	}{
		{"the reply ended on the template's end-of-turn", "U:hi\nA:", reply{[]int32{'o', 'k', 256}, "ok", "<e>"},
			"U:hi\nA:ok<e>\nU:go\nA:", 0, []int32{'\n', 'U', ':', 'g', 'o', '\n', 'A', ':'}},
		{"another end-of-turn token: the template's follows the model's", "U:hi\nA:", reply{[]int32{'o', 'k', 257}, "ok", "<x>"},
			"U:hi\nA:ok<e>\nU:go\nA:", 0, []int32{256, '\n', 'U', ':', 'g', 'o', '\n', 'A', ':'}},
		{"a stop string cut from the content stays in the stream", "U:hi\nA:", reply{[]int32{'o', 'k', 'S', 'T'}, "ok", "ST"},
			"U:hi\nA:ok<e>U:", 0, []int32{256, 'U', ':'}},
		{"cut by max_tokens", "U:hi\nA:", reply{[]int32{'o', 'k'}, "ok", ""},
			"U:hi\nA:ok<e>U:", 0, []int32{256, 'U', ':'}},
		{"the client changed its history", "U:hi\nA:", reply{[]int32{'o', 'k', 256}, "ok", "<e>"},
			"U:hey\nA:ok<e>", 1, nil},
		{"the client changed the reply", "U:hi\nA:", reply{[]int32{'o', 'k', 256}, "ok", "<e>"},
			"U:hi\nA:OK<e>U:", 1, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSession("k")
			prompt, seg, fresh, err := s.extend(tc.prompt, nil, false, byteTokens)
			if err != nil || seg != 0 || fresh != len(prompt) {
				t.Fatalf("first call: segment %d, %d fresh of %d, %v", seg, fresh, len(prompt), err)
			}
			n := len(tc.reply.tokens)
			s.record(Call{Prompt: prompt, Tokens: tc.reply.tokens, Logprobs: make([]float32, n), RawLogprobs: make([]float32, n)}, seg, tc.prompt, false, tc.reply.content, tc.reply.tail)
			stream := slices.Concat(prompt, tc.reply.tokens)
			got, seg, fresh, err := s.extend(tc.next, nil, false, byteTokens)
			if err != nil {
				t.Fatal(err)
			}
			if seg != tc.wantSeg {
				t.Fatalf("segment %d, want %d", seg, tc.wantSeg)
			}
			if seg == 0 {
				if !slices.Equal(got[:len(stream)], stream) {
					t.Errorf("prompt %v does not start with the stream %v", got, stream)
				}
				if !slices.Equal(got[len(stream):], tc.wantFresh) || fresh != len(tc.wantFresh) {
					t.Errorf("appended %v (%d fresh), want %v", got[len(stream):], fresh, tc.wantFresh)
				}
				return
			}
			want, _ := byteTokens(tc.next, true)
			if !slices.Equal(got, want) || fresh != len(want) {
				t.Errorf("a new segment's prompt %v (%d fresh), want %v", got, fresh, want)
			}
		})
	}
}

// TestExtendTokens checks token-id prompts: they extend the stream when
// they start with its ids.
func TestExtendTokens(t *testing.T) {
	s := newSession("k")
	first := []int32{1, 2, 3}
	prompt, _, _, _ := s.extend("", first, true, byteTokens)
	s.record(Call{Prompt: prompt, Tokens: []int32{4, 5}, Logprobs: []float32{-1, -2}, RawLogprobs: []float32{-1, -2}}, 0, "", true, "", "")
	tests := []struct {
		name    string
		ids     []int32
		wantSeg int
	}{
		{"the stream and more", []int32{1, 2, 3, 4, 5, 6}, 0},
		{"the stream without its reply", []int32{1, 2, 3, 6}, 1},
		{"only the stream", []int32{1, 2, 3, 4, 5}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, seg, _, err := s.extend("", tc.ids, true, byteTokens)
			if err != nil || seg != tc.wantSeg {
				t.Errorf("segment %d (%v), want %d", seg, err, tc.wantSeg)
			}
		})
	}
	// A text prompt after token prompts cannot use the text: the tokens
	// decide.
	if _, seg, _, _ := s.extend("\x01\x02\x03\x04\x05x", nil, false, byteTokens); seg != 0 {
		t.Errorf("a text prompt whose ids extend the stream: segment %d, want 0", seg)
	}
}
