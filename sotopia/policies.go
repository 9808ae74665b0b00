package sotopia

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/omar-selfplay/omar/engine"
)

func policies() []engine.Policy {
	return []engine.Policy{
		{Name: "scripted", Description: "a polite, fixed conversation script that states its goal and proposes a compromise", New: newScripted},
		{Name: "random", Description: "uniformly random action kind with random content", New: newRandom},
		{Name: "silent", Description: "always does nothing (ends episodes by silence)", New: func(engine.Seat, uint64) engine.Agent {
			return engine.AgentFunc(func(_ context.Context, t engine.Turn) (engine.Action, error) {
				return engine.Action{NotificationID: t.Notification.ID, Text: "none"}, nil
			})
		}},
	}
}

// briefingOf finds the seat's briefing in its view.
func briefingOf(view []engine.Event) (Briefing, bool) {
	for _, e := range view {
		if e.Kind == engine.KindBriefing {
			b, ok := e.Data.(Briefing)
			return b, ok
		}
	}
	return Briefing{}, false
}

// ownTurns counts the seat's accepted earlier turns in its view.
func ownTurns(view []engine.Event, seat int) int {
	n := 0
	for _, e := range view {
		if te, ok := e.Data.(TurnEvent); ok && te.Seat == seat && e.Audience.Includes(seat) && len(e.Audience.Seats) == 1 && e.Audience.Seats[0] == seat {
			n++
		}
	}
	return n
}

func newScripted(seat engine.Seat, seed uint64) engine.Agent {
	return engine.AgentFunc(func(_ context.Context, t engine.Turn) (engine.Action, error) {
		b, ok := briefingOf(t.View)
		name, role, goal := "me", "participant", "find an arrangement that works for both of us"
		if ok {
			name, role, goal = b.Self.Name, b.Roles[b.Seat], strings.TrimSuffix(b.Goal, ".")
		}
		script := []string{
			fmt.Sprintf("speak: Hello, I'm %s, the %s. Thanks for taking a moment to talk.", name, role),
			"non-verbal: listens carefully and nods",
			fmt.Sprintf("speak: To be honest, here is what I need: %s.", lowerFirst(goal)),
			"speak: I understand this matters to you too. What would work for you?",
			"action: writes down both positions on a sheet of paper",
			"speak: How about we meet halfway, so each of us gets the part that matters most?",
			"non-verbal: smiles and offers a handshake",
			"speak: Thank you. I think we have a fair agreement.",
		}
		k := ownTurns(t.View, seat.Index)
		return engine.Action{NotificationID: t.Notification.ID, Text: script[k%len(script)]}, nil
	})
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

var (
	randomWords = []string{"yes", "no", "maybe", "tomorrow", "the plan", "fair", "price", "help", "sorry", "thanks", "later", "together", "why", "okay"}
	randomMoves = []string{"shrugs", "smiles", "frowns", "looks away", "nods", "sighs", "raises an eyebrow"}
	randomActs  = []string{"sits down", "stands up", "picks up a cup", "checks the phone", "opens the door", "hands over a note"}
)

func newRandom(seat engine.Seat, seed uint64) engine.Agent {
	r := rand.New(rand.NewPCG(seed, 0x72616e646f6d))
	return engine.AgentFunc(func(_ context.Context, t engine.Turn) (engine.Action, error) {
		var text string
		switch r.IntN(5) {
		case 0:
			text = "none"
		case 1:
			text = "leave"
		case 2:
			n := 1 + r.IntN(6)
			w := make([]string, n)
			for i := range w {
				w[i] = randomWords[r.IntN(len(randomWords))]
			}
			text = "speak: " + strings.Join(w, " ")
		case 3:
			text = "non-verbal: " + randomMoves[r.IntN(len(randomMoves))]
		default:
			text = "action: " + randomActs[r.IntN(len(randomActs))]
		}
		return engine.Action{NotificationID: t.Notification.ID, Text: text}, nil
	})
}
