package selfplay

import (
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/omar-selfplay/omar/games/negotiation"
)

// The ANTICIPATE line of a theory-of-mind trace predicts the counterpart's
// next move. It is measured, never rewarded: a seat's next-action
// accuracy is the mean over its traced turns that the counterpart answers
// with an accepted move later in the episode; the other turns (the last
// ones, or those the counterpart only defaulted after) are not scored.

// AnticipateScore scores an ANTICIPATE line against actual, the move text
// the engine accepted from the counterpart next. exact is 1 when the
// line names the same move, graded a partial agreement in [0, 1]; ok is
// false when the line does not read as a move (both scores are 0 then).
//
// Where actual is a negotiation move (negotiation.ParseReply: PROPOSE,
// ACCEPT, REJECT, WALK or a message alone) the line is read by the same
// parser, or else from its first upper-case move keyword, so "they will
// ACCEPT" reads as ACCEPT while lower-case prose ("they may accept") is
// no move. Messages are ignored: the move is its kind and terms.
//
//   - Another kind scores 0; the same kind without terms scores 1.
//   - Price proposals ("price=<amount>" or a bare amount): exact when the
//     prices are equal to the cent; graded max(0, 1 − |anticipated −
//     actual| / scale), scale the public listing or asking price (the
//     engine.Preferences Scale of the scenario) or, where the scenario
//     names none, the actual price.
//   - Term proposals ("book=1 hat=2 ball=0", "salary=80000 …"): graded is
//     the share of actual's terms the line gives the same value (numbers
//     compared as numbers, words case-blind), exact when every term
//     matches and the line adds none.
//
// Other games' moves are compared as text (case and spacing ignored);
// every line reads as a move there.
func AnticipateScore(line, actual string, scale float64) (exact, graded float64, ok bool) {
	act, err := negotiation.ParseReply(actual, false)
	if err != nil {
		if normalMove(line) == normalMove(actual) {
			return 1, 1, true
		}
		return 0, 0, true
	}
	ant, ok := readAnticipated(line)
	if !ok {
		return 0, 0, false
	}
	if ant.Kind != act.Kind {
		return 0, 0, true
	}
	if act.Kind != negotiation.KindPropose {
		return 1, 1, true
	}
	if want, ok := proposedPrice(act.Terms); ok {
		got, ok := proposedPrice(ant.Terms)
		if !ok {
			return 0, 0, true
		}
		if scale <= 0 {
			scale = want
		}
		return b2f(got == want), max(0, 1-math.Abs(got-want)/scale), true
	}
	want, got := negotiation.ReadTerms(act.Terms), negotiation.ReadTerms(ant.Terms)
	if len(want) == 0 {
		e := b2f(normalMove(ant.Terms) == normalMove(act.Terms))
		return e, e, true
	}
	same := 0
	for k, v := range want {
		if g, has := got[k]; has && sameTerm(g, v) {
			same++
		}
	}
	return b2f(same == len(want) && len(got) == len(want)), float64(same) / float64(len(want)), true
}

// moveKeyword finds a move keyword inside prose; upper case only, since
// the move format writes them so and prose uses the words otherwise.
var moveKeyword = regexp.MustCompile(`\b(PROPOSE|ACCEPT|REJECT|WALK)\b`)

// readAnticipated reads an ANTICIPATE line as a negotiation move.
func readAnticipated(line string) (negotiation.Reply, bool) {
	if r, err := negotiation.ParseReply(line, false); err == nil {
		return r, true
	}
	loc := moveKeyword.FindStringSubmatchIndex(line)
	if loc == nil {
		return negotiation.Reply{}, false
	}
	kind := negotiation.Kind(strings.ToLower(line[loc[2]:loc[3]]))
	if kind != negotiation.KindPropose {
		return negotiation.Reply{Kind: kind}, true
	}
	terms := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line[loc[1]:]), ":"))
	if terms == "" {
		return negotiation.Reply{}, false
	}
	return negotiation.Reply{Kind: kind, Terms: terms}, true
}

// proposedPrice reads price terms as the price games do
// (negotiation.PriceRules): "price=<amount>" or a bare amount.
func proposedPrice(terms string) (float64, bool) {
	if !strings.Contains(terms, "=") {
		p, err := negotiation.ParsePrice(terms)
		return p, err == nil
	}
	kv := negotiation.ReadTerms(terms)
	v, has := kv["price"]
	if !has || len(kv) != 1 {
		return 0, false
	}
	p, err := negotiation.ParsePrice(v)
	return p, err == nil
}

// sameTerm compares two term values: as numbers where both are, else as
// words.
func sameTerm(a, b string) bool {
	x, errA := strconv.ParseFloat(a, 64)
	y, errB := strconv.ParseFloat(b, 64)
	if errA == nil && errB == nil {
		return x == y
	}
	return strings.EqualFold(a, b)
}

// normalMove is s with case and runs of spaces ignored.
func normalMove(s string) string { return strings.ToLower(strings.Join(strings.Fields(s), " ")) }

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
