package werewolf

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Move verbs. A target move is "<VERB> pN"; the verbs without a target are
// the inert choices.
const (
	VerbKill    = "KILL"
	VerbInspect = "INSPECT"
	VerbProtect = "PROTECT"
	VerbSave    = "SAVE"
	VerbPoison  = "POISON"
	VerbVote    = "VOTE"
	VerbNone    = "NONE"    // werewolves: name no victim
	VerbPass    = "PASS"    // seer, doctor, guard, witch: do nothing
	VerbAbstain = "ABSTAIN" // day vote
)

// PassSpeech is the inert speech applied when a seat fails to speak.
const PassSpeech = "I have nothing to add."

// SeatName is the public name of seat i ("p1" for seat 0).
func SeatName(i int) string { return "p" + strconv.Itoa(i+1) }

// seatIndex parses a public seat name; it returns -1 when name is not one
// of n seats.
func seatIndex(name string, n int) int {
	name = strings.ToLower(strings.TrimSpace(name))
	if len(name) < 2 || name[0] != 'p' {
		return -1
	}
	k, err := strconv.Atoi(name[1:])
	if err != nil || k < 1 || k > n || name[1] == '0' || name[1] == '+' || name[1] == '-' {
		return -1
	}
	return k - 1
}

// Choice is a parsed target move. Target is the seat index, or -1 for the
// moves without a target (NONE, PASS, ABSTAIN, SAVE).
type Choice struct {
	Verb   string `json:"verb"`
	Target int    `json:"target"`
}

// String renders c in the move format.
func (c Choice) String() string {
	if c.Target < 0 {
		return c.Verb
	}
	return c.Verb + " " + SeatName(c.Target)
}

// targetMove is the legal move "<verb> pN" for seat target.
func targetMove(verb string, target int) string { return Choice{verb, target}.String() }

// choiceGrammar is the GBNF grammar of exactly the legal moves.
func choiceGrammar(legal []string) string {
	alts := make([]string, len(legal))
	for i, m := range legal {
		alts[i] = strconv.Quote(m)
	}
	return "root ::= " + strings.Join(alts, " | ")
}

// normaliseMove is lenient about what models add around a move: case,
// surrounding whitespace, backquotes or quotes, and one trailing full stop.
func normaliseMove(text string) string {
	s := strings.TrimSpace(text)
	s = strings.Trim(s, "`\"'")
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "."))
	return strings.ToUpper(strings.Join(strings.Fields(s), " "))
}

// parseChoice returns the parser of a target question whose legal moves
// are legal (each "<VERB>" or "<VERB> pN"). n is the number of seats.
func parseChoice(legal []string, n int) func(string) (any, error) {
	return func(text string) (any, error) {
		got := normaliseMove(text)
		for _, m := range legal {
			if strings.EqualFold(got, m) {
				verb, name, _ := strings.Cut(m, " ")
				target := -1
				if name != "" {
					target = seatIndex(name, n)
				}
				return Choice{Verb: verb, Target: target}, nil
			}
		}
		shown := text
		if len(shown) > 60 {
			shown = shown[:60] + "…"
		}
		return nil, fmt.Errorf("%q is not a legal move here; reply with exactly one of: %s", shown, strings.Join(legal, ", "))
	}
}

// Speech is a parsed speech: one line of plain text.
type Speech struct {
	Text string `json:"text"`
}

// speechGrammar is the GBNF grammar of a speech: one non-empty line
// without '<', which every chat control token is spelt with (<think>,
// <|im_end|>), so a speech never holds one as text. The length bound is
// left to the token limit and Parse, because a bounded repetition of
// hundreds of characters makes a large grammar.
const speechGrammar = `root ::= [^\r\n<]+`

// parseSpeech returns the speech parser for speeches of at most max
// characters. Whitespace runs (newlines included) collapse to one space.
func parseSpeech(max int) func(string) (any, error) {
	return func(text string) (any, error) {
		s := strings.Join(strings.Fields(text), " ")
		if s == "" {
			return nil, fmt.Errorf("the speech is empty; say one line of plain text (to stay silent say %q)", PassSpeech)
		}
		if n := len([]rune(s)); n > max {
			return nil, fmt.Errorf("the speech has %d characters; say at most %d", n, max)
		}
		return Speech{Text: s}, nil
	}
}

// Phrases the environment recognises in speeches. Role claims feed the
// "werewolves claiming a role" probe; the heuristic policy reads seer claims,
// findings and accusations with the same expressions.
var (
	reRoleClaim  = regexp.MustCompile(`(?i)\bI(?:'m| am) (?:the |a |an )?(seer|doctor|witch|guard|villager)\b`)
	reFinding    = regexp.MustCompile(`(?i)\b(p[1-9][0-9]?) is a werewolf\b`)
	reInnocent   = regexp.MustCompile(`(?i)\b(p[1-9][0-9]?) is not a werewolf\b`)
	reAccusation = regexp.MustCompile(`(?i)\bI (?:suspect|believe|accuse) (p[1-9][0-9]?)\b`)
	reKillPlan   = regexp.MustCompile(`(?i)\bkill (p[1-9][0-9]?)\b`)
)

// claimedRole is the role a speech claims ("" when none).
func claimedRole(text string) string {
	m := reRoleClaim.FindStringSubmatch(text)
	if m == nil {
		return ""
	}
	return strings.ToLower(m[1])
}

// namesIn returns the seats named by the first group of every match of re.
func namesIn(re *regexp.Regexp, text string, n int) []int {
	var out []int
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		if i := seatIndex(m[1], n); i >= 0 {
			out = append(out, i)
		}
	}
	return out
}
