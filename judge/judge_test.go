package judge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/sotopia"
)

// fakeBackend records requests and replies with a fixed text; with tok
// set it is also a Tokenizer (one token per byte).
type fakeBackend struct {
	reply string
	err   error
	got   []inference.Request
}

func (f *fakeBackend) Generate(_ context.Context, reqs []inference.Request) ([]inference.Response, error) {
	f.got = append(f.got, reqs...)
	if f.err != nil {
		return nil, f.err
	}
	return []inference.Response{{Text: f.reply}}, nil
}
func (f *fakeBackend) Close() error { return nil }

type fakeTokenizer struct{ fakeBackend }

func (f *fakeTokenizer) Tokenize(text string, _, _ bool) ([]int32, error) {
	ids := make([]int32, len(text))
	for i := range text {
		ids[i] = int32(text[i])
	}
	return ids, nil
}
func (f *fakeTokenizer) Detokenize(t []int32) (string, error) { return "", nil }
func (f *fakeTokenizer) ChatTemplate(msgs []inference.Message, add bool) (string, error) {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "<%s>%s", m.Role, m.Content)
	}
	return b.String() + "<assistant>", nil
}
func (f *fakeTokenizer) EOG(int32) bool { return false }

func TestCompleter(t *testing.T) {
	c := sotopia.Completion{System: "sys", Prompt: "judge this", Grammar: "root ::= \"x\"", MaxTokens: 9, Temperature: 0, Seed: 0xab}
	t.Run("messages", func(t *testing.T) {
		b := &fakeBackend{reply: "x"}
		got, err := New(b).Complete(context.Background(), c)
		if err != nil || got != "x" {
			t.Fatalf("got %q, %v; want x", got, err)
		}
		r := b.got[0]
		if len(r.Messages) != 2 || r.Messages[1].Content != "judge this" || r.Prompt != nil || r.Grammar != c.Grammar ||
			r.MaxTokens != 9 || r.Sampling.Seed != 0xab || !strings.HasPrefix(r.Key, "judge/ab/") {
			t.Errorf("got request %+v", r)
		}
	})
	t.Run("keys", func(t *testing.T) {
		// Same seed, other episode (prompt): another sequence; the same
		// completion again: the same one.
		other := c
		other.Prompt = "judge that"
		k1, k2, k3 := completionKey("judge", c), completionKey("judge", other), completionKey("judge", c)
		if k1 == k2 || k1 != k3 {
			t.Errorf("keys %q, %q, %q: want distinct for other prompts and stable for the same one", k1, k2, k3)
		}
	})
	t.Run("tokens", func(t *testing.T) {
		b := &fakeTokenizer{fakeBackend{reply: "x"}}
		if _, err := New(b).Complete(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		if got, want := len(b.got[0].Prompt), len("<system>sys<user>judge this<assistant>"); got != want {
			t.Errorf("got %d prompt tokens, want %d", got, want)
		}
	})
	t.Run("context full is an invalid judgement, not a failure", func(t *testing.T) {
		j, err := NewJudge(&fakeBackend{err: fmt.Errorf("llama: %w", inference.ErrContextFull)}, sotopia.JudgeOptions{}.Defaults())
		if err != nil {
			t.Fatal(err)
		}
		_, err = j.Evaluate(context.Background(), sotopia.History{Setup: sotopia.Setup{Characters: [2]sotopia.Character{{Name: "A"}, {Name: "B"}}, Scenario: sotopia.Scenario{Agents: []sotopia.AgentSpec{{}, {}}}}})
		if !errors.Is(err, sotopia.ErrInvalidJudgement) || !errors.Is(err, inference.ErrContextFull) {
			t.Errorf("got %v, want an invalid judgement after 1 attempt", err)
		}
	})
}
