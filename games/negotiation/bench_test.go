package negotiation_test

import (
	"context"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/games/calendar"
	"github.com/omar-selfplay/omar/games/casino"
	"github.com/omar-selfplay/omar/games/craigslist"
	"github.com/omar-selfplay/omar/games/dealornodeal"
	"github.com/omar-selfplay/omar/games/jobinterview"
	"github.com/omar-selfplay/omar/games/marketplace"
	"github.com/omar-selfplay/omar/games/negotiation"
)

// BenchmarkEpisode plays whole strategic-vs-naive episodes of each game.
func BenchmarkEpisode(b *testing.B) {
	for _, g := range []engine.Game{dealornodeal.New(), casino.New(), craigslist.New(), jobinterview.New(), calendar.New(), marketplace.New()} {
		b.Run(g.ID(), func(b *testing.B) {
			b.ReportAllocs()
			seed := uint64(0)
			for b.Loop() {
				seed++
				cast, err := engine.ScriptedCast(g, []string{"strategic", "naive"}, seed)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := engine.Play(context.Background(), g, seed, nil, cast, engine.DefaultOptions(), nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkSplitReference(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		negotiation.SplitReference([]int{3, 3, 3}, []int{5, 4, 3}, []int{3, 4, 5}, 36, 36)
	}
}

func BenchmarkParseReply(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := negotiation.ParseReply("SAY: I need the books.\nPROPOSE: book=2 hat=0 ball=1", false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFabrications reads the claims of a whole random-play episode
// (chatter in every turn) of the price game with the longest briefing.
func BenchmarkFabrications(b *testing.B) {
	g := craigslist.New()
	cast, err := engine.ScriptedCast(g, []string{"random", "random"}, 7)
	if err != nil {
		b.Fatal(err)
	}
	rec, err := engine.Play(context.Background(), g, 7, nil, cast, engine.DefaultOptions(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		negotiation.Fabrications[float64](rec.Events, [2][]float64{})
	}
}
