// Package calendar is Calendar scheduling (calendar_v1): an assistant books
// one one-hour meeting for its principal with a requester. The day has 11
// one-hour slots starting 08:00..18:00; each side privately knows which
// slots it is free and how much it likes each, v(t) ∈ {0, .25, .5, 1}.
// Only a mutually free slot can be agreed (a seat may propose only slots it
// is free, and accept only slots it is free). A meeting at t pays each side
// [v(t) − min_Z v] / [max_Z v − min_Z v] over Z, the mutually free slots
// (1 when v is flat on Z). No deal, walk-away and timeout give 0.
package calendar

import (
	"cmp"
	_ "embed"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/games/negotiation"
)

// ID is the versioned environment id.
const ID = "calendar_v1"

// First and Last are the start hours of the first and last slot.
const (
	First = 8
	Last  = 18
)

// Buckets are the preference values a slot may have.
var Buckets = []float64{0, 0.25, 0.5, 1}

var roles = [2]string{"assistant", "requester"}
var names = [2]string{"Assistant", "Requester"}

// Calendar is one side's day: the hours it is free and its preference for
// each (aligned with Free).
type Calendar struct {
	Free  []int     `yaml:"free" json:"free"`
	Prefs []float64 `yaml:"prefs" json:"prefs"`
}

// Value is the preference of a free hour (ok false when busy).
func (c Calendar) Value(h int) (float64, bool) {
	i := slices.Index(c.Free, h)
	if i < 0 {
		return 0, false
	}
	return c.Prefs[i], true
}

// Scenario is one meeting request.
type Scenario struct {
	ID        string      `yaml:"id" json:"id"`
	Meeting   string      `yaml:"meeting" json:"meeting"`
	Principal string      `yaml:"principal" json:"principal"`
	Calendars [2]Calendar `yaml:"calendars" json:"calendars"` // by seat
}

// Mutual is Z: the hours both sides are free, in order.
func (s Scenario) Mutual() []int {
	var z []int
	for _, h := range s.Calendars[0].Free {
		if slices.Contains(s.Calendars[1].Free, h) {
			z = append(z, h)
		}
	}
	return z
}

// Reward is seat's reward for a meeting at hour h (0 when h is not
// mutually free).
func (s Scenario) Reward(seat, h int) float64 {
	z := s.Mutual()
	if !slices.Contains(z, h) {
		return 0
	}
	vals := make([]float64, len(z))
	for i, t := range z {
		vals[i], _ = s.Calendars[seat].Value(t)
	}
	v, _ := s.Calendars[seat].Value(h)
	return negotiation.SlotReward(v, vals)
}

// Validate checks the calendars (sorted distinct hours in 8..18, one
// preference from the buckets per free hour) and that Z has at least two
// slots with a best and a worst one for each side.
func (s Scenario) Validate() error {
	if err := s.validCalendars(); err != nil {
		return err
	}
	z := s.Mutual()
	if len(z) < 2 {
		return fmt.Errorf("%d mutually free slots, want at least 2", len(z))
	}
	for i, c := range s.Calendars {
		lo, hi := 2.0, -1.0
		for _, h := range z {
			v, _ := c.Value(h)
			lo, hi = min(lo, v), max(hi, v)
		}
		if hi <= lo {
			return fmt.Errorf("%s likes every mutually free slot the same (%v): no best and worst", roles[i], lo)
		}
	}
	return nil
}

func (s Scenario) validCalendars() error {
	for i, c := range s.Calendars {
		if len(c.Free) != len(c.Prefs) {
			return fmt.Errorf("%s: %d free hours, %d preferences", roles[i], len(c.Free), len(c.Prefs))
		}
		for j, h := range c.Free {
			if h < First || h > Last || (j > 0 && h <= c.Free[j-1]) {
				return fmt.Errorf("%s: free hours %v must be increasing within %d..%d", roles[i], c.Free, First, Last)
			}
			if !slices.Contains(Buckets, c.Prefs[j]) {
				return fmt.Errorf("%s: preference %v at %d is not one of %v", roles[i], c.Prefs[j], h, Buckets)
			}
		}
	}
	return nil
}

var meetings = []string{"project kickoff", "quarterly review", "interview debrief", "budget planning", "design critique", "customer call prep"}
var principals = []string{"Dana (head of product)", "Mr. Okafor (CFO)", "Priya (engineering lead)", "Tom (sales director)", "Dr. Weiss (research lead)"}

// Sample deals a scenario: each hour is busy with probability 0.4 per
// side and each free hour gets a random bucket; it retries until Validate
// passes.
func Sample(rng *rand.Rand) Scenario {
	for {
		s := Scenario{Meeting: meetings[rng.IntN(len(meetings))], Principal: principals[rng.IntN(len(principals))]}
		for i := range 2 {
			var c Calendar
			for h := First; h <= Last; h++ {
				if rng.Float64() < 0.6 {
					c.Free = append(c.Free, h)
					c.Prefs = append(c.Prefs, Buckets[rng.IntN(len(Buckets))])
				}
			}
			s.Calendars[i] = c
		}
		if s.Validate() == nil {
			return s
		}
	}
}

//go:embed scenarios.yaml
var curatedYAML []byte

// Curated returns the embedded evaluation scenarios.
func Curated() ([]Scenario, error) { return negotiation.LoadScenarios[Scenario](curatedYAML) }

// Game is Calendar scheduling.
type Game struct {
	negotiation.Game[Scenario, int]
}

// New returns the game.
func New() *Game {
	return &Game{negotiation.Game[Scenario, int]{
		GameID:    ID,
		Summary:   "Calendar: an assistant and a requester with private availability and slot preferences book one meeting; min-max slot reward",
		Names:     names,
		Roles:     roles,
		Curated:   Curated,
		Sample:    Sample,
		Validate:  Scenario.Validate,
		Episode:   newEpisode,
		Valuation: valuation,
	}}
}

func newEpisode(s Scenario, q negotiation.Params) *negotiation.Episode[int] {
	seats := negotiation.TwoSeats(names, roles)
	ep := &negotiation.Episode[int]{SeatList: seats, Dealt: s, Rules: Rules{Calendars: s.Calendars}, Options: q.Options()}
	for i := range 2 {
		ep.Briefing[i] = negotiation.Briefing{Text: briefing(s, i, q), Data: Private{Seat: i, Calendar: s.Calendars[i]}}
	}
	ep.Score = func(res negotiation.Result[int]) engine.Outcome { return score(s, res) }
	// Hours may be written on a 12-hour clock ("at 2"), so every hour
	// up to the last slot's is a number of the rules.
	h := negotiation.UpTo(Last)
	ep.Given = [2][]float64{h, h}
	return ep
}

// Rules are the negotiation.Rules of a slot: "slot=<hour>".
type Rules struct {
	Calendars [2]Calendar
}

// Label renders an hour as "14:00".
func Label(h int) string { return fmt.Sprintf("%02d:00", h) }

func labels(hs []int) string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = Label(h)
	}
	return strings.Join(out, ", ")
}

// ParseTerms implements negotiation.Rules: the proposer must be free.
func (r Rules) ParseTerms(proposer int, text string) (int, error) {
	kv, err := negotiation.ParseAssignments(text, []string{"slot"})
	if err != nil {
		return 0, err
	}
	v := strings.TrimSuffix(kv["slot"], ":00")
	h, err := strconv.Atoi(v)
	if err != nil || h < First || h > Last {
		return 0, fmt.Errorf("slot=%s is not a slot: write the start hour from %d to %d, e.g. slot=14", kv["slot"], First, Last)
	}
	if _, free := r.Calendars[proposer].Value(h); !free {
		return 0, fmt.Errorf("you are busy at %s; your free slots are %s", Label(h), labels(r.Calendars[proposer].Free))
	}
	return h, nil
}

// CheckAccept implements negotiation.Rules: the acceptor must be free.
func (r Rules) CheckAccept(acceptor int, h int) error {
	if _, free := r.Calendars[acceptor].Value(h); !free {
		return fmt.Errorf("you are busy at %s", Label(h))
	}
	return nil
}

// Describe implements negotiation.Rules.
func (Rules) Describe(_ int, h int) string {
	return fmt.Sprintf("meet at %s–%02d:00.", Label(h), h+1)
}

// TermsHelp implements negotiation.Rules.
func (Rules) TermsHelp(int) string { return "PROPOSE: slot=<hour>" }

// TermsGrammar implements negotiation.Rules: only the seat's free hours.
func (r Rules) TermsGrammar(seat int) (string, string) {
	alts := make([]string, len(r.Calendars[seat].Free))
	for i, h := range r.Calendars[seat].Free {
		alts[i] = strconv.Quote(strconv.Itoa(h))
	}
	if len(alts) == 0 {
		alts = []string{`"8"`}
	}
	return `"slot=" (` + strings.Join(alts, " | ") + `)`, ""
}

// Proposals implements negotiation.Lister: the seat's free hours.
func (r Rules) Proposals(seat int) []string {
	out := make([]string, len(r.Calendars[seat].Free))
	for i, h := range r.Calendars[seat].Free {
		out[i] = "PROPOSE: slot=" + strconv.Itoa(h)
	}
	return out
}

// Private is a seat's private information (its briefing's Data).
type Private struct {
	Seat     int      `json:"seat"`
	Calendar Calendar `json:"calendar"`
}

// Terms are the deal terms of an agreement.
type Terms struct {
	Slot     string `json:"slot"`
	Proposer string `json:"proposer"`
}

func score(s Scenario, res negotiation.Result[int]) engine.Outcome {
	rep := negotiation.Report{Roles: roles}
	for i, c := range s.Calendars {
		if o := res.Openings[i]; o != nil {
			rep.Opening[i], _ = c.Value(*o)
			rep.HasOpening[i] = true
		}
		rep.Offers[i] = negotiation.Curve(res.Offered[i], func(h int) float64 { v, _ := c.Value(h); return v })
		// A side discloses when it writes one of its fractional
		// preference values (whole ones are too common in text).
		for _, v := range c.Prefs {
			if v > 0 && v < 1 && negotiation.MentionsNumber(res.Said[i], v) {
				rep.Disclosed[i] = 1
			}
		}
	}
	var terms any
	if res.Status == negotiation.StatusDeal {
		h := res.Deal.Terms
		for i, c := range s.Calendars {
			rep.Utility[i], _ = c.Value(h)
			rep.Reward[i] = s.Reward(i, h)
		}
		rep.Extra = s.maxPref(h)
		terms = Terms{Slot: Label(h), Proposer: roles[res.Deal.Proposer]}
	}
	return negotiation.Outcome(res, rep, terms)
}

// Rescore recomputes both rewards from a record's scenario, result and
// terms alone.
func Rescore(s Scenario, result string, t *Terms) ([2]float64, error) {
	return negotiation.RescoreDeal(result, t, func(t Terms) ([2]float64, error) {
		var r [2]float64
		h, err := strconv.Atoi(strings.TrimSuffix(t.Slot, ":00"))
		if err != nil {
			return r, fmt.Errorf("slot %q: %w", t.Slot, err)
		}
		for i := range r {
			r[i] = s.Reward(i, h)
		}
		return r, nil
	})
}

func briefing(s Scenario, seat int, q negotiation.Params) string {
	if q.Compact {
		return compactBriefing(s, seat, q)
	}
	var b strings.Builder
	if seat == 0 {
		fmt.Fprintf(&b, "You are the scheduling assistant of %s. The requester wants a one-hour %s with your principal today.\n", s.Principal, s.Meeting)
	} else {
		fmt.Fprintf(&b, "You are requesting a one-hour %s today with %s, whose assistant you are talking to.\n", s.Meeting, s.Principal)
	}
	fmt.Fprintf(&b, "Meetings start on the hour, from %s to %s. Your calendar and how much you like each free slot (private: the other side has its own):\n", Label(First), Label(Last))
	c := s.Calendars[seat]
	for h := First; h <= Last; h++ {
		if v, free := c.Value(h); free {
			fmt.Fprintf(&b, "- %s free, preference %s\n", Label(h), strconv.FormatFloat(v, 'f', -1, 64))
		} else {
			fmt.Fprintf(&b, "- %s busy\n", Label(h))
		}
	}
	b.WriteString("A meeting can only be booked in a slot where both of you are free: propose only slots where you are free. ")
	b.WriteString("Your reward is 1 for your favourite slot among those free for both, 0 for your least favourite, and in between by preference; no meeting — walking away or running out of turns — gives you 0.\n")
	fmt.Fprintf(&b, "Each side has %d turns; the assistant moves first.\n\n", q.Rounds)
	b.WriteString(negotiation.MoveFormat("PROPOSE: slot=<hour>", "propose the meeting at this start hour, e.g. slot=14 for 14:00–15:00.", q.StructuredOnly))
	ex := "PROPOSE: slot=14"
	if len(c.Free) > 0 {
		ex = "PROPOSE: slot=" + strconv.Itoa(c.Free[len(c.Free)/2])
	}
	if q.StructuredOnly {
		fmt.Fprintf(&b, "Example:\n%s\n", ex)
	} else {
		fmt.Fprintf(&b, "Example:\nSAY: Mornings are tight, how about the afternoon?\n%s\n", ex)
	}
	return b.String()
}

func valuation(seat engine.Seat, view []engine.Event) (negotiation.Valuation[int], error) {
	pr, err := negotiation.Private[Private](view)
	if err != nil {
		return negotiation.Valuation[int]{}, err
	}
	c := pr.Calendar
	parts := make([]string, len(c.Free))
	for i, h := range c.Free {
		parts[i] = fmt.Sprintf("%s=%s", Label(h), strconv.FormatFloat(c.Prefs[i], 'f', -1, 64))
	}
	return negotiation.Valuation[int]{
		Candidates: c.Free,
		Utility:    func(h int) float64 { v, _ := c.Value(h); return v },
		Distance:   func(a, b int) float64 { return float64(max(a-b, b-a)) },
		Format:     func(h int) string { return "slot=" + strconv.Itoa(h) },
		CanAccept:  func(h int) bool { _, free := c.Value(h); return free },
		// Any booked slot is at least as good as none.
		Floor:      -0.01,
		Disclosure: "My preference scores are " + strings.Join(parts, ", ") + ".",
	}, nil
}

// compactBriefing is the briefing of Params.Compact: the rules first, the
// seat's private calendar last.
func compactBriefing(s Scenario, seat int, q negotiation.Params) string {
	part := fmt.Sprintf("the assistant of %s, who is asked for a one-hour %s today", s.Principal, s.Meeting)
	if seat == 1 {
		part = fmt.Sprintf("asking %s's assistant for a one-hour %s today", s.Principal, s.Meeting)
	}
	var b strings.Builder
	b.WriteString(negotiation.CompactHead("Meeting scheduling", part, q.Rounds, "the assistant", "PROPOSE: slot=<hour>", q.StructuredOnly))
	b.WriteString("Reward: 1 for your favourite hour free for both, 0 for your least favourite; 0 without a meeting. Propose only hours you are free.\n")
	c := s.Calendars[seat]
	hours := slices.Clone(c.Free)
	order := ""
	if q.Hints {
		// Best first, earlier first among equals.
		slices.SortStableFunc(hours, func(a, b int) int {
			va, _ := c.Value(a)
			vb, _ := c.Value(b)
			return cmp.Compare(vb, va)
		})
		order = " best first"
	}
	free := make([]string, len(hours))
	for i, h := range hours {
		v, _ := c.Value(h)
		free[i] = fmt.Sprintf("%d=%s", h, strconv.FormatFloat(v, 'f', -1, 64))
	}
	var busy []string
	for h := First; h <= Last; h++ {
		if _, ok := c.Value(h); !ok {
			busy = append(busy, strconv.Itoa(h))
		}
	}
	if len(busy) == 0 {
		busy = []string{"none"}
	}
	fmt.Fprintf(&b, "Your secret calendar. Free, with your preference%s: %s. Busy: %s.\n", order, strings.Join(free, " "), strings.Join(busy, " "))
	return b.String()
}

// maxPref is the max_pref_<role> metrics of a meeting at h: 1 for a side
// when h is one of its most preferred slots among Z, the mutually free
// ones (the best it could have got; its reward is then 1), else 0.
func (s Scenario) maxPref(h int) map[string]float64 {
	m := map[string]float64{}
	for i, c := range s.Calendars {
		best := -1.0
		for _, t := range s.Mutual() {
			v, _ := c.Value(t)
			best = max(best, v)
		}
		v, ok := c.Value(h)
		m["max_pref_"+roles[i]] = 0
		if ok && v == best {
			m["max_pref_"+roles[i]] = 1
		}
	}
	return m
}
