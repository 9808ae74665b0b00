// Package arena evaluates players against opponents on held-out
// scenarios: every player meets every opponent in every side of every
// environment, and the report gives each pairing's mean reward with a
// bootstrap confidence interval, paired differences between players,
// outcome rates (deal, no deal, walk-away; invalid and defaulted replies),
// the games' behaviour metrics and probes, Bradley–Terry ratings and a
// transfer matrix of players × environments.
//
// A player is a scripted policy of the games or a model behind a backend
// (a selfplay.Player): the base model, a LoRA adapter on it, another GGUF,
// an Ollama model. Players of one base model share one llama backend and
// select their adapter per request (inference.Request.Adapter), so the
// seats of all pairings decode together. Open builds the players that a
// command line names ("base", "adapter:PATH", "model:PATH",
// "scripted:NAME", "ollama:NAME"); a training loop passes its own backend
// instead, with its current adapter, as in the example.
//
// Held out by construction: episode k of a pairing is the selfplay runner's
// episode FirstEpisode+k (2^62+k), whose deal seed no training episode
// index can produce under the same seed (see FirstEpisode); games with a
// curated evaluation set play it (Env.Scenarios). Every pairing of an
// environment plays the same deals with the same sampling seeds, so the
// differences between players are paired episode by episode.
//
// Evaluate appends each finished episode to results.jsonl in its directory
// and skips what is there on the next call (resume). The report depends on
// the results only, so the same seed gives the same tables.
package arena
