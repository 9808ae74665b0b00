package negotiation

import (
	"context"
	"fmt"
	"strings"

	"github.com/omar-selfplay/omar/engine"
)

// Rules are what a game adds to the alternating-offers loop: how to read,
// check and describe its terms T. Seats are 0 and 1.
type Rules[T any] interface {
	// ParseTerms reads the text after "PROPOSE:" written by proposer and
	// checks that the terms are feasible for it. Terms are always written
	// from the proposer's point of view.
	ParseTerms(proposer int, text string) (T, error)
	// CheckAccept says why acceptor may not accept t (nil when it may).
	CheckAccept(acceptor int, t T) error
	// Describe renders t, proposed by proposer, for both seats to read.
	Describe(proposer int, t T) string
	// TermsHelp is the PROPOSE line a seat writes, e.g.
	// "PROPOSE: book=<n> hat=<n> ball=<n>".
	TermsHelp(seat int) string
	// TermsGrammar is the GBNF expression of the terms (and extra rules).
	TermsGrammar(seat int) (terms, extra string)
}

// Lister is implemented by Rules whose feasible proposals are few enough to
// list. In structured-only mode the loop then fills each notification's
// Legal with every valid reply, so a tiny model can score the options
// instead of writing one.
type Lister interface {
	// Proposals returns every feasible PROPOSE line of seat.
	Proposals(seat int) []string
}

// MaxLegal bounds the Legal list; larger action sets are left to the
// grammar.
const MaxLegal = 256

// Options are the loop's parameters.
type Options struct {
	// Rounds is how many turns each seat gets; the episode ends without a
	// deal after 2·Rounds turns.
	Rounds int
	// StructuredOnly refuses SAY lines (for tiny models).
	StructuredOnly bool
	// Compact writes the short texts (Params.Compact).
	Compact bool
	// Hints appraises standing offers in the compact texts (Params.Hints;
	// Play's appraise does it).
	Hints bool
	// Remind, with Hints, opens every compact turn line of a seat: the
	// numbers its moves are written from (Craigslist's listing price), so
	// a small model copies them from the line it replies to rather than
	// from the briefing. Empty: nothing.
	Remind [2]string
}

// Offer is a standing proposal.
type Offer[T any] struct {
	Proposer int    `json:"proposer"`
	Terms    T      `json:"terms"`
	Text     string `json:"text"`
	Turn     int    `json:"turn"`
}

// TurnInfo is the Data of every turn's notification: enough for a scripted
// agent to act without parsing text.
type TurnInfo[T any] struct {
	Turn   int `json:"turn"`   // 1-based over the whole episode
	Round  int `json:"round"`  // 1-based
	Rounds int `json:"rounds"` // turns per seat
	// OwnTurn counts this seat's turns from 1; OwnTurn == Rounds is its last.
	OwnTurn int `json:"own_turn"`
	// Final reports the last turn of the episode: no reply will follow.
	Final          bool      `json:"final"`
	Standing       *Offer[T] `json:"standing,omitempty"`
	CanAccept      bool      `json:"can_accept"`
	StructuredOnly bool      `json:"structured_only"`
}

// MoveEvent is the Data of the public observation of a turn.
type MoveEvent[T any] struct {
	Seat  int    `json:"seat"`
	Turn  int    `json:"turn"`
	Kind  Kind   `json:"kind"`
	Say   string `json:"say,omitempty"`
	Terms *T     `json:"terms,omitempty"`
}

// Status is how an episode ended.
type Status string

// The endings. StatusNoDeal is the turn limit without agreement (a
// timeout: reward 0).
const (
	StatusDeal   Status = "deal"
	StatusWalk   Status = "walk_away"
	StatusNoDeal Status = "no_deal"
)

// Result is what the loop saw.
type Result[T any] struct {
	Status Status
	Deal   *Offer[T]
	Walker int // seat that walked away, or -1
	Turns  int
	Rounds int
	// Openings holds each seat's first proposal (nil when it made none).
	Openings  [2]*T
	Said      [2][]string
	Proposals [2]int
	// Offered are each seat's proposals in order; BelowFloor counts those
	// worth no more to the proposer than no deal (by the seat's own
	// valuation: Episode.Run counts them, Play leaves them 0).
	Offered    [2][]T
	BelowFloor [2]int
	// Fabricated counts each seat's messages with a number no fact it
	// had supports (Fabrications); Episode.Run counts them and sets
	// ClaimsRead, Play leaves both zero.
	Fabricated [2]int
	ClaimsRead bool
	Invalid    [2]int
	Defaulted  [2]int
}

// Move is a validated turn: the reply with its terms read.
type Move[T any] struct {
	Reply
	Terms T
}

// Play runs the alternating-offers loop: seat first moves, then the seats
// alternate. A PROPOSE replaces the standing offer; ACCEPT takes the
// counterpart's standing offer and ends the episode with a deal; REJECT
// withdraws the counterpart's standing offer (without one it is a pass);
// WALK ends it with the outside option; a SAY-only turn leaves everything
// as it is. The inert default after a timeout or spent retries is REJECT.
// Briefings must have been sent. With o.Compact and o.Hints, appraise
// writes what the other seat's standing offer is worth to the seat whose
// turn it is (nil: no appraisal).
func Play[T any](ctx context.Context, rt *engine.Runtime, rules Rules[T], o Options, first int, appraise func(seat int, t T) string) (Result[T], error) {
	tb := &table[T]{rt: rt, rules: rules, o: o, appraise: appraise, seats: rt.Seats(), res: Result[T]{Walker: -1, Status: StatusNoDeal}}
	total := 2 * o.Rounds
	for turn := 0; turn < total; turn++ {
		seat := (first + turn) % 2
		round := turn/2 + 1
		if turn%2 == 0 && !o.Compact {
			rt.Phase(fmt.Sprintf("Round %d of %d.", round, o.Rounds), map[string]int{"round": round})
		}
		tb.res.Rounds = round
		ans, err := rt.Ask(ctx, tb.question(turn, seat))
		if err != nil {
			return tb.res, err
		}
		tb.res.Turns = turn + 1
		tb.res.Invalid[seat] += ans.Invalid
		if ans.Defaulted {
			tb.res.Defaulted[seat]++
		}
		if tb.move(turn, seat, ans.Move.(Move[T])) {
			return tb.res, nil
		}
	}
	rt.Phase("The turn limit is reached without a deal.", map[string]string{"status": string(StatusNoDeal)})
	return tb.res, nil
}

// table is Play's state between turns: the standing offer and the result
// so far.
type table[T any] struct {
	rt       *engine.Runtime
	rules    Rules[T]
	o        Options
	appraise func(seat int, t T) string
	seats    []engine.Seat
	standing *Offer[T]
	res      Result[T]
}

// question is what the seat moving at turn (0-based) is asked.
func (tb *table[T]) question(turn, seat int) engine.Question {
	o, rules, standing := tb.o, tb.rules, tb.standing
	other := 1 - seat
	canAccept := standing != nil && standing.Proposer == other
	if canAccept && rules.CheckAccept(seat, standing.Terms) != nil {
		canAccept = false
	}
	info := TurnInfo[T]{
		Turn: turn + 1, Round: turn/2 + 1, Rounds: o.Rounds, OwnTurn: turn/2 + 1, Final: turn == 2*o.Rounds-1,
		Standing: standing, CanAccept: canAccept, StructuredOnly: o.StructuredOnly,
	}
	var text string
	if o.Compact {
		worth := ""
		if o.Hints && tb.appraise != nil && canAccept {
			worth = tb.appraise(seat, standing.Terms)
		}
		remind := ""
		if o.Hints {
			remind = o.Remind[seat]
		}
		text = compactTurnText(tb.seats, seat, info, remind, worth)
	} else {
		text = turnText(tb.seats, rules, seat, info)
	}
	terms, extra := rules.TermsGrammar(seat)
	var legal []string
	if l, ok := rules.(Lister); ok && o.StructuredOnly {
		if props := l.Proposals(seat); len(props)+3 <= MaxLegal {
			legal = append(legal, props...)
			if canAccept {
				legal = append(legal, "ACCEPT")
			}
			legal = append(legal, "REJECT", "WALK")
		}
	}
	return engine.Question{
		Legal:   legal,
		Seat:    seat,
		Text:    text,
		Grammar: Grammar(terms, extra, canAccept, o.StructuredOnly),
		Data:    info,
		Default: "REJECT",
		Parse:   tb.parser(seat, standing),
	}
}

// parser reads seat's reply into a Move[T], against the offer st standing
// when the question was asked.
func (tb *table[T]) parser(seat int, st *Offer[T]) func(string) (any, error) {
	rules, seats, structuredOnly := tb.rules, tb.seats, tb.o.StructuredOnly
	return func(text string) (any, error) {
		r, err := ParseReply(text, structuredOnly)
		if err != nil {
			return nil, err
		}
		mv := Move[T]{Reply: r}
		switch r.Kind {
		case KindPropose:
			t, err := rules.ParseTerms(seat, r.Terms)
			if err != nil {
				return nil, fmt.Errorf("PROPOSE: %w", err)
			}
			mv.Terms = t
		case KindAccept:
			if st == nil || st.Proposer != seat^1 {
				return nil, fmt.Errorf("there is no standing offer from %s to accept: PROPOSE terms instead", seats[seat^1].Name)
			}
			if err := rules.CheckAccept(seat, st.Terms); err != nil {
				return nil, fmt.Errorf("you cannot accept: %w", err)
			}
		}
		return mv, nil
	}
}

// move plays seat's move at turn: it updates the standing offer and the
// result, tells the seats, and reports whether the episode is over (a
// deal or a walk-away).
func (tb *table[T]) move(turn, seat int, mv Move[T]) bool {
	rt, name, other := tb.rt, tb.seats[seat].Name, 1-seat
	ev := MoveEvent[T]{Seat: seat, Turn: turn + 1, Kind: mv.Kind, Say: mv.Say}
	// lines are for everyone; short (Options.Compact) for the other
	// seat alone, whose offer "your offer" is.
	var lines, short []string
	if mv.Say != "" {
		tb.res.Said[seat] = append(tb.res.Said[seat], mv.Say)
		lines = append(lines, fmt.Sprintf("%s says: %s", name, mv.Say))
		short = append(short, lines[0])
	}
	if line, shortLine := tb.apply(turn, seat, mv, &ev); line != "" {
		lines, short = append(lines, line), append(short, shortLine)
	}
	aud := engine.Everyone()
	if tb.o.Compact {
		// The mover's reply is already in its own conversation.
		aud, lines = engine.Only(other), short
	}
	rt.Broadcast(aud, seat, strings.Join(lines, "\n"), ev)
	switch mv.Kind {
	case KindAccept:
		tb.res.Status, tb.res.Deal = StatusDeal, tb.standing
		rt.Phase("Deal: "+tb.standing.Text, map[string]string{"status": string(StatusDeal)})
		return true
	case KindWalk:
		tb.res.Status, tb.res.Walker = StatusWalk, seat
		rt.Phase(name+" walked away: no deal.", map[string]string{"status": string(StatusWalk)})
		return true
	}
	return false
}

// apply applies the move itself to the standing offer and the result,
// sets the event's terms, and returns the line telling everyone and the
// short one telling the other seat; a SAY-only turn has neither.
func (tb *table[T]) apply(turn, seat int, mv Move[T], ev *MoveEvent[T]) (line, short string) {
	name, otherName := tb.seats[seat].Name, tb.seats[1-seat].Name
	switch mv.Kind {
	case KindPropose:
		t := mv.Terms
		ev.Terms = &t
		tb.standing = &Offer[T]{Proposer: seat, Terms: t, Text: tb.rules.Describe(seat, t), Turn: turn + 1}
		if tb.res.Openings[seat] == nil {
			tb.res.Openings[seat] = &t
		}
		tb.res.Proposals[seat]++
		tb.res.Offered[seat] = append(tb.res.Offered[seat], t)
		line = fmt.Sprintf("%s proposes: %s", name, tb.standing.Text)
		return line, line
	case KindAccept:
		t := tb.standing.Terms
		ev.Terms = &t
		return fmt.Sprintf("%s accepts %s's offer: %s", name, otherName, tb.standing.Text), name + " accepts your offer."
	case KindReject:
		if tb.standing != nil && tb.standing.Proposer == 1-seat {
			tb.standing = nil
			return fmt.Sprintf("%s rejects %s's offer.", name, otherName), name + " rejects your offer."
		}
		return fmt.Sprintf("%s makes no offer this turn.", name), name + " makes no offer."
	case KindWalk:
		return fmt.Sprintf("%s walks away: the negotiation ends without a deal.", name), name + " walks away."
	}
	return "", ""
}

func turnText[T any](seats []engine.Seat, rules Rules[T], seat int, info TurnInfo[T]) string {
	var b strings.Builder
	// Each seat moves once per round, so the round is also its turn count.
	fmt.Fprintf(&b, "Round %d of %d: your turn.", info.Round, info.Rounds)
	if info.Final {
		b.WriteString(" This is the last turn of the negotiation: without an ACCEPT now there is no deal.")
	} else if info.OwnTurn == info.Rounds {
		b.WriteString(" This is your last turn.")
	}
	switch {
	case info.Standing == nil:
		b.WriteString("\nNo offer is on the table.")
	case info.Standing.Proposer == seat:
		fmt.Fprintf(&b, "\nYour offer is on the table: %s", info.Standing.Text)
	default:
		fmt.Fprintf(&b, "\n%s's offer is on the table: %s", seats[info.Standing.Proposer].Name, info.Standing.Text)
		if !info.CanAccept {
			b.WriteString(" (you cannot accept it)")
		}
	}
	b.WriteString("\nReply with ")
	if !info.StructuredOnly {
		b.WriteString("an optional line \"SAY: <message>\" and then ")
	}
	b.WriteString("one move: \"" + rules.TermsHelp(seat) + "\"")
	if info.CanAccept {
		b.WriteString(", \"ACCEPT\"")
	}
	b.WriteString(", \"REJECT\" or \"WALK\".")
	return b.String()
}

// compactTurnText is turnText's short form, read after the other seat's
// move: the turn count, and the standing offer only when that move did not
// just state it (after a SAY-only turn, or when the seat's own offer
// stands). The moves are the briefing's; ACCEPT is possible whenever the
// other seat's offer stands, unless this says it is not. worth, when not
// empty, is the standing offer's appraisal (Params.Hints).
func compactTurnText[T any](seats []engine.Seat, seat int, info TurnInfo[T], remind, worth string) string {
	var b strings.Builder
	if remind != "" {
		b.WriteString(remind + " ")
	}
	switch s := info.Standing; {
	case s == nil:
	case s.Proposer == seat:
		b.WriteString("Your offer stands. ")
	case s.Turn != info.Turn-1:
		fmt.Fprintf(&b, "%s's offer stands: %s ", seats[s.Proposer].Name, s.Text)
	}
	if !info.CanAccept && info.Standing != nil && info.Standing.Proposer != seat {
		b.WriteString("You cannot accept it. ")
	}
	if worth != "" {
		b.WriteString(worth + " ")
	}
	fmt.Fprintf(&b, "Turn %d/%d.", info.OwnTurn, info.Rounds)
	if info.Final {
		b.WriteString(" The last turn: ACCEPT or no deal.")
	} else if info.OwnTurn == info.Rounds {
		b.WriteString(" Your last turn.")
	}
	return b.String()
}

// CompactHead is the first lines of a compact briefing: the game, the
// seat's part, the turns and the reply format. The private facts follow
// (each game's own), last, where a small model reads them just before
// its first reply.
func CompactHead(game, part string, rounds int, first, termsHelp string, structuredOnly bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s. You are %s. %d turns each; %s moves first.\n", game, part, rounds, first)
	b.WriteString("Reply with ")
	if !structuredOnly {
		b.WriteString("an optional line SAY: <message>, then ")
	}
	fmt.Fprintf(&b, "one line: %s | ACCEPT | REJECT | WALK\n", termsHelp)
	return b.String()
}

// MoveFormat is the move-format section of a briefing.
func MoveFormat(termsHelp, termsMeaning string, structuredOnly bool) string {
	var b strings.Builder
	b.WriteString("How to reply on your turn:\n")
	if !structuredOnly {
		b.WriteString("- Optionally one line \"SAY: <your message to the other side>\".\n")
	}
	fmt.Fprintf(&b, "- One move line:\n  %s — %s\n", termsHelp, termsMeaning)
	b.WriteString("  ACCEPT — accept the other side's offer on the table; the deal is done.\n")
	b.WriteString("  REJECT — reject the other side's offer (or pass when there is none).\n")
	b.WriteString("  WALK — walk away: the negotiation ends with no deal.\n")
	if !structuredOnly {
		b.WriteString("A turn may be only a SAY line (the offer on the table stays).\n")
	} else {
		b.WriteString("Write exactly one move line and nothing else.\n")
	}
	return b.String()
}
