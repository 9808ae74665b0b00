// Package engine is omar's event runtime: the environment owns rules, hidden
// state, legal actions and rewards; every participant (LLM, scripted, remote,
// human) is a black box that receives what it may see and answers
// notifications with actions.
//
// A Game is immutable (id, parameters, seats, reward range); NewEpisode makes
// a seeded, mutable Episode. The Episode drives itself through a Runtime:
// Broadcast (no reply), Ask (one seat) and AskAll (simultaneous: every answer
// is collected before any is applied). Everything that happens is an Event in
// an append-only, sequence-numbered Log; each event has an Audience, and a
// seat's view is computed by the audience filter and nothing else.
//
// An action names the notification it answers; a stale one is rejected. An
// invalid action is recorded as a validation error and retried up to a
// budget, after which the inert default is applied; a timeout applies the
// default at once. Either way the failure is written to the log and the
// episode goes on: a model's bad reply is game data, never a Go error.
//
// The engine imports no model code.
package engine
