package selfplay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/engine/enginetest"
	"github.com/omar-selfplay/omar/games/casino"
	"github.com/omar-selfplay/omar/games/craigslist"
	"github.com/omar-selfplay/omar/games/sealedbid"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/inference/scripted"
	"github.com/omar-selfplay/omar/werewolf"
)

func scriptedPlayer(t *testing.T, rule scripted.Rule) *Player {
	t.Helper()
	be, err := scripted.New(scripted.Options{Rule: rule})
	if err != nil {
		t.Fatal(err)
	}
	return &Player{Label: "scripted-lm", Backend: be, Tokenizer: be}
}

// TestCloneEqualsSelfplayStream: a self-play run whose policy writes
// canonical tokens (the scripted backend tokenises its replies and closes
// them with the end-of-turn token) and the clone of its records give the
// same token streams, masks and turn ends, segments included.
func TestCloneEqualsSelfplayStream(t *testing.T) {
	bid := func(req inference.Request) string { return "BID " + strconv.Itoa(int(req.Sampling.Seed%9)) }
	// Invalid ACCEPTs among the offers: validation errors are in the
	// streams too.
	bargain := func(req inference.Request) string {
		if req.Sampling.Seed%3 == 0 {
			return "ACCEPT"
		}
		return "PROPOSE: price=" + strconv.Itoa(int(100+req.Sampling.Seed%500))
	}
	for _, tc := range []struct {
		name    string
		game    engine.Game
		params  engine.Params
		reply   func(inference.Request) string
		context int
		max     int
	}{
		{"one segment", sealedbid.New(), engine.Params{"rounds": 6, "bidders": 3}, bid, 1024, 12},
		{"segments", sealedbid.New(), engine.Params{"rounds": 6, "bidders": 3}, bid, 300, 12},
		{"compact negotiation", craigslist.New(), engine.Params{"rounds": 4, "structured_only": true, "compact": true}, bargain, 1024, 32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := scriptedPlayer(t, tc.reply)
			opts := Options{}.Defaults()
			opts.Params = tc.params
			opts.Parallel, opts.MaxTokens, opts.MinReplyTokens, opts.Context = 2, tc.max, 6, tc.context
			opts.Grammar = false
			r, err := NewRunner(tc.game, p, nil, opts)
			if err != nil {
				t.Fatal(err)
			}
			var res []*EpisodeResult
			if _, err := r.Run(context.Background(), 0, 4, func(e *EpisodeResult) error { res = append(res, e); return nil }); err != nil {
				t.Fatal(err)
			}
			segments := 0
			for _, e := range res {
				got, err := Clone(context.Background(), tc.game, e.Record, e.Index, p, opts, nil)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(e.Trajectories) {
					t.Fatalf("episode %d: %d cloned trajectories, self-play has %d", e.Index, len(got), len(e.Trajectories))
				}
				for k := range got {
					a, b := got[k], e.Trajectories[k]
					if !slices.Equal(a.Tokens, b.Tokens) || !slices.Equal(a.Mask, b.Mask) || !slices.Equal(a.TurnEnds, b.TurnEnds) || a.Reward != b.Reward || a.Segment != b.Segment {
						t.Errorf("episode %d seat %d segment %d: the clone differs from the self-play stream\nclone %v\nplay  %v", e.Index, b.Seat, b.Segment, a.Tokens, b.Tokens)
					}
					if err := a.Validate(); err != nil {
						t.Errorf("cloned trajectory: %v", err)
					}
					segments = max(segments, a.Segment)
				}
			}
			if tc.context < 1024 && segments == 0 {
				t.Errorf("the short context made no second segment; the test does not cover segments")
			}
		})
	}
}

// TestCloneScriptedRecords clones episodes the game's scripted policies
// played (omar play's records) in a negotiation game and in Werewolf: the
// replies in the streams decode to the recorded actions.
func TestCloneScriptedRecords(t *testing.T) {
	p := scriptedPlayer(t, func(inference.Request) string { return "" })
	for _, g := range []engine.Game{casino.New(), werewolf.New()} {
		t.Run(g.ID(), func(t *testing.T) {
			opts := Options{}.Defaults()
			opts.MaxTokens, opts.Context = 256, 16384
			for seed := uint64(1); seed <= 3; seed++ {
				rec := enginetest.PlayScripted(t, g, seed, nil)
				trajs, err := Clone(context.Background(), g, rec, int(seed), p, opts, nil)
				if err != nil {
					t.Fatal(err)
				}
				actions := map[int][]string{}
				for _, e := range rec.Events {
					if e.Kind == engine.KindAction {
						actions[e.Seat] = append(actions[e.Seat], e.Text)
					}
				}
				for _, tr := range trajs {
					var replies []string
					for _, span := range tr.TurnSpans() {
						ids := tr.Tokens[span[0] : span[1]+1]
						if n := len(ids); n > 0 && p.Tokenizer.EOG(ids[n-1]) {
							ids = ids[:n-1]
						}
						text, err := p.Tokenizer.Detokenize(ids)
						if err != nil {
							t.Fatal(err)
						}
						replies = append(replies, text)
					}
					if want := actions[tr.Seat]; fmt.Sprint(replies) != fmt.Sprint(want) {
						t.Errorf("seed %d seat %d: stream replies %q, recorded %q", seed, tr.Seat, replies, want)
					}
				}
			}
		})
	}
}

// TestCloneRefusesDivergedRecords: an edited record no longer replays.
func TestCloneRefusesDivergedRecords(t *testing.T) {
	g := casino.New()
	cast, _ := engine.ScriptedCast(g, nil, 5)
	rec, err := engine.Play(context.Background(), g, 5, nil, cast, engine.DefaultOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rec.Seed++ // another deal: the recorded moves meet other events
	p := scriptedPlayer(t, func(inference.Request) string { return "" })
	opts := Options{}.Defaults()
	opts.MaxTokens, opts.Context = 256, 16384
	if _, err := Clone(context.Background(), g, rec, 0, p, opts, []int{0}); !errors.Is(err, ErrReplayDiverged) {
		t.Errorf("got %v, want ErrReplayDiverged", err)
	}
}
