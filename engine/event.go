package engine

import (
	"encoding/json"
	"slices"
)

// Kind classifies an event.
type Kind string

const (
	// KindBriefing is a seat's private instructions: rules, role, private
	// information and the move format. Episodes send one to every seat first.
	KindBriefing Kind = "briefing"
	// KindObservation is something that happened in the game.
	KindObservation Kind = "observation"
	// KindNotification asks one seat for a decision; it carries an id and
	// the legal actions.
	KindNotification Kind = "notification"
	// KindAction is the text a seat submitted for a notification.
	KindAction Kind = "action"
	// KindAck says an action was accepted.
	KindAck Kind = "ack"
	// KindValidationError says an action was rejected and why.
	KindValidationError Kind = "validation_error"
	// KindDefault says the inert default was applied (after a timeout or
	// after the retry budget ran out).
	KindDefault Kind = "default"
	// KindPhase marks a change of phase (round, night, day, vote…).
	KindPhase Kind = "phase"
	// KindOutcome carries the end of the episode.
	KindOutcome Kind = "outcome"
)

// Audience says which seats may receive an event. The zero value reaches
// nobody but the omniscient record.
type Audience struct {
	All bool `json:"all,omitempty"`
	// Seats lists seat indices. For team audiences the runtime resolves the
	// team to its members when the event is appended.
	Seats []int  `json:"seats,omitempty"`
	Team  string `json:"team,omitempty"`
}

// Everyone is the audience of public events.
func Everyone() Audience { return Audience{All: true} }

// Only is an audience of the given seats.
func Only(seats ...int) Audience { return Audience{Seats: slices.Clone(seats)} }

// TeamAudience is an audience of all seats whose Seat.Team is team.
func TeamAudience(team string) Audience { return Audience{Team: team} }

// Includes reports whether seat may see an event with this audience. Team
// audiences must have been resolved (Log.Append does it).
func (a Audience) Includes(seat int) bool {
	return a.All || slices.Contains(a.Seats, seat)
}

// Event is one entry of an episode's log.
type Event struct {
	Seq      int64    `json:"seq"`
	Kind     Kind     `json:"kind"`
	Audience Audience `json:"audience"`
	// Seat is the seat the event is about (the asked or acting seat), or -1.
	Seat           int    `json:"seat"`
	NotificationID string `json:"notification_id,omitempty"`
	// Text is the rendering a participant reads.
	Text string `json:"text,omitempty"`
	// Legal lists the legal actions of a notification when they are finite.
	Legal []string `json:"legal,omitempty"`
	// Grammar is a GBNF grammar of valid replies to a notification.
	Grammar string `json:"grammar,omitempty"`
	// Data is the structured payload (game specific).
	Data any `json:"data,omitempty"`
}

// Notification is a request for a decision addressed to one seat.
type Notification struct {
	ID    string   `json:"id"`
	Seat  int      `json:"seat"`
	Text  string   `json:"text"`
	Legal []string `json:"legal,omitempty"`
	// Grammar (GBNF) describes every syntactically valid reply.
	Grammar string `json:"grammar,omitempty"`
	// Attempt counts from 1; a retry after a validation error has Attempt > 1.
	Attempt int `json:"attempt"`
	Data    any `json:"data,omitempty"`
}

// Action is a seat's answer to a notification.
type Action struct {
	NotificationID string `json:"notification_id"`
	Text           string `json:"action"`
}

// MarshalCanonical encodes events deterministically (used to compare logs).
func MarshalCanonical(events []Event) ([]byte, error) { return json.Marshal(events) }
