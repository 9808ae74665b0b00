package selfplay

import (
	"context"
	"github.com/omar-selfplay/omar/games/sealedbid"

	"github.com/omar-selfplay/omar/werewolf"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/inference"
)

// TestSeatMessagesIsTheStream checks SeatMessages against what a model
// seat really played: the chat template's rendering of the messages
// SeatMessages derives from the episode record, cut after the seat's last
// reply, is exactly the seat's token stream decoded with its specials.
func TestSeatMessagesIsTheStream(t *testing.T) {
	// Werewolf's votes carry short legal menus (the living players and REJECT |
	// abstain), so the legal-replies setting changes the prompt: the
	// reference rendering must be given the setting the seats played with.
	tests := []struct {
		name     string
		tok      byteTokenizer
		game     engine.Game
		maxLegal int
		episodes int
	}{
		{"plain", byteTokenizer{renderSpecial: true}, sealedbid.New(), 0, 3},
		{"template trims replies", byteTokenizer{renderSpecial: true, trim: true}, sealedbid.New(), 0, 3},
		{"legal menus listed", byteTokenizer{renderSpecial: true}, werewolf.New(), 0, 1},
		{"legal menus never", byteTokenizer{renderSpecial: true}, werewolf.New(), -1, 1},
		{"legal menus up to 1", byteTokenizer{renderSpecial: true}, werewolf.New(), 1, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lm := newFakeLM(tc.tok)
			res := runGame(t, tc.game, lm, testOptions(func(o *Options) { o.Context, o.MaxLegal = 1<<16, tc.maxLegal }), tc.episodes)
			pl := &Player{Tokenizer: tc.tok}
			checked := 0
			for _, r := range res {
				for _, tr := range r.Trajectories {
					if tr.Segment != 0 {
						t.Fatalf("episode %d seat %d: segment %d; the context should hold a whole episode", r.Index, tr.Seat, tr.Segment)
					}
					msgs := SeatMessages(r.Record.Events, tr.Seat, pl.defang, tc.maxLegal)
					last := -1
					for i, m := range msgs {
						if m.Role == "assistant" {
							last = i
						}
					}
					if got, want := last >= 0, len(tr.TurnEnds) > 0; got != want {
						t.Fatalf("episode %d seat %d: assistant messages %v, turns %v", r.Index, tr.Seat, got, want)
					}
					// The stream holds each reply as sampled, untrimmed, so the
					// reference rendering does not trim either.
					want, _ := byteTokenizer{}.ChatTemplate(msgs[:last+1], false)
					// The template puts a newline after the last end-of-turn
					// marker; the stream ends with the sampled token, or without
					// one when the reply hit the token limit.
					want = "<s>" + strings.TrimSuffix(want, "\n")
					if !tc.tok.EOG(tr.Tokens[len(tr.Tokens)-1]) {
						want = strings.TrimSuffix(want, "<|im_end|>")
					}
					got, _ := tc.tok.Detokenize(tr.Tokens)
					if got != want {
						t.Errorf("episode %d seat %d:\n got stream %q\nwant messages %q", r.Index, tr.Seat, got, want)
					}
					checked++
				}
			}
			if checked == 0 {
				t.Fatal("no trajectories")
			}
		})
	}
}

func TestSeatMessagesView(t *testing.T) {
	ev := func(kind engine.Kind, aud engine.Audience, seat int, text string) engine.Event {
		return engine.Event{Kind: kind, Audience: aud, Seat: seat, Text: text}
	}
	events := []engine.Event{
		ev(engine.KindBriefing, engine.Only(0), 0, "brief 0"),
		ev(engine.KindBriefing, engine.Only(1), 1, "brief 1"),
		ev(engine.KindBriefing, engine.Only(0, 1), -1, "rules"),
		ev(engine.KindPhase, engine.Everyone(), -1, "round 1"),
		{Kind: engine.KindNotification, Audience: engine.Only(0), Seat: 0, Text: "move?", Legal: []string{"A", "B"}},
		ev(engine.KindAction, engine.Only(0), 0, "C"),
		ev(engine.KindValidationError, engine.Only(0), 0, "C is not legal"),
		ev(engine.KindNotification, engine.Only(0), 0, "move again?"),
		ev(engine.KindAction, engine.Only(0), 0, "A"),
		ev(engine.KindAck, engine.Only(0), 0, ""),
		ev(engine.KindNotification, engine.Only(1), 1, "your move?"),
		ev(engine.KindAction, engine.Only(1), 1, "B"),
		ev(engine.KindAck, engine.Only(1), 1, ""),
		ev(engine.KindObservation, engine.Everyone(), 1, "seat 1 played B"),
		ev(engine.KindBriefing, engine.Only(0), 0, "late note"),
		ev(engine.KindObservation, engine.Audience{}, -1, "record only"),
	}
	tests := []struct {
		seat int
		want []inference.Message
	}{
		{0, []inference.Message{
			{Role: "system", Content: "brief 0\nrules"},
			{Role: "user", Content: "round 1\nmove?\nLegal replies: A | B"},
			{Role: "assistant", Content: "C"},
			{Role: "user", Content: "Your reply was rejected: C is not legal\nmove again?"},
			{Role: "assistant", Content: "A"},
			{Role: "user", Content: "seat 1 played B\nlate note"},
		}},
		{1, []inference.Message{
			{Role: "system", Content: "brief 1\nrules"},
			{Role: "user", Content: "round 1\nyour move?"},
			{Role: "assistant", Content: "B"},
			{Role: "user", Content: "seat 1 played B"},
		}},
		{2, []inference.Message{{Role: "user", Content: "round 1\nseat 1 played B"}}},
	}
	for _, tc := range tests {
		got := SeatMessages(events, tc.seat, nil, 0)
		if len(got) != len(tc.want) {
			t.Fatalf("seat %d: got %d messages %q, want %d %q", tc.seat, len(got), got, len(tc.want), tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("seat %d message %d: got %q, want %q", tc.seat, i, got[i], tc.want[i])
			}
		}
	}
	up := func(s string) string { return strings.ToUpper(s) }
	if got := SeatMessages(events[:6], 0, up, 0); got[0].Content != "BRIEF 0\nRULES" || got[2].Content != "C" {
		t.Errorf("defang: got %q, want event texts rewritten and the reply kept", got)
	}
}

// runGame plays n episodes of g with lm as the policy.
func runGame(t *testing.T, g engine.Game, lm *fakeLM, opts Options, n int) []*EpisodeResult {
	t.Helper()
	r, err := NewRunner(g, &Player{Label: "fake", Backend: lm, Tokenizer: lm.tok}, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	var out []*EpisodeResult
	if _, err := r.Run(context.Background(), 0, n, func(res *EpisodeResult) error {
		out = append(out, res)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}
