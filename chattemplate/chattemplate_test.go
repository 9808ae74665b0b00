package chattemplate

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// TestGolden renders the real templates over a fixed set of conversations
// and compares with testdata/golden/<template>.txt (go test -update
// rewrites them).
func TestGolden(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			tm := f.template(t)
			var b strings.Builder
			for i, c := range conversations(f, 7, 12) {
				fmt.Fprintf(&b, "=== case %d: %v\n", i, c)
				out, err := tm.Render(c.msgs, c.opts)
				if err != nil {
					fmt.Fprintf(&b, "error: %v\n", err)
					continue
				}
				b.WriteString(out)
				b.WriteString("\n")
			}
			path := filepath.Join("testdata", "golden", f.name+".txt")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if got := b.String(); got != string(want) {
				t.Errorf("rendering differs from %s (go test -update rewrites it):\ngot  %q\nwant %q", path, got, want)
			}
		})
	}
}

func TestQwen3Thinking(t *testing.T) {
	tm := families[0].template(t)
	msgs := []Message{
		{Role: "system", Content: "S"},
		{Role: "user", Content: "U1"},
		{Role: "assistant", Content: "<think>\nold reasoning\n</think>\n\nA1"},
		{Role: "user", Content: "U2"},
	}
	tests := []struct {
		name     string
		thinking *bool
		want     string
	}{
		{"undefined", nil, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nU2<|im_end|>\n<|im_start|>assistant\n"},
		{"on", ptr(true), "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nU2<|im_end|>\n<|im_start|>assistant\n"},
		{"off", ptr(false), "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nU2<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tm.Render(msgs, Options{AddGenerationPrompt: true, EnableThinking: tt.thinking})
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestBuiltins(t *testing.T) {
	now := time.Date(2026, 12, 7, 15, 4, 5, 0, time.UTC)
	tests := []struct {
		name, src string
		want      string
		err       string
	}{
		// Python's str.strip(chars) strips only chars (the reference
		// JavaScript engine strips all whitespace; see parity_test.go).
		{"strip chars", `{{ "  x \n".strip('\n') }}|{{ "\n y ".lstrip('\n') }}|{{ " z\n".rstrip('\n') }}`, "  x | y | z", ""},
		{"strip", `{{ " x\n".strip() }}`, "x", ""},
		{"split last", `{{ "a</think>b</think>c".split('</think>')[-1] }}`, "c", ""},
		{"startswith endswith", `{{ "abc".startswith("a") and "abc".endswith("c") }}`, "True", ""},
		{"namespace loop", `{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + loop.index0 %}{% if loop.last %}{{ ns.n }}{% endif %}{% endfor %}`, "3", ""},
		{"tojson", `{{ {"a": "é\""} | tojson }}`, `{"a": "é\""}`, ""},
		{"strftime_now", `{{ strftime_now("%d %b %Y") }} {{ strftime_now("%-d %B") }}`, "07 Dec 2026 7 December", ""},
		{"raise_exception", `{{ raise_exception("roles must alternate") }}`, "", "roles must alternate"},
		{"content is string", `{{ messages[0].content is string }}`, "True", ""},
	}
	msgs := []Message{{Role: "user", Content: "a"}, {Role: "assistant", Content: "b"}, {Role: "user", Content: "c"}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tm, err := Parse(tt.src)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tm.Render(msgs, Options{Now: now})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrTemplate) {
					t.Fatalf("got error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, src := range []string{"", "   ", "{% for x in %}", "{{ unclosed"} {
		if _, err := Parse(src); err == nil || !errors.Is(err, ErrTemplate) {
			t.Errorf("Parse(%q): got error %v, want an ErrTemplate", src, err)
		}
	}
}

func TestSplitThinking(t *testing.T) {
	tests := []struct {
		reply, reasoning, answer string
		closed                   bool
	}{
		{"ACCEPT", "", "ACCEPT", false},
		{"<think>\nhmm\n</think>\n\nACCEPT", "hmm", "ACCEPT", true},
		{"<think>\n\n</think>\n\nSAY hi", "", "SAY hi", true},
		{"no open tag</think>WALK", "no open tag", "WALK", true},
		{"<think>a</think>b</think>\nc", "a</think>b", "c", true},
		{"<think>unfinished", "", "<think>unfinished", false},
	}
	for _, tt := range tests {
		t.Run(tt.reply, func(t *testing.T) {
			r, a, c := SplitThinking(tt.reply)
			if r != tt.reasoning || a != tt.answer || c != tt.closed {
				t.Errorf("got (%q, %q, %v), want (%q, %q, %v)", r, a, c, tt.reasoning, tt.answer, tt.closed)
			}
		})
	}
}

func FuzzSplitThinking(f *testing.F) {
	for _, s := range []string{"ACCEPT", "<think>\nx\n</think>\n\nA", "</think>", "<think></think></think>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, reply string) {
		r, a, closed := SplitThinking(reply)
		if !closed {
			if a != reply || r != "" {
				t.Fatalf("no </think>: got (%q, %q), want the reply whole", r, a)
			}
			return
		}
		if strings.Contains(a, ThinkClose) {
			t.Fatalf("answer %q holds %s", a, ThinkClose)
		}
		if !strings.HasSuffix(reply, a) || len(r)+len(a) > len(reply) {
			t.Fatalf("got (%q, %q) from %q", r, a, reply)
		}
	})
}

// FuzzRender renders the real templates over message contents from the
// fuzzer (what a proxy client or a model writes): rendering never panics,
// a template that does not refuse the conversation holds each content
// (Llama 3 and Gemma 3 trim it), and Qwen3's rendering keeps the answer
// of the last reply.
func FuzzRender(f *testing.F) {
	for _, s := range []string{"hello", "", "<think>\nx\n</think>\n\nA", "{{ x }}", "{% if %}", "\x00\xff", "</think>"} {
		f.Add(s, s)
	}
	tms := make([]*Template, len(families))
	for i, fam := range families {
		tms[i] = fam.template(f)
	}
	f.Fuzz(func(t *testing.T, user, reply string) {
		msgs := []Message{{Role: "system", Content: "S"}, {Role: "user", Content: user}, {Role: "assistant", Content: reply}, {Role: "user", Content: "next"}}
		for i, tm := range tms {
			out, err := tm.Render(msgs, Options{AddGenerationPrompt: true, BOS: families[i].bos, EOS: families[i].eos})
			if err != nil {
				t.Fatalf("%s: %v", families[i].name, err)
			}
			if !strings.Contains(out, strings.TrimSpace(user)) {
				t.Fatalf("%s: the rendering %q lacks the user's content %q", families[i].name, out, user)
			}
			if families[i].name == "qwen3" {
				_, answer, _ := SplitThinking(reply)
				if !strings.Contains(out, answer) {
					t.Fatalf("qwen3: the rendering %q lacks the reply's answer %q", out, answer)
				}
			}
		}
	})
}
