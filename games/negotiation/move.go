package negotiation

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Kind is the structured part of a turn.
type Kind string

// The move kinds. KindNone is a message without a move: the standing offer
// stays as it is.
const (
	KindNone    Kind = "none"
	KindPropose Kind = "propose"
	KindAccept  Kind = "accept"
	KindReject  Kind = "reject"
	KindWalk    Kind = "walk"
)

// MaxSay bounds a message, so one runaway reply cannot flood every
// counterpart's context.
const MaxSay = 1000

// Reply is a parsed turn before the game interprets the terms.
type Reply struct {
	Say  string `json:"say,omitempty"`
	Kind Kind   `json:"kind"`
	// Terms is the text after "PROPOSE:" (KindPropose only).
	Terms string `json:"terms,omitempty"`
}

// ParseReply parses a turn in the move format:
//
//	SAY: <a message to the counterpart, one line>   (optional)
//	PROPOSE: <terms> | ACCEPT | REJECT | WALK        (optional)
//
// At least one of the two is required. Keywords are case-insensitive;
// blank lines are ignored; several SAY lines are joined. With
// structuredOnly, SAY lines are refused. Errors say what to fix, because
// the runtime shows them to the seat.
func ParseReply(text string, structuredOnly bool) (Reply, error) {
	var r Reply
	var says []string
	moves := 0
	for raw := range strings.SplitSeq(text, "\n") {
		line := strings.TrimSpace(raw)
		if line == "" {
			continue
		}
		kw, rest := splitKeyword(line)
		switch kw {
		case "SAY":
			if structuredOnly {
				return Reply{}, fmt.Errorf("messages are off in this game: reply with exactly one line PROPOSE: …, ACCEPT, REJECT or WALK")
			}
			if rest == "" {
				return Reply{}, fmt.Errorf("SAY needs a message after the colon, e.g. SAY: I need the books")
			}
			says = append(says, rest)
		case "PROPOSE":
			if rest == "" {
				return Reply{}, fmt.Errorf("PROPOSE needs terms after the colon")
			}
			r.Kind, r.Terms = KindPropose, rest
			moves++
		case "ACCEPT", "REJECT", "WALK":
			if rest != "" && strings.Trim(rest, ".!") != "" {
				return Reply{}, fmt.Errorf("%s takes nothing after it (put words on a SAY line): got %q", kw, line)
			}
			r.Kind = Kind(strings.ToLower(kw))
			moves++
		default:
			return Reply{}, fmt.Errorf("line %q does not start with SAY:, PROPOSE:, ACCEPT, REJECT or WALK", clipText(line, 60))
		}
	}
	if moves > 1 {
		return Reply{}, fmt.Errorf("a turn holds at most one move (PROPOSE, ACCEPT, REJECT or WALK), got %d", moves)
	}
	if moves == 0 {
		if len(says) == 0 {
			return Reply{}, fmt.Errorf("empty reply: write a SAY: line, a move (PROPOSE: …, ACCEPT, REJECT, WALK), or both")
		}
		r.Kind = KindNone
	}
	r.Say = strings.Join(says, " ")
	if len(r.Say) > MaxSay {
		return Reply{}, fmt.Errorf("message too long (%d characters, at most %d)", len(r.Say), MaxSay)
	}
	return r, nil
}

// splitKeyword splits "PROPOSE: x" or "propose x" into "PROPOSE", "x". A
// line whose first word is not a keyword gives kw "".
func splitKeyword(line string) (kw, rest string) {
	end := strings.IndexFunc(line, func(c rune) bool { return c == ':' || c == ' ' || c == '\t' || c == '.' || c == '!' })
	word := line
	if end >= 0 {
		word = line[:end]
	}
	w := strings.ToUpper(strings.Trim(word, "*"))
	switch w {
	case "SAY", "PROPOSE", "ACCEPT", "REJECT", "WALK":
	default:
		return "", line
	}
	if end < 0 {
		return w, ""
	}
	rest = strings.TrimSpace(line[end:])
	rest = strings.TrimSpace(strings.TrimPrefix(rest, ":"))
	return w, rest
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Format renders a reply in the move format (the inverse of ParseReply).
func (r Reply) Format() string {
	var b strings.Builder
	if r.Say != "" {
		b.WriteString("SAY: " + r.Say)
	}
	if r.Kind != KindNone && r.Kind != "" {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		switch r.Kind {
		case KindPropose:
			b.WriteString("PROPOSE: " + r.Terms)
		default:
			b.WriteString(strings.ToUpper(string(r.Kind)))
		}
	}
	return b.String()
}

var (
	assignRE = regexp.MustCompile(`^([A-Za-z_][A-Za-z_0-9]*)\s*=\s*([^\s,;]+)$`)
	equalsRE = regexp.MustCompile(`\s*=\s*`)
	// thousandsRE finds "80,000": a comma inside a number is not a separator.
	thousandsRE = regexp.MustCompile(`(\d),(\d\d\d)\b`)
)

// ParseAssignments parses terms like "book=1 hat=2 ball=0" (pairs may also
// be separated by commas or semicolons, "=" may have spaces around it, and
// numbers may have thousands separators: "salary=80,000")
// into a map holding exactly the keys in keys (lower-case). Unknown,
// missing and repeated keys are errors.
func ParseAssignments(s string, keys []string) (map[string]string, error) {
	s = equalsRE.ReplaceAllString(s, "=")
	for thousandsRE.MatchString(s) {
		s = thousandsRE.ReplaceAllString(s, "$1$2")
	}
	fields := strings.FieldsFunc(s, func(c rune) bool { return c == ' ' || c == '\t' || c == ',' || c == ';' })
	out := map[string]string{}
	for _, f := range fields {
		m := assignRE.FindStringSubmatch(f)
		if m == nil {
			return nil, fmt.Errorf("cannot read %q: write terms as %s", clipText(f, 40), exampleTerms(keys))
		}
		k := strings.ToLower(m[1])
		if !slices.Contains(keys, k) {
			return nil, fmt.Errorf("unknown term %q: the terms are %s", k, strings.Join(keys, ", "))
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("term %q given twice", k)
		}
		out[k] = m[2]
	}
	var missing []string
	for _, k := range keys {
		if _, ok := out[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("missing %s: write terms as %s", strings.Join(missing, ", "), exampleTerms(keys))
	}
	return out, nil
}

// ReadTerms reads the key=value pairs of terms the way ParseAssignments
// does (spaces around "=", thousands separators, keys lower-case) but
// checks them against no game's keys and skips what it cannot read: a
// predicted move is scored term by term, so a partly right one must still
// be read. A repeated key keeps its first value.
func ReadTerms(s string) map[string]string {
	s = equalsRE.ReplaceAllString(s, "=")
	for thousandsRE.MatchString(s) {
		s = thousandsRE.ReplaceAllString(s, "$1$2")
	}
	out := map[string]string{}
	for _, f := range strings.FieldsFunc(s, func(c rune) bool { return c == ' ' || c == '\t' || c == ',' || c == ';' }) {
		if m := assignRE.FindStringSubmatch(f); m != nil {
			k := strings.ToLower(m[1])
			if _, dup := out[k]; !dup {
				out[k] = m[2]
			}
		}
	}
	return out
}

func exampleTerms(keys []string) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=<value>"
	}
	return strings.Join(parts, " ")
}

// ParseCount reads a whole number of items between 0 and max.
func ParseCount(name, s string, max int) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%s=%q is not a whole number", name, s)
	}
	if n < 0 || n > max {
		return 0, fmt.Errorf("%s=%d is impossible: there are %d in all, so give a number from 0 to %d", name, n, max, max)
	}
	return n, nil
}

// ParsePrice reads a price such as 120, 120.50 or $1,200 (the comma form only
// inside "price=…" where commas cannot separate terms) rounded to cents.
// Prices must be positive and below a billion.
func ParsePrice(s string) (float64, error) {
	t := strings.TrimPrefix(strings.TrimSpace(s), "$")
	t = strings.ReplaceAll(t, "_", "")
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("price %q is not a number (write e.g. price=120 or price=99.50)", clipText(s, 30))
	}
	if v <= 0 || v >= 1e9 {
		return 0, fmt.Errorf("price %v must be positive and below 1000000000", v)
	}
	return math.Round(v*100) / 100, nil
}

// FormatPrice renders a price without trailing zero cents.
func FormatPrice(p float64) string {
	if p == math.Trunc(p) {
		return strconv.FormatFloat(p, 'f', 0, 64)
	}
	return strconv.FormatFloat(p, 'f', 2, 64)
}

// Grammar returns the GBNF grammar (root rule "root") of a turn. terms is
// the GBNF expression of the text after "PROPOSE: " and extra holds any
// rules it refers to. canAccept drops ACCEPT when there is no standing
// offer from the counterpart; structuredOnly drops the SAY line.
func Grammar(terms, extra string, canAccept, structuredOnly bool) string {
	moves := []string{`"PROPOSE: " terms`}
	if canAccept {
		moves = append(moves, `"ACCEPT"`)
	}
	moves = append(moves, `"REJECT"`, `"WALK"`)
	var b strings.Builder
	if structuredOnly {
		b.WriteString("root ::= move\n")
	} else {
		b.WriteString("root ::= say | say \"\\n\" move | move\n")
		// The first character is visible ASCII so the parser never sees an
		// empty message; 241 characters of at most 4 bytes stay under MaxSay.
		// No '<': chat control tokens (<think>, <|im_end|>) are spelt
		// with it, and none may appear in a message as text.
		b.WriteString("say ::= \"SAY: \" [!-;=-~] [^\\n<]{0,240}\n")
	}
	b.WriteString("move ::= " + strings.Join(moves, " | ") + "\n")
	b.WriteString("terms ::= " + terms + "\n")
	if extra != "" {
		b.WriteString(strings.TrimRight(extra, "\n") + "\n")
	}
	return b.String()
}

// PriceGrammar is the GBNF terms expression of "price=<amount>".
const PriceGrammar = `"price=" [1-9] [0-9]{0,8} ("." [0-9] [0-9]?)?`

// PriceGrammarDigits is PriceGrammar with at most digits whole digits
// (1..9).
func PriceGrammarDigits(digits int) string {
	digits = min(max(digits, 1), 9)
	if digits == 1 {
		return `"price=" [1-9] ("." [0-9] [0-9]?)?`
	}
	return fmt.Sprintf(`"price=" [1-9] [0-9]{0,%d} ("." [0-9] [0-9]?)?`, digits-1)
}
