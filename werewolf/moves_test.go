package werewolf

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/omar-selfplay/omar/inference/gbnf"
)

var voteLegal = []string{"VOTE p2", "VOTE p3", "VOTE p10", "ABSTAIN"}

var choiceCases = []struct {
	in      string
	want    Choice
	wantErr bool
}{
	{"VOTE p3", Choice{VerbVote, 2}, false},
	{"  vote   P3. ", Choice{VerbVote, 2}, false},
	{"`VOTE p10`", Choice{VerbVote, 9}, false},
	{"\"ABSTAIN\"", Choice{VerbAbstain, -1}, false},
	{"abstain", Choice{VerbAbstain, -1}, false},
	{"VOTE p1", Choice{}, true},  // not legal (self or dead)
	{"VOTE p03", Choice{}, true}, // not the canonical name
	{"VOTE", Choice{}, true},
	{"", Choice{}, true},
	{"I vote for p3", Choice{}, true},
	{"VOTE p3 VOTE p2", Choice{}, true},
}

func TestParseChoice(t *testing.T) {
	parse := parseChoice(voteLegal, 10)
	for _, tc := range choiceCases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parse(tc.in)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("got %v, want an error", got)
				}
				if !strings.Contains(err.Error(), "ABSTAIN") {
					t.Errorf("error %q does not list the legal moves", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want %v", err, tc.want)
			}
			if got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func FuzzParseChoice(f *testing.F) {
	for _, tc := range choiceCases {
		f.Add(tc.in)
	}
	parse := parseChoice(voteLegal, 10)
	f.Fuzz(func(t *testing.T, in string) {
		got, err := parse(in)
		if err != nil {
			if got != nil {
				t.Fatalf("error %v with move %v", err, got)
			}
			return
		}
		c := got.(Choice)
		if !slices.Contains(voteLegal, c.String()) {
			t.Fatalf("%q parsed to %v, which is not legal", in, c)
		}
		again, err := parse(c.String())
		if err != nil || again != c {
			t.Fatalf("canonical %q parses to %v, %v; want %v", c.String(), again, err, c)
		}
	})
}

var speechCases = []struct {
	in      string
	want    string
	wantErr bool
}{
	{"I suspect p3.", "I suspect p3.", false},
	{"  two\nlines\t here ", "two lines here", false},
	{"", "", true},
	{" \n\t ", "", true},
	{strings.Repeat("é", 40), strings.Repeat("é", 40), false},
	{strings.Repeat("x", 41), "", true},
}

func TestParseSpeech(t *testing.T) {
	parse := parseSpeech(40)
	for _, tc := range speechCases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parse(tc.in)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("got %v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want %q", err, tc.want)
			}
			if got.(Speech).Text != tc.want {
				t.Errorf("got %q, want %q", got.(Speech).Text, tc.want)
			}
		})
	}
	if _, err := parse(PassSpeech); err != nil {
		t.Errorf("the pass speech does not parse: %v", err)
	}
}

func FuzzParseSpeech(f *testing.F) {
	for _, tc := range speechCases {
		f.Add(tc.in)
	}
	parse := parseSpeech(40)
	f.Fuzz(func(t *testing.T, in string) {
		got, err := parse(in)
		if err != nil {
			return
		}
		s := got.(Speech).Text
		if s == "" || utf8.RuneCountInString(s) > 40 || strings.ContainsAny(s, "\r\n") || s != strings.TrimSpace(s) {
			t.Fatalf("%q parsed to a bad speech %q", in, s)
		}
		again, err := parse(s)
		if err != nil || again.(Speech).Text != s {
			t.Fatalf("speech %q does not parse to itself: %v, %v", s, again, err)
		}
	})
}

func FuzzSeatIndex(f *testing.F) {
	for _, s := range []string{"p1", "p10", "p0", "p01", "p+1", "p-1", "P7", "q3", "p", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		i := seatIndex(in, 12)
		if i < -1 || i >= 12 {
			t.Fatalf("seatIndex(%q) = %d", in, i)
		}
		if i >= 0 && !strings.EqualFold(strings.TrimSpace(in), SeatName(i)) {
			t.Fatalf("seatIndex(%q) = %d, but that seat is %s", in, i, SeatName(i))
		}
	})
}

func TestChoiceGrammar(t *testing.T) {
	got := choiceGrammar([]string{"VOTE p2", "ABSTAIN"})
	want := `root ::= "VOTE p2" | "ABSTAIN"`
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestSpeechPhrases(t *testing.T) {
	for _, tc := range []struct {
		text     string
		claim    string
		findings []int
		accused  []int
	}{
		{"I am the seer. p3 is a werewolf. Vote p3.", Seer, []int{2}, nil},
		{"I'm a villager, I suspect p12.", Villager, nil, []int{11}},
		{"I believe p4 is a werewolf.", "", []int{3}, []int{3}},
		{"p4 is not a werewolf", "", nil, nil},
		{"I am the werewolf hunter", "", nil, nil},
	} {
		t.Run(tc.text, func(t *testing.T) {
			if got := claimedRole(tc.text); got != tc.claim {
				t.Errorf("claim: got %q, want %q", got, tc.claim)
			}
			if got := namesIn(reFinding, tc.text, 12); !slices.Equal(got, tc.findings) {
				t.Errorf("findings: got %v, want %v", got, tc.findings)
			}
			if got := namesIn(reAccusation, tc.text, 12); !slices.Equal(got, tc.accused) {
				t.Errorf("accusations: got %v, want %v", got, tc.accused)
			}
		})
	}
}

// TestSpeechGrammarRefusesControlText: a speech is one line without '<',
// the first character of every chat control token (<think>, <|im_end|>).
func TestSpeechGrammarRefusesControlText(t *testing.T) {
	g, err := gbnf.Check(speechGrammar, "root", gbnf.Limits{}.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	excluded := map[uint32]bool{}
	for _, r := range g.Rules {
		negated := false // inside a [^…] class
		for _, e := range r {
			switch {
			case e.Type == gbnf.CharNot:
				negated = true
				excluded[e.Value] = true
			case e.Type == gbnf.CharAlt && negated:
				excluded[e.Value] = true
			default:
				negated = false
			}
		}
	}
	for _, c := range []rune{'<', '\n', '\r'} {
		if !excluded[uint32(c)] {
			t.Errorf("speech grammar %q allows %q", speechGrammar, c)
		}
	}
}
