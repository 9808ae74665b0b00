// Package players names and opens whatever plays a seat: the one spec
// grammar of every kind of agent (a run's policy and frozen model, a base
// model, a LoRA adapter on it, another GGUF, a scripted policy of the
// games, an Ollama model), the one place those specs are parsed, and the
// one place backends are opened (Backend: the llama and Ollama settings
// that every command and config embeds inline).
//
// A training run seats its agents, an evaluation its players and
// opponents, a served page its model players, all from the same specs:
//
//	policy            the run's trained model (its model file and current adapter)
//	frozen            the run's frozen opponent (rollout.frozen_model)
//	base              the base model file, no adapter
//	adapter:PATH      a LoRA adapter on the base model
//	model:PATH        another GGUF
//	scripted[:NAME]   a scripted policy of the games (alone: each game's default)
//	ollama:NAME       a model served by Ollama (played at the message level)
package players
