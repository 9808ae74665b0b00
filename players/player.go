package players

import (
	"fmt"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/selfplay"
)

// Player is one opened agent: a scripted policy of the games, or a model
// behind a backend (a llama backend, with the adapter the player's
// requests select, or a message-level backend such as Ollama).
type Player struct {
	// Name identifies the player in reports and in results files: its
	// spec as written ("base", "adapter:runs/x/adapter.gguf",
	// "scripted:naive"), or a name the caller chose.
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
	// Kind is the player's spec kind (KindBase, KindAdapter, …); empty is
	// taken from Scripted and Model (see KindOf).
	Kind string
}

// Scripted returns the player of the games' scripted policy name.
func Scripted(name string) Player {
	return Player{Name: Spec{Kind: KindScripted, Arg: name}.String(), Scripted: name, Kind: KindScripted}
}

// Agent is the player's value in selfplay.Options.Agents: its scripted
// policy, or "player:NAME" for a model player (found in the rollout's
// Players under that value).
func (p Player) Agent() string {
	if p.Model != nil {
		return "player:" + p.Name
	}
	if p.Scripted == KindScripted {
		return KindScripted
	}
	return engine.ScriptedAgent(p.Scripted)
}

// KindOf is the player's kind: Kind, or KindModel for a model player and
// KindScripted for a scripted one when Kind is empty.
func (p Player) KindOf() string {
	switch {
	case p.Kind != "":
		return p.Kind
	case p.Model != nil:
		return KindModel
	}
	return KindScripted
}

// Validate checks that p is exactly one of a model and a scripted policy.
func (p Player) Validate() error {
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
