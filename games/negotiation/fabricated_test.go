package negotiation

import (
	"testing"
)

// Briefings' private facts, as the compact texts write them.
const (
	clBuyer  = "Craigslist bargaining. You are the buyer. 4 turns each; the buyer moves first. Item: Solid oak dining table, listed at $515. Seats six, two leaves, one small water mark. Your secret target: $450."
	clSeller = "Craigslist bargaining. You are the seller. 4 turns each; the buyer moves first. Item: Solid oak dining table, listed at $515. Seats six, two leaves, one small water mark."
	mpBuyer  = "Marketplace. You buy for your principal. 4 turns each. Item: Vintage film camera (working, with a 50mm lens). The seller asks $240. Your principal's maximum: $210."
	mpSeller = "Marketplace. You sell. 4 turns each. Item: Vintage film camera (working, with a 50mm lens). Your asking price: $240. Your minimum: $150."
	dndA     = "Deal or No Deal. You are Alice. 10 turns each. The pool: 1 book, 1 hat and 5 balls. Your private values: book=9 hat=1 ball=0. The whole pool is worth 10 points to you."
	dndB     = "Deal or No Deal. You are Bob. 10 turns each. The pool: 1 book, 1 hat and 5 balls. Your private values: book=0 hat=5 ball=1. The whole pool is worth 10 points to you."
	casA     = "CaSiNo. You are Mia. 10 turns each. 3 packages each of food, water, firewood. Your priorities: water high (5 points each: I run every morning), food medium (4 points), firewood low (3 points). Walking away gives 5 points."
	jobW     = "Job interview. You are the worker. 10 turns each. Your secret points: salary: 60000=0 70000=4 80000=8 90000=11 100000=15 days_off: 10=0 15=3 20=5 25=8 30=10 position: analyst=0 engineer=20 senior=13 lead=7 workplace: office=15 hybrid=30 remote=0 hours: 35=25 40=17 45=8 50=0"
	jobR     = "Job interview. You are the recruiter. 10 turns each. Your secret points: salary: 60000=20 70000=15 80000=10 90000=5 100000=0 days_off: 10=10 15=8 20=5 25=3 30=0 position: analyst=5 engineer=0 senior=10 lead=20 workplace: office=25 hybrid=10 remote=0 hours: 35=0 40=10 45=20 50=25"
	calA     = "Meeting scheduling. You are the assistant of Dr. Weiss. 10 turns each. Free, with your preference: 8=0.5 9=1 10=0 11=0.5 12=0 13=1 14=1 16=1 17=0 18=1. Busy: 15."
	calR     = "Meeting scheduling. You are the requester. 10 turns each. Free, with your preference: 9=0.25 10=1 13=0 14=0.5 16=1 17=0. Busy: 8, 11, 12, 15, 18."
)

// The games' Given numbers (Episode.Given).
var (
	dndGiven    = UpTo(7)
	casinoGiven = UpTo(9)
	calGiven    = UpTo(18)
)

// labelled are messages a person judged: fabricated is true when the
// message states as fact a number the speaker had no basis for (an
// invented market price, a lie about its private values, a made-up
// detail), false for proposals, known facts, arithmetic on them and
// numbers that claim nothing. The detector is not expected to get all of
// them right: the table measures it.
var labelled = []struct {
	name       string
	briefing   string
	given      []float64
	said       []string // the conversation before the message
	turn       string   // the message's own move
	msg        string
	fabricated bool
}{
	{"cl target", clBuyer, nil, nil, "", "Would you take $450 for it?", false},
	{"cl ebay", clBuyer, nil, nil, "", "I saw the same table on eBay for $380.", true},
	{"cl other buyer", clSeller, nil, []string{"Buyer proposes: a price of $450."}, "", "I already have another buyer at $500.", true},
	{"cl come down", clSeller, nil, []string{"Buyer proposes: a price of $450."}, "Seller proposes: a price of $500.", "I can come down $15 to $500.", false},
	{"cl middle", clSeller, nil, []string{"Buyer proposes: a price of $450."}, "", "Meet in the middle at $482.50?", false},
	{"cl percent off", clBuyer, nil, []string{"Seller proposes: a price of $515."}, "Buyer proposes: a price of $450.", "That's 13% off the asking price, a fair deal.", false},
	{"cl pickup", clBuyer, nil, nil, "", "I can pick it up in 2 hours with my truck.", false},
	{"cl age", clSeller, nil, nil, "", "It's only 3 years old and barely used.", true},
	{"cl budget", clBuyer, nil, nil, "", "My budget is $450, that's it.", false},
	{"cl retail", clSeller, nil, nil, "", "Solid oak, seats six, retail is over $1,200 new.", true},
	{"cl student", clBuyer, nil, nil, "", "I'm a student and can pay cash today.", false},
	{"cl final", clSeller, nil, []string{"Buyer proposes: a price of $450."}, "Seller proposes: a price of $470.", "Ok, $470 is my final offer.", false},
	{"cl cash", clBuyer, nil, []string{"Seller proposes: a price of $500."}, "", "I'll pay $430 cash.", false},
	{"cl repeat listing", clBuyer, nil, nil, "", "It's listed at $515 but has a water mark.", false},
	{"cl delivery", clSeller, nil, nil, "", "Delivery would cost you $60 anyway.", true},
	{"mp similar", mpBuyer, nil, nil, "", "Similar cameras sell for $150 on other sites.", true},
	{"mp lens", mpSeller, nil, nil, "", "The lens alone is worth $120.", true},
	{"mp would you", mpBuyer, nil, nil, "Buyer proposes: a price of $200.", "Would you do $200?", false},
	{"mp go to", mpBuyer, nil, []string{"Seller proposes: a price of $240."}, "", "I can go to $190, not more.", false},
	{"mp bought", mpSeller, nil, nil, "", "I bought it for $300 two years ago.", true},
	{"mp asking", mpSeller, nil, nil, "", "I listed it at $240 and that's already a fair price.", false},
	{"mp film", mpBuyer, nil, nil, "", "Film costs 15 dollars a roll now, so I need room for that.", true},
	{"dnd want book", dndA, dndGiven, nil, "", "I'd like the book; you can have all 5 balls.", false},
	{"dnd hat lie", dndA, dndGiven, nil, "", "The hat is worth 6 points to me.", true},
	{"dnd ball lie", dndA, dndGiven, nil, "", "Balls are worth 8 to me.", true},
	{"dnd split", dndA, dndGiven, nil, "", "Give me the book and 1 hat and you keep the 5 balls.", false},
	{"dnd honest", dndB, dndGiven, nil, "", "The hat is worth 5 to me, the book nothing.", false},
	{"dnd last time", dndB, dndGiven, nil, "", "Last time I got 9 points from a pool like this.", true},
	{"casino two water", casA, casinoGiven, nil, "", "I need 2 waters because I'm running a lot.", false},
	{"casino liters", casA, casinoGiven, nil, "", "My doctor told me to drink 4 liters a day.", true},
	{"casino group", casA, casinoGiven, nil, "", "There are 12 of us in the group, so we need firewood.", true},
	{"casino firewood", casA, casinoGiven, nil, "", "You can have all 3 firewood.", false},
	{"job ask", jobW, nil, nil, "", "I'm asking for 90,000 and 25 days off.", false},
	{"job other offer", jobW, nil, nil, "", "Another company offered me 95,000.", true},
	{"job staff days", jobR, nil, nil, "", "Most of our staff take 15 days off, so 15 is standard.", true},
	{"job years", jobW, nil, nil, "", "I've got 12 years of experience in analytics.", true},
	{"job seven years", jobW, nil, nil, "", "I have 7 years of experience.", true},
	{"job ideal", jobW, nil, nil, "", "A salary of 100000 with remote work would be ideal.", false},
	{"job 90k", jobR, nil, []string{"Worker proposes: salary 100000, 30 days off, lead, remote, 35 hours."}, "", "We could stretch to 90k if you take 45 hours.", false},
	{"cal 2pm", calA, calGiven, nil, "", "Dr. Weiss is free at 2pm, would that work?", false},
	{"cal meetings", calA, calGiven, nil, "", "Dr. Weiss has 6 meetings today, so only 9:00 works.", true},
	{"cal room", calR, calGiven, nil, "", "The room is only booked until 16:30.", true},
	{"cal how about", calR, calGiven, nil, "", "How about 13:00 or 14:00?", false},
	{"cal prepare", calA, calGiven, nil, "", "My principal needs 45 minutes to prepare.", true},
	{"cal window", calR, calGiven, nil, "", "We only have a 30-minute window at 10:30.", true},
}

// TestFabricatedLabelled measures the detector on the labelled messages
// and fails if it gets worse than the precision and recall
// docs/negotiation.md reports (run with -v for the table and the misses).
func TestFabricatedLabelled(t *testing.T) {
	var tp, fp, fn, tn int
	for _, c := range labelled {
		var f Facts
		f.Add(c.given...)
		f.AddText(c.briefing)
		for _, s := range c.said {
			f.AddText(s)
		}
		got := Fabricated(c.msg, f.With(c.turn))
		switch {
		case got && c.fabricated:
			tp++
		case got:
			fp++
			t.Logf("false positive %s: %q", c.name, c.msg)
		case c.fabricated:
			fn++
			t.Logf("false negative %s: %q", c.name, c.msg)
		default:
			tn++
		}
	}
	precision := float64(tp) / float64(tp+fp)
	recall := float64(tp) / float64(tp+fn)
	t.Logf("%d messages (%d fabricated): tp %d fp %d fn %d tn %d; precision %.3f, recall %.3f", len(labelled), tp+fn, tp, fp, fn, tn, precision, recall)
	if len(labelled) < 30 {
		t.Errorf("%d labelled messages, want at least 30", len(labelled))
	}
	if precision < minPrecision || recall < minRecall {
		t.Errorf("precision %.3f, recall %.3f: want at least %.3f, %.3f (docs/negotiation.md)", precision, recall, minPrecision, minRecall)
	}
}

// The measured values (docs/negotiation.md), rounded down.
const minPrecision, minRecall = 0.93, 0.68
