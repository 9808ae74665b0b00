package negotiation

import (
	"maps"
	"strings"
	"testing"
)

var replyTests = []struct {
	name       string
	text       string
	structured bool
	want       Reply
	wantErr    string
}{
	{name: "propose", text: "PROPOSE: book=1 hat=2 ball=0", want: Reply{Kind: KindPropose, Terms: "book=1 hat=2 ball=0"}},
	{name: "say and propose", text: "SAY: I need the hats.\nPROPOSE: book=1 hat=2 ball=0", want: Reply{Say: "I need the hats.", Kind: KindPropose, Terms: "book=1 hat=2 ball=0"}},
	{name: "accept", text: "ACCEPT", want: Reply{Kind: KindAccept}},
	{name: "lower case with punctuation", text: "accept.", want: Reply{Kind: KindAccept}},
	{name: "reject", text: "SAY: no way\nREJECT", want: Reply{Say: "no way", Kind: KindReject}},
	{name: "walk", text: "WALK", want: Reply{Kind: KindWalk}},
	{name: "say only", text: "SAY: hello there", want: Reply{Say: "hello there", Kind: KindNone}},
	{name: "blank lines and spaces", text: "\n  SAY:  hi  \n\n  PROPOSE:price=10 \n", want: Reply{Say: "hi", Kind: KindPropose, Terms: "price=10"}},
	{name: "keyword without colon", text: "PROPOSE price=10", want: Reply{Kind: KindPropose, Terms: "price=10"}},
	{name: "markdown bold keyword", text: "**ACCEPT**", want: Reply{Kind: KindAccept}},
	{name: "two SAY lines join", text: "SAY: a\nSAY: b\nWALK", want: Reply{Say: "a b", Kind: KindWalk}},
	{name: "structured propose", text: "PROPOSE: price=10", structured: true, want: Reply{Kind: KindPropose, Terms: "price=10"}},
	{name: "structured refuses SAY", text: "SAY: hi\nACCEPT", structured: true, wantErr: "messages are off"},
	{name: "empty", text: "   \n", wantErr: "empty reply"},
	{name: "two moves", text: "ACCEPT\nREJECT", wantErr: "at most one move"},
	{name: "prose", text: "I think we should split evenly.", wantErr: "does not start with"},
	{name: "words after accept", text: "ACCEPT the deal", wantErr: "takes nothing after it"},
	{name: "empty SAY", text: "SAY:", wantErr: "needs a message"},
	{name: "empty PROPOSE", text: "PROPOSE:", wantErr: "needs terms"},
	{name: "saying is not SAY", text: "Saying: hi", wantErr: "does not start with"},
	{name: "too long", text: "SAY: " + strings.Repeat("x", MaxSay+1), wantErr: "too long"},
}

func TestParseReply(t *testing.T) {
	for _, tt := range replyTests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseReply(tt.text, tt.structured)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %+v, %v; want error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// FuzzParseReply checks that the parser never panics and that a parsed
// reply, written back with Format, parses to the same reply.
func FuzzParseReply(f *testing.F) {
	for _, tt := range replyTests {
		f.Add(tt.text, tt.structured)
	}
	f.Fuzz(func(t *testing.T, text string, structured bool) {
		r, err := ParseReply(text, structured)
		if err != nil {
			return
		}
		back, err := ParseReply(r.Format(), structured)
		if err != nil || back != r {
			t.Fatalf("round trip of %q: %+v → %q → %+v, %v", text, r, r.Format(), back, err)
		}
	})
}

var assignTests = []struct {
	name    string
	text    string
	want    map[string]string
	wantErr string
}{
	{name: "spaces", text: "book=1 hat=2 ball=0", want: map[string]string{"book": "1", "hat": "2", "ball": "0"}},
	{name: "commas and any order", text: "ball=0, Hat = 2,book=1", want: map[string]string{"book": "1", "hat": "2", "ball": "0"}},
	{name: "semicolons", text: "book=1;hat=2;ball=0", want: map[string]string{"book": "1", "hat": "2", "ball": "0"}},
	{name: "missing", text: "book=1 hat=2", wantErr: "missing ball"},
	{name: "unknown", text: "book=1 hat=2 ball=0 car=1", wantErr: "unknown term \"car\""},
	{name: "twice", text: "book=1 book=2 hat=2 ball=0", wantErr: "given twice"},
	{name: "not an assignment", text: "one book please", wantErr: "cannot read"},
}

func TestParseAssignments(t *testing.T) {
	keys := []string{"book", "hat", "ball"}
	for _, tt := range assignTests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseAssignments(tt.text, keys)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, %v; want error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || len(got) != len(tt.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s: got %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

func FuzzParseAssignments(f *testing.F) {
	for _, tt := range assignTests {
		f.Add(tt.text)
	}
	keys := []string{"book", "hat", "ball"}
	f.Fuzz(func(t *testing.T, text string) {
		m, err := ParseAssignments(text, keys)
		if err == nil && len(m) != len(keys) {
			t.Fatalf("%q parsed to %v without every key", text, m)
		}
	})
}

var priceTests = []struct {
	text    string
	want    float64
	wantErr bool
}{
	{text: "120", want: 120},
	{text: "$99.5", want: 99.5},
	{text: "99.999", want: 100},
	{text: "1_200", want: 1200},
	{text: "0", wantErr: true},
	{text: "-5", wantErr: true},
	{text: "NaN", wantErr: true},
	{text: "Inf", wantErr: true},
	{text: "1e12", wantErr: true},
	{text: "cheap", wantErr: true},
}

func TestParsePrice(t *testing.T) {
	for _, tt := range priceTests {
		t.Run(tt.text, func(t *testing.T) {
			got, err := ParsePrice(tt.text)
			if (err != nil) != tt.wantErr || (!tt.wantErr && got != tt.want) {
				t.Fatalf("got %v, %v; want %v (error %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestPriceRulesParseTerms(t *testing.T) {
	tests := []struct {
		text    string
		want    float64
		wantErr bool
	}{
		{text: "price=120", want: 120},
		{text: "price = $1,250.50", want: 1250.5},
		{text: "$80", want: 80},
		{text: "price=free", wantErr: true},
		{text: "cost=10", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			got, err := PriceRules{}.ParseTerms(0, tt.text)
			if (err != nil) != tt.wantErr || (!tt.wantErr && got != tt.want) {
				t.Fatalf("got %v, %v; want %v (error %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func FuzzParsePrice(f *testing.F) {
	for _, tt := range priceTests {
		f.Add(tt.text)
	}
	f.Fuzz(func(t *testing.T, text string) {
		p, err := PriceRules{}.ParseTerms(0, text)
		if err != nil {
			return
		}
		if !(p > 0 && p < 1e9) {
			t.Fatalf("%q parsed to out-of-range price %v", text, p)
		}
		back, err := PriceRules{}.ParseTerms(0, "price="+FormatPrice(p))
		if err != nil || back != p {
			t.Fatalf("%q: %v does not round-trip: %v, %v", text, p, back, err)
		}
	})
}

func TestGrammar(t *testing.T) {
	tests := []struct {
		name                  string
		canAccept, structured bool
		has, hasNot           []string
	}{
		{"full", true, false, []string{`root ::= say | say "\n" move | move`, `"ACCEPT"`, `say ::=`}, nil},
		{"no standing offer", false, false, []string{`"REJECT"`}, []string{`"ACCEPT"`}},
		{"structured only", true, true, []string{"root ::= move", `"ACCEPT"`}, []string{"say"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := Grammar(PriceGrammar, "", tt.canAccept, tt.structured)
			for _, s := range tt.has {
				if !strings.Contains(g, s) {
					t.Errorf("grammar lacks %q:\n%s", s, g)
				}
			}
			for _, s := range tt.hasNot {
				if strings.Contains(g, s) {
					t.Errorf("grammar has %q:\n%s", s, g)
				}
			}
		})
	}
}

func TestPriceGrammarScale(t *testing.T) {
	for _, tc := range []struct {
		scale float64
		want  string
	}{
		{0, PriceGrammar},
		{0.5, PriceGrammar},
		{7, `"price=" [1-9] ("." [0-9] [0-9]?)?`},
		{305, `"price=" [1-9] [0-9]{0,2} ("." [0-9] [0-9]?)?`},
		{4999.5, `"price=" [1-9] [0-9]{0,3} ("." [0-9] [0-9]?)?`},
		{5e12, PriceGrammar},
	} {
		if got, _ := (PriceRules{Scale: tc.scale}).TermsGrammar(0); got != tc.want {
			t.Errorf("scale %v: grammar %s, want %s", tc.scale, got, tc.want)
		}
	}
}

func TestDisclosure(t *testing.T) {
	if !MentionsNumber([]string{"My budget is $1,200 max"}, 1200) {
		t.Errorf("$1,200 not found")
	}
	if !MentionsNumber([]string{"I can do 12k"}, 12000) {
		t.Errorf("12k not found")
	}
	if MentionsNumber([]string{"I can do 1150"}, 1200) {
		t.Errorf("1150 counted as 1200")
	}
	if !StatesValue([]string{"Books are worth 3 points to me"}, "book", 3) {
		t.Errorf("book value not found")
	}
	if StatesValue([]string{"I want 3 books"}, "book", 3) {
		t.Errorf("a count before the name counted as a value")
	}
}

func TestReadTerms(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]string
	}{
		{"book=1 hat=2 ball=0", map[string]string{"book": "1", "hat": "2", "ball": "0"}},
		{"Salary = 80,000; days=5", map[string]string{"salary": "80000", "days": "5"}},
		{"book=1 and some words hat=2 book=3", map[string]string{"book": "1", "hat": "2"}},
		{"nothing here", map[string]string{}},
	} {
		if got := ReadTerms(tc.in); !maps.Equal(got, tc.want) {
			t.Errorf("ReadTerms(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
