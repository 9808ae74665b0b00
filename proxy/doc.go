// Package proxy is omar's OpenAI-compatible rollout proxy: agents written
// in any framework call /v1/chat/completions or /v1/completions as they
// would call OpenAI, the embedded backend answers them (batched across
// callers), and every call of a session is recorded token-in/token-out so
// that omar can train the policy on what the agent did.
//
// A call belongs to a session when it carries a key (the X-Omar-Session
// header, else the request's user field; a call tied to a seat always has
// its seat's key, which no other call may use). A session's token stream is its
// previous prompt followed by the reply's sampled ids: when the next
// call's rendered prompt extends that stream (as text, or as tokens), only
// the new tokens are appended, the KV cache of the stream is reused, and
// the reply's ids are exactly the sampled ones; otherwise a new segment
// starts. The loss mask is true on reply tokens only.
//
// A session tied to an engine episode's seat (X-Omar-Episode, X-Omar-Seat
// and the seat's bearer token in X-Omar-Seat-Token, checked against the
// engine's HTTP server) receives that seat's reward when the episode ends;
// its segments then become selfplay.Trajectory values, which
// loop.Sequences turns into training sequences. Sessions without an
// episode receive a reward through the management API; they belong to
// the client address that created them, within its budget of sessions and
// bytes (docs/security.md).
//
// The wire types follow OpenAI's chat and legacy completions APIs. Tool
// definitions and calls are written into the prompt in the Hermes form
// the chat template renders and read back from replies (tools.go). Fields
// the proxy cannot honour (n > 1, penalties, a forced tool choice,
// json_schema) are refused with a 400 in OpenAI's error shape rather than
// ignored, since a silently ignored field would change what the agent
// believes it sampled.
//
// With Options.Forward, chat calls are answered by another
// OpenAI-compatible endpoint and recorded in the policy's tokens as
// imitation data, flagged as not sampled by the policy (forward.go).
package proxy
