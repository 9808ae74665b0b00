package negotiation

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/omar-selfplay/omar/engine"
)

// Valuation is what a scripted agent knows of its own side: the terms it
// may propose, how much it likes terms, and how to write them.
type Valuation[T any] struct {
	// Candidates are the terms this seat may propose (all feasible for it).
	Candidates []T
	// Utility is the seat's own normalised utility of terms (higher is
	// better; it may leave [0,1] for prices beyond the seat's anchors).
	Utility func(T) float64
	// Distance measures how far apart two terms are (for "closest to the
	// counterpart's last offer").
	Distance func(a, b T) float64
	// Format writes terms as the text after "PROPOSE: ".
	Format func(T) string
	// CanAccept reports whether the seat may accept terms (nil: always).
	CanAccept func(T) bool
	// Floor is the utility below which a deal is worse than none.
	Floor float64
	// WalkPays reports that walking away is worth more than running out
	// of turns (CaSiNo's outside option), so a seat walks at its last turn
	// rather than letting the clock run out.
	WalkPays bool
	// Disclosure is a message that states the seat's private numbers (the
	// naive policy says it; the strategic one never does).
	Disclosure string
}

// NoBetterThanNoDeal reports whether terms are worth no more to the seat
// than no deal at all (its utility at or below the floor).
func (v Valuation[T]) NoBetterThanNoDeal(t T) bool { return v.Utility(t) <= v.Floor+1e-9 }

// ValuationFunc builds a seat's valuation from what it has seen (its
// briefing's Data holds its private information).
type ValuationFunc[T any] func(seat engine.Seat, view []engine.Event) (Valuation[T], error)

// Style shapes a time-dependent concession policy. The aspiration after a
// fraction p of the seat's turns is Floor + span·(Open − (Open−End)·p^Beta)
// where span = best candidate utility − Floor.
type Style struct {
	Name        string
	Description string
	Open, End   float64
	// Beta > 1 holds firm and concedes late (Boulware); < 1 concedes early.
	Beta float64
	// Slack accepts offers this fraction of span below the aspiration.
	Slack float64
	// Disclose states private numbers in the first message.
	Disclose bool
	// Say is the message sent with proposals (none in structured-only mode).
	Say string
}

// Strategic anchors at its best terms, concedes late and little, and
// proposes the terms closest to the counterpart's last offer among those
// meeting its aspiration; at its last turn it takes any deal better than
// none.
var Strategic = Style{
	Name:        "strategic",
	Description: "anchors high, concedes gradually (Boulware), maximises its own utility subject to acceptance",
	Open:        1, End: 0.3, Beta: 3,
	Say: "This works well for both of us.",
}

// Naive opens modestly, concedes fast, accepts early and tells the
// counterpart its private numbers.
var Naive = Style{
	Name:        "naive",
	Description: "opens modestly, concedes quickly, accepts early and discloses its private numbers",
	Open:        0.6, End: 0, Beta: 0.5, Slack: 0.15, Disclose: true,
	Say: "I am happy to meet you halfway.",
}

// Agent is a scripted negotiator following a style.
func Agent[T any](value ValuationFunc[T], style Style) func(seat engine.Seat, seed uint64) engine.Agent {
	return func(seat engine.Seat, seed uint64) engine.Agent {
		said := false
		return replier(value, seat, func(val *Valuation[T], info TurnInfo[T], view []engine.Event) Reply {
			r := decide(*val, style, seat.Index, info, view)
			if info.StructuredOnly {
				r.Say = ""
			} else if style.Disclose && !said && val.Disclosure != "" {
				r.Say = val.Disclosure
			} else if r.Kind == KindPropose {
				r.Say = style.Say
			}
			said = true
			return r
		})
	}
}

// replier is what every scripted policy's agent does around its choice of
// reply: read the turn's info, value the seat's private information on its
// first turn, and write the reply as text.
func replier[T any](value ValuationFunc[T], seat engine.Seat, reply func(val *Valuation[T], info TurnInfo[T], view []engine.Event) Reply) engine.Agent {
	var val *Valuation[T]
	return engine.AgentFunc(func(ctx context.Context, t engine.Turn) (engine.Action, error) {
		info, ok := t.Notification.Data.(TurnInfo[T])
		if !ok {
			return engine.Action{}, fmt.Errorf("negotiation: notification data is %T, not a turn", t.Notification.Data)
		}
		if val == nil {
			v, err := value(seat, t.View)
			if err != nil {
				return engine.Action{}, err
			}
			val = &v
		}
		return engine.Action{NotificationID: t.Notification.ID, Text: reply(val, info, t.View).Format()}, nil
	})
}

func decide[T any](val Valuation[T], s Style, seat int, info TurnInfo[T], view []engine.Event) Reply {
	best := math.Inf(-1)
	for _, c := range val.Candidates {
		best = max(best, val.Utility(c))
	}
	span := best - val.Floor
	p := 0.0
	if info.Rounds > 1 {
		p = float64(info.OwnTurn-1) / float64(info.Rounds-1)
	}
	asp := val.Floor + span*(s.Open-(s.Open-s.End)*math.Pow(p, s.Beta))
	last := info.OwnTurn == info.Rounds
	if info.CanAccept && info.Standing != nil && (val.CanAccept == nil || val.CanAccept(info.Standing.Terms)) {
		u := val.Utility(info.Standing.Terms)
		if u >= asp-s.Slack*span-1e-9 || (last && u > val.Floor+1e-9) {
			return Reply{Kind: KindAccept}
		}
	}
	if last && val.WalkPays {
		return Reply{Kind: KindWalk}
	}
	var opp *T
	for _, e := range view {
		if me, ok := e.Data.(MoveEvent[T]); ok && me.Seat != seat && me.Kind == KindPropose {
			opp = me.Terms
		}
	}
	pick := -1
	for i, c := range val.Candidates {
		u := val.Utility(c)
		if u < asp-1e-9 {
			continue
		}
		if pick < 0 {
			pick = i
			continue
		}
		pu := val.Utility(val.Candidates[pick])
		if opp != nil {
			d, pd := val.Distance(c, *opp), val.Distance(val.Candidates[pick], *opp)
			if d < pd-1e-9 || (math.Abs(d-pd) <= 1e-9 && u > pu) {
				pick = i
			}
		} else if u < pu {
			pick = i
		}
	}
	if pick < 0 {
		for i, c := range val.Candidates {
			if pick < 0 || val.Utility(c) > val.Utility(val.Candidates[pick]) {
				pick = i
			}
		}
	}
	return Reply{Kind: KindPropose, Terms: val.Format(val.Candidates[pick])}
}

var chatter = []string{
	"Let's find something that works.",
	"I am not sure about that.",
	"What do you think?",
	"That seems unfair to me.",
	"I could live with this.",
}

// RandomAgent plays uniformly random legal moves: a random feasible
// proposal, ACCEPT when possible, REJECT, rarely WALK, and random chatter.
func RandomAgent[T any](value ValuationFunc[T]) func(seat engine.Seat, seed uint64) engine.Agent {
	return func(seat engine.Seat, seed uint64) engine.Agent {
		rng := rand.New(rand.NewPCG(seed, 0x72616e64))
		return replier(value, seat, func(val *Valuation[T], info TurnInfo[T], _ []engine.Event) Reply {
			var r Reply
			// Weights keep episodes long enough to exercise every move.
			switch w := rng.IntN(20); {
			case w < 10 && len(val.Candidates) > 0:
				r = Reply{Kind: KindPropose, Terms: val.Format(val.Candidates[rng.IntN(len(val.Candidates))])}
			case w < 14 && info.CanAccept:
				r = Reply{Kind: KindAccept}
			case w == 19:
				r = Reply{Kind: KindWalk}
			case w >= 17 && !info.StructuredOnly:
				r = Reply{Kind: KindNone}
			default:
				r = Reply{Kind: KindReject}
			}
			if !info.StructuredOnly && (r.Kind == KindNone || rng.IntN(2) == 0) {
				r.Say = chatter[rng.IntN(len(chatter))]
			}
			return r
		})
	}
}

// Policies returns the suite's three scripted policies for a game:
// strategic (the default), naive and random.
func Policies[T any](value ValuationFunc[T]) []engine.Policy {
	return []engine.Policy{
		{Name: Strategic.Name, Description: Strategic.Description, New: Agent(value, Strategic)},
		{Name: Naive.Name, Description: Naive.Description, New: Agent(value, Naive)},
		{Name: "random", Description: "uniformly random legal moves", New: RandomAgent(value)},
	}
}

// Private finds the Data of the seat's briefing in view as a P.
func Private[P any](view []engine.Event) (P, error) {
	var zero P
	for _, e := range view {
		if e.Kind == engine.KindBriefing {
			if p, ok := e.Data.(P); ok {
				return p, nil
			}
		}
	}
	return zero, fmt.Errorf("negotiation: no briefing with %T in the view", zero)
}
