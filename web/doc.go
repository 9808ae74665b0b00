// Package web is omar's web page: people at the table. It serves, from
// assets embedded in the binary (plain HTML, CSS and JavaScript; no build
// step), the episodes list of an engine/remote server with a form that
// creates episodes, the live view of an episode (omniscient for the
// creator, a seat's own view for a seat's token, with the seat's legal
// actions as controls), the step-by-step replay of recorded episodes, and
// a training dashboard that charts a run's metrics.jsonl as it grows.
//
// The page reads only what the HTTP API gives the token it holds, so the
// audience rules of the engine hold in the page as in the API: a seat's
// page receives nothing another seat may not see. Creating and listing
// episodes, records and run data need the server's secret.
//
// It also plays the seats that omar serve gives to models (ModelAgents):
// a llama model with or without an adapter, or an Ollama model. Each is a
// self-play seat stream (selfplay.SeatStream), so a served seat reads the
// prompts a self-play seat of the same reply settings reads.
package web
