package negotiation

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/engine"
)

var claimTests = []struct {
	text string
	want []Claim
}{
	{"no numbers here", nil},
	{"$1,200 or 99.5", []Claim{{Value: 1200}, {Value: 99.5}}},
	{"about 90k a year", []Claim{{Value: 90000}}},
	{"at 14:30 or 2pm or 9 a.m. or 12am", []Claim{{Value: 14.5}, {Value: 14}, {Value: 9}, {Value: 0}}},
	{"13% off", []Claim{{Value: 13, Percent: true}}},
	{"a PS5, 1440p, the 2nd, 56cm and 160k miles", []Claim{{Value: 160000}}},
	{"a 30-minute call", []Claim{{Value: 30}}},
	{"I can do $190", []Claim{{Value: 190, Offer: true}}},
	{"how about 2 books and I pay 5", []Claim{{Value: 2, Offer: true}, {Value: 5, Offer: true}}},
	{"I saw it for $380", []Claim{{Value: 380}}},
	{"1" + strings.Repeat("0", 300), []Claim{{Value: 1e300}}},
	{"1" + strings.Repeat("0", 400), nil},
}

func TestClaims(t *testing.T) {
	for _, tt := range claimTests {
		t.Run(tt.text[:min(len(tt.text), 30)], func(t *testing.T) {
			got := Claims(tt.text)
			if !slices.EqualFunc(got, tt.want, func(a, b Claim) bool {
				return math.Abs(a.Value-b.Value) <= 1e-9*max(1, math.Abs(b.Value)) && a.Percent == b.Percent && a.Offer == b.Offer
			}) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// FuzzClaims checks that reading numbers never panics and returns only
// finite, non-negative values.
func FuzzClaims(f *testing.F) {
	for _, tt := range claimTests {
		f.Add(tt.text)
	}
	f.Fuzz(func(t *testing.T, text string) {
		var facts Facts
		for _, c := range Claims(text) {
			if math.IsNaN(c.Value) || math.IsInf(c.Value, 0) || c.Value < 0 {
				t.Fatalf("%q: claim %+v", text, c)
			}
			facts.Add(c.Value)
		}
		// Every number of a text is a fact once the text is known.
		if Fabricated(text, facts) {
			t.Fatalf("%q is fabricated against its own numbers %v", text, facts.vals)
		}
	})
}

var commitTests = []struct {
	msg  string
	want bool
}{
	{"This is my FINAL offer.", true},
	{"take it or leave it", true},
	{"$500, last offer", true},
	{"That's my bottom line.", true},
	{"I can't go lower than that", true},
	{"I can’t go any higher", true},
	{"I cannot go below 300", true},
	{"we won't go further", true},
	{"The price is non-negotiable", true},
	{"not a penny more", true},
	{"That is as low as I can go.", true},
	{"best and final: $480", true},
	{"that's final", true},
	{"Pay $400 or I walk.", true},
	{"The offer is firm.", true},
	{"What is your best offer?", false},
	{"I can go lower if you pick it up", false},
	{"finally, an offer", false},
	{"my bottom-line-ish guess", false},
	{"finaloffer", false},
	{"", false},
}

func TestCommits(t *testing.T) {
	for _, tt := range commitTests {
		if got := Commits(tt.msg); got != tt.want {
			t.Errorf("Commits(%q) = %v, want %v", tt.msg, got, tt.want)
		}
	}
	if r, ok := CommitmentRate([]string{"final offer", "hi", "ok", "take it or leave it"}); !ok || r != 0.5 {
		t.Errorf("rate: got %v, %v; want 0.5, true", r, ok)
	}
	if _, ok := CommitmentRate(nil); ok {
		t.Error("rate of no messages: got ok, want none")
	}
}

// FuzzCommits checks that the lexicon never panics and that a phrase
// stays found whatever surrounds it with spaces.
func FuzzCommits(f *testing.F) {
	for _, tt := range commitTests {
		f.Add(tt.msg)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		Commits(msg)
		if !Commits(msg + " final offer") {
			t.Fatalf("%q + final offer: not found", msg)
		}
	})
}

// TestFabrications checks the walk over an episode's events: what a seat
// was shown, its own earlier words and its turn's move are facts; what
// only the other seat was shown, and raw replies, are not.
func TestFabrications(t *testing.T) {
	ev := func(kind engine.Kind, aud engine.Audience, text string, data any) engine.Event {
		return engine.Event{Kind: kind, Audience: aud, Text: text, Data: data}
	}
	mv := func(seat int, say string) MoveEvent[float64] { return MoveEvent[float64]{Seat: seat, Say: say} }
	events := []engine.Event{
		ev(engine.KindBriefing, engine.Only(0), "Listed at $515. Your target: $450.", nil),
		ev(engine.KindBriefing, engine.Only(1), "Listed at $515.", nil),
		ev(engine.KindAction, engine.Only(0), "SAY: I saw it for $380", nil),
		// 450 is seat 0's; 400 its proposal of the same turn.
		ev(engine.KindObservation, engine.Everyone(), "Buyer says: my budget is $450, so $400\nBuyer proposes: a price of $400.", mv(0, "my budget is $450, so $400")),
		// 380 was only in a raw reply: fabricated; 450 was said: known.
		ev(engine.KindObservation, engine.Only(0), "Seller says: you said $450, eBay has $380", mv(1, "you said $450, eBay has $380")),
		ev(engine.KindNotification, engine.Only(1), "Worth to you: 62% of your best.", nil),
		ev(engine.KindObservation, engine.Everyone(), "Seller says: 62%, and I paid $999", mv(1, "62%, and I paid $999")),
		// Repeating one's own claim is not a new fabrication.
		ev(engine.KindObservation, engine.Everyone(), "Seller says: I paid $999", mv(1, "I paid $999")),
		ev(engine.KindObservation, engine.Everyone(), "Buyer says: take 3", mv(0, "3 is what I have")),
	}
	got := Fabrications[float64](events, [2][]float64{{3}, nil})
	if want := [2]int{0, 2}; got != want {
		t.Errorf("got %v, want %v", got, want)
	}
}
