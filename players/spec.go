package players

import (
	"fmt"
	"strings"

	"github.com/omar-selfplay/omar/engine"
)

// Spec kinds.
const (
	KindPolicy   = "policy"   // the run's trained model
	KindFrozen   = "frozen"   // the run's frozen opponent
	KindBase     = "base"     // the base model, no adapter
	KindAdapter  = "adapter"  // adapter:PATH — a LoRA on the base model
	KindModel    = "model"    // model:PATH — another GGUF
	KindScripted = "scripted" // scripted:NAME — a scripted policy of the games
	KindOllama   = "ollama"   // ollama:NAME — a model served by Ollama
)

// kinds lists the kinds in the order errors name them.
var kinds = []string{KindPolicy, KindFrozen, KindBase, KindAdapter, KindModel, KindScripted, KindOllama}

// Spec is an agent as a command line or config names it.
type Spec struct {
	Kind string
	// Arg is the path (adapter, model), the policy name (scripted: each
	// game's default script is "scripted") or the Ollama model; empty for
	// policy, frozen and base.
	Arg string
}

// bare reports whether kind is written without an argument.
func bare(kind string) bool { return kind == KindPolicy || kind == KindFrozen || kind == KindBase }

// String is the spec as written; it is the player's name.
func (s Spec) String() string {
	switch {
	case bare(s.Kind):
		return s.Kind
	case s.Kind == KindScripted:
		if s.Arg == KindScripted {
			return KindScripted
		}
		return engine.ScriptedPrefix + s.Arg
	}
	return s.Kind + ":" + s.Arg
}

// Parse reads one spec.
func Parse(text string) (Spec, error) {
	text = strings.TrimSpace(text)
	if bare(text) {
		return Spec{Kind: text}, nil
	}
	if engine.IsScripted(text) {
		if text == KindScripted {
			return Spec{Kind: KindScripted, Arg: KindScripted}, nil
		}
		if name := engine.ScriptedName(text); name != "" {
			return Spec{Kind: KindScripted, Arg: name}, nil
		}
		return Spec{}, fmt.Errorf("player %q: scripted: needs a name", text)
	}
	kind, arg, ok := strings.Cut(text, ":")
	switch {
	case !ok:
		return Spec{}, fmt.Errorf("player %q: want %s", text, grammar)
	case bare(kind):
		return Spec{}, fmt.Errorf("player %q: %s takes no argument", text, kind)
	case kind != KindAdapter && kind != KindModel && kind != KindOllama:
		return Spec{}, fmt.Errorf("player %q: unknown kind %q (want %s)", text, kind, strings.Join(kinds, ", "))
	case arg == "" && kind == KindOllama:
		return Spec{}, fmt.Errorf("player %q: %s: needs a name", text, kind)
	case arg == "":
		return Spec{}, fmt.Errorf("player %q: %s: needs a path", text, kind)
	}
	return Spec{Kind: kind, Arg: arg}, nil
}

// grammar is the spec grammar as errors show it.
const grammar = "policy, frozen, base, adapter:PATH, model:PATH, scripted, scripted:NAME or ollama:NAME"

// ParseList reads a comma-separated list of specs; empty items are
// skipped.
func ParseList(list string) ([]Spec, error) {
	var out []Spec
	for part := range strings.SplitSeq(list, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		s, err := Parse(part)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// NeedsModel reports whether a spec of lists plays the base model (base
// and adapter: players, and a run's policy).
func NeedsModel(lists ...[]Spec) bool {
	for _, l := range lists {
		for _, s := range l {
			if s.Kind == KindBase || s.Kind == KindAdapter || s.Kind == KindPolicy {
				return true
			}
		}
	}
	return false
}
