package arena

import (
	"fmt"
	"strings"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/selfplay"
)

// Player is one contestant of an evaluation: a scripted policy of the
// games, or a model behind a backend (a llama backend, with the adapter
// the player's requests select, or a message-level backend such as
// Ollama).
type Player struct {
	// Name identifies the player in reports and in the results file, e.g.
	// "base", "adapter:runs/x/adapter.gguf", "scripted:naive".
	Name string
	// Version identifies the player's weights (a hash of its files, a
	// training iteration): a resumed evaluation replays the episodes a
	// player of the same name but another version played. Scripted
	// players leave it empty.
	Version string
	// Scripted is the name of the games' scripted policy this player
	// plays ("naive", "strategic", "random"; "scripted" is each game's
	// default); empty for model players.
	Scripted string
	// Model is the backend of a model player. Players of one base model
	// share one llama backend and differ in Model.Adapter; every model
	// seat of every pairing is decoded by its backend's shared loop.
	Model *selfplay.Player
	// Kind is the player's kind as a spec names it ("base", "adapter",
	// "model", "scripted", "ollama"); reports list adapters in the
	// transfer matrix. Empty is taken from Scripted and Model.
	Kind string
}

// ScriptedPlayer returns the player of the games' scripted policy name.
func ScriptedPlayer(name string) Player {
	return Player{Name: Spec{Kind: SpecScripted, Arg: name}.String(), Scripted: name, Kind: SpecScripted}
}

// agent is the player's value in selfplay.Options.Agents.
func (p Player) agent() string {
	if p.Model != nil {
		return "player:" + p.Name
	}
	if p.Scripted == "scripted" {
		return "scripted"
	}
	return engine.ScriptedAgent(p.Scripted)
}

func (p Player) kind() string {
	switch {
	case p.Kind != "":
		return p.Kind
	case p.Model != nil:
		return SpecModel
	}
	return SpecScripted
}

func (p Player) validate() error {
	switch {
	case p.Name == "":
		return fmt.Errorf("a player without a name")
	case (p.Model == nil) == (p.Scripted == ""):
		return fmt.Errorf("player %s: want exactly one of a model and a scripted policy", p.Name)
	case p.Model != nil && p.Model.Backend == nil:
		return fmt.Errorf("player %s: the model has no backend", p.Name)
	}
	return nil
}

// Spec kinds.
const (
	SpecBase     = "base"     // the base model (Lineup's model file, no adapter)
	SpecAdapter  = "adapter"  // adapter:PATH — a LoRA on the base model
	SpecModel    = "model"    // model:PATH — another GGUF
	SpecScripted = "scripted" // scripted:NAME — a scripted policy of the games
	SpecOllama   = "ollama"   // ollama:NAME — a model served by Ollama
)

// Spec is a player as the command line names it: "base",
// "adapter:PATH", "model:PATH", "scripted:NAME" or "ollama:NAME".
type Spec struct {
	Kind string
	Arg  string
}

// String is the spec as written; it is the player's name.
func (s Spec) String() string {
	switch {
	case s.Kind == SpecBase:
		return SpecBase
	case s.Kind == SpecScripted && s.Arg == "scripted":
		return "scripted"
	}
	return s.Kind + ":" + s.Arg
}

// ParseSpec reads one player spec.
func ParseSpec(text string) (Spec, error) {
	text = strings.TrimSpace(text)
	if text == SpecBase {
		return Spec{Kind: SpecBase}, nil
	}
	kind, arg, ok := strings.Cut(text, ":")
	switch {
	case !ok && text == SpecScripted:
		return Spec{Kind: SpecScripted, Arg: "scripted"}, nil
	case !ok:
		return Spec{}, fmt.Errorf("player %q: want base, adapter:PATH, model:PATH, scripted:NAME or ollama:NAME", text)
	case arg == "":
		return Spec{}, fmt.Errorf("player %q: %s: needs a %s", text, kind, map[bool]string{true: "path", false: "name"}[kind == SpecAdapter || kind == SpecModel])
	}
	switch kind {
	case SpecAdapter, SpecModel, SpecScripted, SpecOllama:
		return Spec{Kind: kind, Arg: arg}, nil
	}
	return Spec{}, fmt.Errorf("player %q: unknown kind %q (want base, adapter, model, scripted or ollama)", text, kind)
}

// ParseSpecs reads a comma-separated list of specs.
func ParseSpecs(list string) ([]Spec, error) {
	var out []Spec
	for part := range strings.SplitSeq(list, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		s, err := ParseSpec(part)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}
