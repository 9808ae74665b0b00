package players

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want Spec
		err  string
	}{
		{"policy", Spec{Kind: KindPolicy}, ""},
		{"frozen", Spec{Kind: KindFrozen}, ""},
		{"base", Spec{Kind: KindBase}, ""},
		{" adapter:runs/x/adapter.gguf ", Spec{Kind: KindAdapter, Arg: "runs/x/adapter.gguf"}, ""},
		{"model:other.gguf", Spec{Kind: KindModel, Arg: "other.gguf"}, ""},
		{"scripted:naive", Spec{Kind: KindScripted, Arg: "naive"}, ""},
		{"scripted", Spec{Kind: KindScripted, Arg: "scripted"}, ""},
		{"ollama:qwen3:4b", Spec{Kind: KindOllama, Arg: "qwen3:4b"}, ""},
		{"adapter:", Spec{}, "needs a path"},
		{"model:", Spec{}, "needs a path"},
		{"ollama:", Spec{}, "needs a name"},
		{"scripted:", Spec{}, "needs a name"},
		{"policy:x", Spec{}, "takes no argument"},
		{"gpt", Spec{}, "want policy, frozen, base"},
		{"", Spec{}, "want policy"},
		{"lora:x", Spec{}, "unknown kind"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Parse(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tt.want)
			}
			if s := got.String(); s != strings.TrimSpace(tt.in) {
				t.Errorf("String() = %q, want %q", s, strings.TrimSpace(tt.in))
			}
		})
	}
	got, err := ParseList("base, adapter:a.gguf,,scripted:naive")
	if err != nil || len(got) != 3 || got[1].String() != "adapter:a.gguf" {
		t.Errorf("ParseList: %v, %v", got, err)
	}
	if !NeedsModel(got) || NeedsModel([]Spec{{Kind: KindScripted, Arg: "naive"}, {Kind: KindModel, Arg: "m"}}) {
		t.Errorf("NeedsModel: base needs the base model, model: and scripted: do not")
	}
}

// FuzzParse: a spec that parses prints back to a spec that parses to the
// same.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"policy", "base", "adapter:x.gguf", "model:m", "scripted:naive", "scripted", "ollama:a:b", "x:", ":", "scripted:scripted:x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sp, err := Parse(s)
		if err != nil {
			return
		}
		again, err := Parse(sp.String())
		if err != nil || again != sp {
			t.Errorf("%q → %+v → %q → %+v, %v", s, sp, sp.String(), again, err)
		}
	})
}

// TestPlayer: Agent, KindOf and Validate of scripted and model players.
func TestPlayer(t *testing.T) {
	if a := Scripted("naive").Agent(); a != "scripted:naive" {
		t.Errorf("Scripted(naive).Agent() = %q", a)
	}
	if a := Scripted("scripted").Agent(); a != "scripted" {
		t.Errorf("Scripted(scripted).Agent() = %q", a)
	}
	if err := (Player{Name: "x"}).Validate(); err == nil || !strings.Contains(err.Error(), "exactly one") {
		t.Errorf("a player with neither a model nor a script: %v", err)
	}
	if k := (Player{Name: "x", Scripted: "naive"}).KindOf(); k != KindScripted {
		t.Errorf("KindOf = %q", k)
	}
}
