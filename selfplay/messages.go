package selfplay

import (
	"strings"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/inference"
)

// RenderEvents turns events of one seat's view into the chat messages a
// model seat reads: briefings become the system message (a user message
// once the conversation has started), validation errors and every other
// event a user message, consecutive messages of one role are joined with a
// newline, and actions and acknowledgements are skipped (a seat's own reply
// is its assistant message). started reports whether the conversation
// already has messages. defang, when non-nil, rewrites each event's text
// before it is added (see inference.Defanger). A notification's legal
// replies are listed when there are at most maxLegal of them
// (Reply.MaxLegal: 0 is DefaultMaxLegal, -1 never): callers pass the
// setting the policy was trained with, never a default of their own.
//
// It is the rule a model seat (SeatStream) renders its prompt by,
// exported so that dataset exports give a seat the same conversation.
func RenderEvents(view []engine.Event, started bool, defang func(string) string, maxLegal int) []inference.Message {
	return renderEvents(view, started, defang, Reply{MaxLegal: maxLegal}.maxLegal())
}

// DefaultMaxLegal is how many legal replies a notification may have for a
// seat's prompt to list them (Options.MaxLegal): a short menu (ACCEPT |
// REJECT | WALK) helps a small model, a long one (every split of an item
// pool) only lengthens every prompt, and the notification already states
// the move syntax.
const DefaultMaxLegal = 8

func renderEvents(view []engine.Event, started bool, defang func(string) string, maxLegal int) []inference.Message {
	var out []inference.Message
	add := func(role, text string) {
		if text == "" {
			return
		}
		if defang != nil {
			text = defang(text)
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content += "\n" + text
			return
		}
		out = append(out, inference.Message{Role: role, Content: text})
	}
	for _, e := range view {
		switch e.Kind {
		case engine.KindBriefing:
			if !started && (len(out) == 0 || out[len(out)-1].Role == "system") {
				add("system", e.Text)
			} else {
				add("user", e.Text)
			}
		case engine.KindAction, engine.KindAck:
		case engine.KindValidationError:
			add("user", "Your reply was rejected: "+e.Text)
		case engine.KindNotification:
			text := e.Text
			if len(e.Legal) > 0 && len(e.Legal) <= maxLegal {
				text += "\nLegal replies: " + strings.Join(e.Legal, " | ")
			}
			add("user", text)
		default:
			add("user", e.Text)
		}
	}
	return out
}

// SeatMessages returns seat's whole conversation in an episode's events
// (a Record's log): only the events whose audience includes seat, rendered
// as RenderEvents does (with maxLegal), with each of the seat's own actions as an
// assistant message holding the reply text the engine received. A reply
// that timed out has no action event, so it has no assistant message
// either (the record's default event tells the seat what was applied).
func SeatMessages(events []engine.Event, seat int, defang func(string) string, maxLegal int) []inference.Message {
	var out []inference.Message
	var chunk []engine.Event
	for _, e := range events {
		if !e.Audience.Includes(seat) {
			continue
		}
		if e.Kind == engine.KindAction && e.Seat == seat {
			out = append(out, RenderEvents(chunk, len(out) > 0, defang, maxLegal)...)
			chunk = chunk[:0]
			// The reply is what the model wrote: it is not defanged, as it
			// is not in the stream as text but as the sampled ids.
			out = append(out, inference.Message{Role: "assistant", Content: e.Text})
			continue
		}
		chunk = append(chunk, e)
	}
	return append(out, RenderEvents(chunk, len(out) > 0, defang, maxLegal)...)
}
