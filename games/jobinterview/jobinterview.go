// Package jobinterview is the Job Interview negotiation (jobinterview_v1):
// a worker and a recruiter agree a five-issue contract — salary, days off,
// position, workplace, weekly hours (our default issue list). Each role has
// private points per option (at most 100 in all, 0 for the worst option of
// every issue). A deal scores z = points / 100 with the calibrated sigmoid
// reward; each role's reference m is its z in the contract that maximises
// min(z_worker, z_recruiter), ties broken by the larger total; when several
// contracts still tie, each role takes its largest z over them (MaxMin). No
// deal, walk-away and timeout give 0.
package jobinterview

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
const ID = "jobinterview_v1"

// MaxPoints is the value of the best contract to each role.
const MaxPoints = 100

var roles = [2]string{"worker", "recruiter"}
var names = [2]string{"Worker", "Recruiter"}

// Issue is one contract term and its options, written as in PROPOSE.
type Issue struct {
	Name    string
	Options []string
	// prose renders an option in a sentence.
	prose func(string) string
}

// Issues are the five issues in order.
var Issues = []Issue{
	{"salary", []string{"60000", "70000", "80000", "90000", "100000"}, func(o string) string { return "salary $" + o }},
	{"days_off", []string{"10", "15", "20", "25", "30"}, func(o string) string { return o + " days off a year" }},
	{"position", []string{"analyst", "engineer", "senior", "lead"}, func(o string) string { return "position " + o }},
	{"workplace", []string{"office", "hybrid", "remote"}, func(o string) string { return "workplace " + o }},
	{"hours", []string{"35", "40", "45", "50"}, func(o string) string { return o + " hours a week" }},
}

func issueNames() []string {
	out := make([]string, len(Issues))
	for i, is := range Issues {
		out[i] = is.Name
	}
	return out
}

// Points are one role's private points per option of each issue.
type Points struct {
	Salary    []int `yaml:"salary" json:"salary"`
	DaysOff   []int `yaml:"days_off" json:"days_off"`
	Position  []int `yaml:"position" json:"position"`
	Workplace []int `yaml:"workplace" json:"workplace"`
	Hours     []int `yaml:"hours" json:"hours"`
}

// Table returns the points by issue index.
func (p Points) Table() [5][]int {
	return [5][]int{p.Salary, p.DaysOff, p.Position, p.Workplace, p.Hours}
}

// options renders each issue's options with their points, "60000=15".
func (p Points) options() [5][]string {
	var out [5][]string
	for i, v := range p.Table() {
		out[i] = make([]string, len(v))
		for j, n := range v {
			out[i][j] = fmt.Sprintf("%s=%d", Issues[i].Options[j], n)
		}
	}
	return out
}

// bestFirst is options ordered by points, most first (the issue's order
// among equals).
func (p Points) bestFirst() [5][]string {
	var out [5][]string
	for i, v := range p.Table() {
		idx := make([]int, len(v))
		for j := range idx {
			idx[j] = j
		}
		slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(v[b], v[a]) })
		for _, j := range idx {
			out[i] = append(out[i], fmt.Sprintf("%s=%d", Issues[i].Options[j], v[j]))
		}
	}
	return out
}

// Of is the points of a contract.
func (p Points) Of(c Contract) int {
	t := p.Table()
	s := 0
	for i, o := range c {
		s += t[i][o]
	}
	return s
}

// Weight is the points of an issue's best option.
func weight(v []int) int {
	m := 0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// Contract holds the chosen option index of each issue.
type Contract [5]int

// Scenario is one interview: flavour text and both roles' points.
type Scenario struct {
	ID      string    `yaml:"id" json:"id"`
	Company string    `yaml:"company" json:"company"`
	Job     string    `yaml:"job" json:"job"`
	Points  [2]Points `yaml:"points" json:"points"` // by seat
	// Reference is filled when dealt.
	Reference Reference `yaml:"-" json:"reference"`
}

// Preferences implements engine.PreferenceScenario: an issue's value to
// a seat is the spread of its points over the issue's options (what the
// seat stands to gain or lose on it), so the order of the issues is the
// order of their weight in the seat's utility.
func (s Scenario) Preferences(seat int) (engine.Preferences, bool) {
	if seat < 0 || seat > 1 {
		return engine.Preferences{}, false
	}
	var p engine.Preferences
	for i, pts := range s.Points[seat].Table() {
		lo, hi := 0, 0
		if len(pts) > 0 {
			lo, hi = slices.Min(pts), slices.Max(pts)
		}
		p.Issues = append(p.Issues, engine.Issue{Names: issueWords[i], Value: float64(hi - lo)})
	}
	return p, true
}

// issueWords name each issue in free text, canonical name first.
var issueWords = [5][]string{
	{"salary", "pay", "wage", "money"},
	{"days off", "days_off", "vacation", "holiday"},
	{"position", "title", "seniority"},
	{"workplace", "remote", "office", "hybrid", "location"},
	{"hours", "working hours", "hours a week"},
}

// Reference is a max-min contract and each role's m (see MaxMin).
type Reference struct {
	Contract Contract   `json:"contract"`
	M        [2]float64 `json:"m"`
}

// Validate checks each role's table: the right number of options per
// issue, non-negative points, 0 for some option of every issue, and best
// options summing to 100.
func (s Scenario) Validate() error {
	for r, p := range s.Points {
		total := 0
		for i, v := range p.Table() {
			if len(v) != len(Issues[i].Options) {
				return fmt.Errorf("%s %s: %d points for %d options", roles[r], Issues[i].Name, len(v), len(Issues[i].Options))
			}
			lo := v[0]
			for _, x := range v {
				if x < 0 {
					return fmt.Errorf("%s %s: negative points", roles[r], Issues[i].Name)
				}
				lo = min(lo, x)
			}
			if lo != 0 {
				return fmt.Errorf("%s %s: worst option has %d points, want 0", roles[r], Issues[i].Name, lo)
			}
			total += weight(v)
		}
		if total != MaxPoints {
			return fmt.Errorf("%s: best contract is worth %d points, want %d", roles[r], total, MaxPoints)
		}
	}
	return nil
}

// Contracts enumerates every contract (last issue fastest).
func Contracts() []Contract {
	var out []Contract
	var c Contract
	var rec func(i int)
	rec = func(i int) {
		if i == len(Issues) {
			out = append(out, c)
			return
		}
		for o := range Issues[i].Options {
			c[i] = o
			rec(i + 1)
		}
	}
	rec(0)
	return out
}

// MaxMin finds the contracts maximising min(worker, recruiter) points and,
// among those, the larger total. Several contracts can tie on both, often
// mirror images ((65, 70) and (70, 65)); each role's m is then its largest
// value over the tied set, a rule symmetric in the roles: swapping the
// point tables swaps m, and no role's m depends on the order in which
// contracts are enumerated. Contract is the first tied contract in
// enumeration order, a representative; M need not be its values.
func MaxMin(pw, pr Points) Reference {
	bestMin, bestSum := -1, -1
	var tied []Contract
	for _, c := range Contracts() {
		a, b := pw.Of(c), pr.Of(c)
		mn, sum := min(a, b), a+b
		switch {
		case mn > bestMin || (mn == bestMin && sum > bestSum):
			bestMin, bestSum, tied = mn, sum, append(tied[:0], c)
		case mn == bestMin && sum == bestSum:
			tied = append(tied, c)
		}
	}
	ref := Reference{Contract: tied[0]}
	for _, c := range tied {
		ref.M[0] = max(ref.M[0], float64(pw.Of(c))/MaxPoints)
		ref.M[1] = max(ref.M[1], float64(pr.Of(c))/MaxPoints)
	}
	return ref
}

// direction of the monotone issues per role: +1 more is better, -1 less
// is better, 0 private taste.
var direction = [2][5]int{{+1, +1, 0, 0, -1}, {-1, -1, 0, 0, +1}}

var companies = []string{"Northwind Logistics", "Bluefin Analytics", "Oakridge Health", "Lumen Robotics", "Harbor Bank", "Greenleaf Foods"}
var jobs = []string{"software developer", "data analyst", "project manager", "UX designer", "operations specialist"}

// Sample deals a scenario: each role's 100 points are split over the five
// issues in multiples of 5 (at least 5 each); salary, days off and hours
// are linear in the role's direction, position and workplace are a random
// ranking.
func Sample(rng *rand.Rand) Scenario {
	s := Scenario{Company: companies[rng.IntN(len(companies))], Job: jobs[rng.IntN(len(jobs))]}
	for r := range 2 {
		// 20 units of 5 points, one guaranteed per issue.
		w := [5]int{1, 1, 1, 1, 1}
		for range 15 {
			w[rng.IntN(5)]++
		}
		var t [5][]int
		for i, is := range Issues {
			n := len(is.Options)
			vals := make([]int, n)
			for j := range n {
				vals[j] = (w[i]*5*j + (n-1)/2) / (n - 1)
			}
			switch direction[r][i] {
			case -1:
				for a, b := 0, n-1; a < b; a, b = a+1, b-1 {
					vals[a], vals[b] = vals[b], vals[a]
				}
			case 0:
				rng.Shuffle(n, func(a, b int) { vals[a], vals[b] = vals[b], vals[a] })
			}
			t[i] = vals
		}
		s.Points[r] = Points{Salary: t[0], DaysOff: t[1], Position: t[2], Workplace: t[3], Hours: t[4]}
	}
	return s
}

//go:embed scenarios.yaml
var curatedYAML []byte

// Curated returns the embedded evaluation scenarios.
func Curated() ([]Scenario, error) { return negotiation.LoadScenarios[Scenario](curatedYAML) }

// Game is the Job Interview negotiation.
type Game struct {
	negotiation.Game[Scenario, Contract]
}

// New returns the game.
func New() *Game {
	return &Game{negotiation.Game[Scenario, Contract]{
		GameID:    ID,
		Summary:   "Job Interview: worker and recruiter agree a five-issue contract with private utilities; calibrated-sigmoid reward around the max-min deal",
		Names:     names,
		Roles:     roles,
		Curated:   Curated,
		Sample:    Sample,
		Validate:  Scenario.Validate,
		Episode:   newEpisode,
		Valuation: valuation,
	}}
}

func newEpisode(s Scenario, q negotiation.Params) *negotiation.Episode[Contract] {
	s.Reference = MaxMin(s.Points[0], s.Points[1])
	seats := negotiation.TwoSeats(names, roles)
	ep := &negotiation.Episode[Contract]{SeatList: seats, Dealt: s, Rules: Rules{}, Options: q.Options()}
	for i := range 2 {
		ep.Briefing[i] = negotiation.Briefing{Text: briefing(s, i, q), Data: Private{Seat: i, Points: s.Points[i]}}
	}
	ep.Score = func(res negotiation.Result[Contract]) engine.Outcome { return score(s, res) }
	return ep
}

// Rules are the negotiation.Rules of a contract: every combination of
// options is feasible.
type Rules struct{}

// ParseTerms implements negotiation.Rules.
func (Rules) ParseTerms(_ int, text string) (Contract, error) {
	kv, err := negotiation.ParseAssignments(text, issueNames())
	if err != nil {
		return Contract{}, err
	}
	var c Contract
	for i, is := range Issues {
		o, err := option(is, kv[is.Name])
		if err != nil {
			return Contract{}, err
		}
		c[i] = o
	}
	return c, nil
}

// option matches a written value ("80000", "$80k", "Remote") to an option.
func option(is Issue, v string) (int, error) {
	w := strings.ToLower(strings.TrimPrefix(v, "$"))
	if strings.HasSuffix(w, "k") {
		if n, err := strconv.Atoi(strings.TrimSuffix(w, "k")); err == nil {
			w = strconv.Itoa(n * 1000)
		}
	}
	for o, name := range is.Options {
		if w == name {
			return o, nil
		}
	}
	return 0, fmt.Errorf("%s=%s is not an option: choose one of %s", is.Name, v, strings.Join(is.Options, ", "))
}

// CheckAccept implements negotiation.Rules.
func (Rules) CheckAccept(int, Contract) error { return nil }

// Describe implements negotiation.Rules.
func (Rules) Describe(_ int, c Contract) string {
	parts := make([]string, len(Issues))
	for i, is := range Issues {
		parts[i] = is.prose(is.Options[c[i]])
	}
	return strings.Join(parts, ", ") + "."
}

// Format writes a contract as PROPOSE terms.
func Format(c Contract) string {
	parts := make([]string, len(Issues))
	for i, is := range Issues {
		parts[i] = is.Name + "=" + is.Options[c[i]]
	}
	return strings.Join(parts, " ")
}

// TermsHelp implements negotiation.Rules.
func (Rules) TermsHelp(int) string {
	return "PROPOSE: salary=<s> days_off=<d> position=<p> workplace=<w> hours=<h>"
}

// TermsGrammar implements negotiation.Rules.
func (Rules) TermsGrammar(int) (string, string) {
	parts := make([]string, len(Issues))
	for i, is := range Issues {
		alts := make([]string, len(is.Options))
		for j, o := range is.Options {
			alts[j] = strconv.Quote(o)
		}
		sep := " "
		if i == 0 {
			sep = ""
		}
		parts[i] = fmt.Sprintf(`"%s%s=" (%s)`, sep, is.Name, strings.Join(alts, " | "))
	}
	return strings.Join(parts, " "), ""
}

// Private is a seat's private information (its briefing's Data).
type Private struct {
	Seat   int    `json:"seat"`
	Points Points `json:"points"`
}

// Terms are the deal terms of an agreement.
type Terms struct {
	Contract map[string]string `json:"contract"`
	Proposer string            `json:"proposer"`
}

func score(s Scenario, res negotiation.Result[Contract]) engine.Outcome {
	rep := negotiation.Report{Roles: roles}
	for i := range 2 {
		if o := res.Openings[i]; o != nil {
			rep.Opening[i] = float64(s.Points[i].Of(*o)) / MaxPoints
			rep.HasOpening[i] = true
		}
		rep.Offers[i] = negotiation.Curve(res.Offered[i], func(c Contract) float64 { return float64(s.Points[i].Of(c)) / MaxPoints })
		n := 0
		for j, v := range s.Points[i].Table() {
			if negotiation.StatesValue(res.Said[i], Issues[j].Name, float64(weight(v))) ||
				negotiation.StatesValue(res.Said[i], strings.ReplaceAll(Issues[j].Name, "_", " "), float64(weight(v))) {
				n++
			}
		}
		rep.Disclosed[i] = float64(n) / float64(len(Issues))
	}
	var terms any
	if res.Status == negotiation.StatusDeal {
		c := res.Deal.Terms
		t := Terms{Contract: map[string]string{}, Proposer: roles[res.Deal.Proposer]}
		for i, is := range Issues {
			t.Contract[is.Name] = is.Options[c[i]]
		}
		for i := range 2 {
			rep.Utility[i] = float64(s.Points[i].Of(c)) / MaxPoints
			rep.Reward[i] = negotiation.Calibrated(rep.Utility[i], s.Reference.M[i])
		}
		rep.Extra = s.topWorkplace(c)
		terms = t
	}
	return negotiation.Outcome(res, rep, terms)
}

// Rescore recomputes both rewards from a record's scenario, result and
// terms alone (the max-min reference is recomputed, not read).
func Rescore(s Scenario, result string, t *Terms) ([2]float64, error) {
	return negotiation.RescoreDeal(result, t, func(t Terms) ([2]float64, error) {
		var r [2]float64
		var c Contract
		for i, is := range Issues {
			o, err := option(is, t.Contract[is.Name])
			if err != nil {
				return r, err
			}
			c[i] = o
		}
		ref := MaxMin(s.Points[0], s.Points[1])
		for i := range r {
			r[i] = negotiation.Calibrated(float64(s.Points[i].Of(c))/MaxPoints, ref.M[i])
		}
		return r, nil
	})
}

func briefing(s Scenario, seat int, q negotiation.Params) string {
	if q.Compact {
		return compactBriefing(s, seat, q)
	}
	other := 1 - seat
	var b strings.Builder
	if seat == 0 {
		fmt.Fprintf(&b, "You are a candidate for a %s job at %s, negotiating your contract with the recruiter.\n", s.Job, s.Company)
	} else {
		fmt.Fprintf(&b, "You are the recruiter of %s, negotiating the contract of a %s candidate.\n", s.Company, s.Job)
	}
	b.WriteString("The contract has five issues; you must agree one option for each.\n")
	b.WriteString("Your private points for each option (the other side does not see them and has its own):\n")
	for i, opts := range s.Points[seat].options() {
		fmt.Fprintf(&b, "- %s: %s\n", Issues[i].Name, strings.Join(opts, ", "))
	}
	fmt.Fprintf(&b, "The best contract for you is worth %d points. Your reward grows with the points of the agreed contract, most steeply around a contract that is fair to both; ", MaxPoints)
	fmt.Fprintf(&b, "walking away or running out of turns gives you 0.\nEach side has %d turns; the %s moves first.\n\n", q.Rounds, roles[0])
	b.WriteString(negotiation.MoveFormat(Rules{}.TermsHelp(seat),
		fmt.Sprintf("offer a complete contract (one option for every issue) to the %s.", roles[other]), q.StructuredOnly))
	ex := "PROPOSE: " + Format(Contract{2, 2, 1, 1, 1})
	if q.StructuredOnly {
		fmt.Fprintf(&b, "Example:\n%s\n", ex)
	} else {
		fmt.Fprintf(&b, "Example:\nSAY: I could accept fewer days off for a hybrid workplace.\n%s\n", ex)
	}
	return b.String()
}

func valuation(seat engine.Seat, view []engine.Event) (negotiation.Valuation[Contract], error) {
	pr, err := negotiation.Private[Private](view)
	if err != nil {
		return negotiation.Valuation[Contract]{}, err
	}
	parts := []string{}
	for i, v := range pr.Points.Table() {
		parts = append(parts, fmt.Sprintf("%s is worth up to %d points", strings.ReplaceAll(Issues[i].Name, "_", " "), weight(v)))
	}
	return negotiation.Valuation[Contract]{
		Candidates: Contracts(),
		Utility:    func(c Contract) float64 { return float64(pr.Points.Of(c)) / MaxPoints },
		Distance: func(a, b Contract) float64 {
			d := 0.0
			for i := range a {
				d += float64(max(a[i]-b[i], b[i]-a[i])) / float64(len(Issues[i].Options)-1)
			}
			return d
		},
		Format:     Format,
		Disclosure: "For me " + strings.Join(parts, ", ") + ".",
	}, nil
}

// compactBriefing is the briefing of Params.Compact: the rules first, the
// seat's private points per option last.
func compactBriefing(s Scenario, seat int, q negotiation.Params) string {
	part := fmt.Sprintf("the worker, a %s candidate at %s", s.Job, s.Company)
	if seat == 1 {
		part = fmt.Sprintf("the recruiter of %s, hiring a %s", s.Company, s.Job)
	}
	var b strings.Builder
	b.WriteString(negotiation.CompactHead("Job interview", part, q.Rounds, "the "+roles[0], Rules{}.TermsHelp(seat), q.StructuredOnly))
	b.WriteString("Reward: grows with your points of the agreed contract (one option per issue); 0 without a deal.\n")
	opts := s.Points[seat].options()
	if q.Hints {
		b.WriteString("Your secret points, best first:\n")
		opts = s.Points[seat].bestFirst()
	} else {
		b.WriteString("Your secret points:\n")
	}
	for i, o := range opts {
		fmt.Fprintf(&b, "%s: %s\n", Issues[i].Name, strings.Join(o, " "))
	}
	return b.String()
}

// topWorkplace is the top_workplace_<role> metrics of contract c: 1 for
// a role when c's workplace earns it the most points among the
// workplaces (one of them, when several tie), else 0.
func (s Scenario) topWorkplace(c Contract) map[string]float64 {
	w := slices.IndexFunc(Issues, func(is Issue) bool { return is.Name == "workplace" })
	m := map[string]float64{}
	for i, p := range s.Points {
		pts := p.Table()[w]
		m["top_workplace_"+roles[i]] = 0
		if c[w] >= 0 && c[w] < len(pts) && pts[c[w]] == slices.Max(pts) {
			m["top_workplace_"+roles[i]] = 1
		}
	}
	return m
}
