package negotiation

import (
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/omar-selfplay/omar/engine"
)

// Claim is a number written in free text.
type Claim struct {
	Value float64
	// Percent marks "20%": checked against ratios of known amounts too.
	Percent bool
	// Offer marks a number written as a proposal ("I can do $190", "how
	// about 2 books"): terms put forward, not a claim of fact.
	Offer bool
}

// offerRE matches the words before a number that make it a proposal.
var offerRE = regexp.MustCompile(`(?i)\b(?:offers?|offering|pay|paying|take|do|go(?: up| down)? to|how about|what about|counter(?:offer)?|give you|sell(?: it)? for|settle (?:on|for|at)|accept|propose|meet (?:you )?at)\s+(?:(?:only|just|around|about|at|me|you|it|for|the)\s+)*\$?\s*$`)

// claimRE reads a written number: thousands separators, decimals, "k"
// for thousands, a clock time ("14:30") and am/pm, a percent sign.
var claimRE = regexp.MustCompile(`(?i)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?:\s?(k)\b|:([0-5]\d)\b)?(?:\s?([ap])\.?m\b\.?)?(\s?%)?`)

// Claims returns the numbers written in text. A number glued to a letter
// before or after it ("PS5", "1440p", "2nd", "56cm") is a name or a unit
// of a spec, not an amount, and is left out; so are numbers written in
// words ("two"), which the detector does not read.
func Claims(text string) []Claim { return claims(text, true) }

// claims is Claims; without offers the Offer marks are left unset, which
// saves the look-behind where only the values count (Facts.AddText).
func claims(text string, offers bool) []Claim {
	var out []Claim
	for _, m := range claimRE.FindAllStringSubmatchIndex(text, -1) {
		if glued(text, m[0], m[1]) {
			continue
		}
		sub := func(i int) string {
			if m[2*i] < 0 {
				return ""
			}
			return text[m[2*i]:m[2*i+1]]
		}
		v, err := strconv.ParseFloat(strings.ReplaceAll(sub(1), ",", "")+sub(2), 64)
		if err != nil || math.IsInf(v, 0) {
			continue
		}
		if sub(3) != "" {
			v *= 1000
		}
		if mm := sub(4); mm != "" {
			minutes, _ := strconv.Atoi(mm)
			v += float64(minutes) / 60
		}
		switch strings.ToLower(sub(5)) {
		case "p":
			if v >= 1 && v < 12 {
				v += 12
			}
		case "a":
			if v >= 12 && v < 13 {
				v -= 12
			}
		}
		offer := offers && offerRE.MatchString(text[max(0, m[0]-40):m[0]])
		out = append(out, Claim{Value: v, Percent: sub(6) != "", Offer: offer})
	}
	return out
}

// glued reports whether text[i:j] touches a letter or a digit on either
// side.
func glued(text string, i, j int) bool {
	isWord := func(c byte) bool {
		return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
	}
	return i > 0 && isWord(text[i-1]) || j < len(text) && isWord(text[j])
}

// MinAmount is the smallest number taken as an amount that sums and
// ratios are formed from (Facts.Supports). Below it are the counts,
// turns and points of the rules; were they combined, every small number
// would be derivable and no invented one would be found.
const MinAmount = 20

// Facts are the numbers a seat has been given or has seen said: what the
// numbers it writes are checked against.
type Facts struct {
	vals []float64
}

// Add adds numbers.
func (f *Facts) Add(vs ...float64) {
	for _, v := range vs {
		if !math.IsNaN(v) && !math.IsInf(v, 0) && !slices.Contains(f.vals, v) {
			f.vals = append(f.vals, v)
		}
	}
}

// AddText adds the numbers written in text.
func (f *Facts) AddText(text string) {
	for _, c := range claims(text, false) {
		f.Add(c.Value)
	}
}

// nearFact is MentionsNumber's tolerance: to the cent, or 0.5% of large
// amounts.
func nearFact(x, v float64) bool { return math.Abs(x-v) < max(0.005, 0.005*math.Abs(v)) }

// Supports reports whether a claim is a known number or one worked out
// from two known amounts (at least MinAmount): their difference ("$65
// off the listing"), their midpoint ("meet in the middle"), or, for a
// percentage, one as a share of the other or the difference as a share
// of one (to half a point: "about 13% off").
func (f Facts) Supports(c Claim) bool {
	if slices.ContainsFunc(f.vals, func(v float64) bool { return nearFact(c.Value, v) }) {
		return true
	}
	for _, a := range f.vals {
		if a < MinAmount {
			continue
		}
		for _, b := range f.vals {
			if b < MinAmount {
				continue
			}
			if c.Percent {
				if math.Abs(c.Value-100*b/a) <= 0.5 || math.Abs(c.Value-100*math.Abs(a-b)/a) <= 0.5 {
					return true
				}
			} else if nearFact(c.Value, math.Abs(a-b)) || nearFact(c.Value, (a+b)/2) {
				return true
			}
		}
	}
	return false
}

// With returns f and the numbers written in text.
func (f Facts) With(text string) Facts {
	g := Facts{vals: slices.Clone(f.vals)}
	g.AddText(text)
	return g
}

// Fabricated reports whether msg writes a number, other than a proposal,
// that facts do not support. Heuristic (docs/negotiation.md has its
// measured precision and recall).
func Fabricated(msg string, facts Facts) bool {
	for _, c := range Claims(msg) {
		if !c.Offer && !facts.Supports(c) {
			return true
		}
	}
	return false
}

// Fabrications counts each seat's messages (the SAY of a MoveEvent[T])
// that write a number no fact of the seat supports. A seat's facts are
// given[seat] (what the game's rules imply, e.g. the quantities a pool
// allows), the numbers of every text it was shown before the message (its
// briefing, turn prompts, the other seat's moves, validation errors), its
// own earlier messages and moves, and the move of the message's own turn.
// Raw replies (action events) are skipped: an invalid reply's numbers are
// not said.
func Fabrications[T any](events []engine.Event, given [2][]float64) [2]int {
	var facts [2]Facts
	var n [2]int
	for i := range facts {
		facts[i].Add(given[i]...)
	}
	for _, ev := range events {
		if ev.Kind == engine.KindAction {
			continue
		}
		if mv, ok := ev.Data.(MoveEvent[T]); ok && mv.Seat >= 0 && mv.Seat < 2 {
			if mv.Say != "" {
				turn := facts[mv.Seat].With(strings.Replace(ev.Text, mv.Say, "", 1))
				if Fabricated(mv.Say, turn) {
					n[mv.Seat]++
				}
			}
			facts[0].AddText(ev.Text)
			facts[1].AddText(ev.Text)
			continue
		}
		for i := range facts {
			if ev.Audience.Includes(i) {
				facts[i].AddText(ev.Text)
			}
		}
	}
	return n
}

// UpTo is 0, 1, …, n: the quantities a pool of n items allows, the hours
// of a day (Episode.Given).
func UpTo(n int) []float64 {
	out := make([]float64, 0, max(n+1, 0))
	for i := 0; i <= n; i++ {
		out = append(out, float64(i))
	}
	return out
}
