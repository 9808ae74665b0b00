package export

import (
	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/seeds"
	"github.com/omar-selfplay/omar/selfplay"
)

// ChatRow is one line of a chat JSONL export: one seat's conversation in
// one episode, in the shape Hugging Face chat templates and trainers take
// (a "messages" list of role/content pairs), with the seat and its reward
// beside it for filtering and weighting.
type ChatRow struct {
	Messages []ChatMessage `json:"messages"`
	Env      string        `json:"env"`
	// Episode is the record's position in the input (0-based).
	Episode int `json:"episode"`
	// Seed is written as a decimal string: a dataset tool's JSON numbers
	// are doubles, which would round it (older exports' numbers still
	// read).
	Seed     seeds.JSON `json:"seed"`
	Seat     int        `json:"seat"`
	SeatName string     `json:"seat_name"`
	Role     string     `json:"role"`
	Team     string     `json:"team,omitempty"`
	Agent    string     `json:"agent"`
	Reward   float64    `json:"reward"`
	Result   string     `json:"result"`
}

// ChatMessage is one message: role "system" (the seat's private
// briefing), "user" (what the seat was shown) or "assistant" (its reply).
type ChatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ChatRows returns the conversations of every seat of the index-th record
// of an input, in seat order. Each holds only the events whose audience
// includes its seat, rendered by selfplay.SeatMessages: the rule a model
// seat's prompt is built by, so a seat's conversation here is the one a
// model playing it read and wrote. Text is not defanged: that depends on
// the tokenizer the data is later rendered with.
func ChatRows(index int, rec *engine.Record, maxLegal int) []ChatRow {
	out := make([]ChatRow, len(rec.Seats))
	for i, s := range rec.Seats {
		msgs := selfplay.SeatMessages(rec.Events, s.Index, nil, maxLegal)
		row := ChatRow{
			Messages: make([]ChatMessage, len(msgs)),
			Env:      rec.Env, Episode: index, Seed: seeds.JSON(rec.Seed),
			Seat: s.Index, SeatName: s.Name, Role: s.Role, Team: s.Team, Agent: s.Agent,
			Reward: rec.Outcome.Rewards[s.Index], Result: rec.Outcome.Result,
		}
		for k, m := range msgs {
			row.Messages[k] = ChatMessage{Role: m.Role, Content: m.Content}
		}
		out[i] = row
	}
	return out
}
