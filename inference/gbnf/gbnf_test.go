package gbnf

import (
	"errors"
	"strings"
	"testing"
)

// Crash inputs of the adversarial pass on c2e13bd: both killed
// `omar serve --policy` with SIGSEGV inside llama.cpp.
func nestedGroups(n int) string {
	return "root ::= " + strings.Repeat("(", n) + `"a"` + strings.Repeat(")", n) + "\n"
}

func ruleChain(n int) string {
	var b strings.Builder
	b.WriteString("root ::= r0\n")
	for i := range n - 1 {
		b.WriteString("r")
		b.WriteString(itoa(i))
		b.WriteString(" ::= r")
		b.WriteString(itoa(i + 1))
		b.WriteString("\n")
	}
	b.WriteString("r" + itoa(n-1) + ` ::= "a"` + "\n")
	return b.String()
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var d []byte
	for ; i > 0; i /= 10 {
		d = append([]byte{byte('0' + i%10)}, d...)
	}
	return string(d)
}

// doubling is n levels of "a ::= b | b c": llama.cpp's left-recursion
// check walks 2^n paths.
func doubling(n int) string {
	var b strings.Builder
	b.WriteString("root ::= l0\n")
	for i := range n {
		b.WriteString("l" + itoa(i) + " ::= l" + itoa(i+1) + ` | l` + itoa(i+1) + ` "x"` + "\n")
	}
	b.WriteString("l" + itoa(n) + ` ::= "y"` + "\n")
	return b.String()
}

// optionalTree is n levels of "a ::= b b" with every b optional: the
// stacks of one position double per level.
func optionalTree(n int) string {
	var b strings.Builder
	b.WriteString("root ::= t0\n")
	for i := range n {
		b.WriteString("t" + itoa(i) + " ::= t" + itoa(i+1) + " t" + itoa(i+1) + "\n")
	}
	b.WriteString("t" + itoa(n) + ` ::= "z" |` + "\n")
	return b.String()
}

func TestCheck(t *testing.T) {
	lim := Limits{}.Defaults()
	tests := []struct {
		name    string
		src     string
		wantErr error // nil: accepted; errSyntax: a *SyntaxError
	}{
		{"alternatives", `root ::= "yes" | "no"`, nil},
		{"json", JSONObject, nil},
		{"say line", "root ::= say | say \"\\n\" move | move\nsay ::= \"SAY: \" [!-~] [^\\n]{0,240}\nmove ::= \"REJECT\" | \"WALK\"\n", nil},
		{"token ids", `root ::= <[12]> !<[3]>`, nil},
		{"token text", `root ::= <think> "x"`, nil},
		{"comments and crlf", "# a comment\r\nroot ::= (\"a\" # trailing\r\n  | \"b\")\r\n", nil},
		{"nested 64", nestedGroups(64), nil},
		{"chain 200", ruleChain(200), nil},
		{"repeat 2000", `root ::= "a"{0,2000}`, nil},
		{"repeat exact product", `root ::= ("a"{50}){40}`, nil},
		{"continuation outside a group", "root ::= \"a\"\n  | \"b\"\n", errSyntax},
		{"open group", `root ::= (`, errSyntax},
		{"undefined rule", `root ::= foo`, errSyntax},
		{"no root", `start ::= "a"`, errSyntax},
		{"empty", "", errSyntax},
		{"nul byte", "root ::= \"a\x00\"", errSyntax},
		{"bad escape", `root ::= "\q"`, errSyntax},
		{"short hex", `root ::= "\x4"`, errSyntax},
		{"repeat nothing", `root ::= *`, errSyntax},
		{"max below min", `root ::= "a"{5,2}`, errSyntax},
		{"repeat 2001", `root ::= "a"{2001}`, errSyntax},
		{"repeat product", `root ::= ("a"{0,50}){0,50}`, errSyntax},
		{"huge count", `root ::= "a"{99999999999999999999}`, errSyntax},
		{"huge token id", `root ::= <[99999999999999999999]>`, errSyntax},
		{"missing newline", `root ::= "a" ) "b"`, errSyntax},
		{"crash: 18000 nested groups", nestedGroups(18000), ErrLimit},
		{"nested 65", nestedGroups(65), ErrLimit},
		{"crash: chain of 150000 rules", ruleChain(150000), ErrLimit},
		{"chain of 300 rules", ruleChain(300), ErrLimit},
		{"doubling left paths", doubling(24), ErrLimit},
		{"doubling stacks", optionalTree(16), ErrLimit},
		{"direct left recursion", `root ::= root "a" | "b"`, ErrLeftRecursion},
		{"hidden left recursion", "root ::= a\na ::= b a \"x\" | \"y\"\nb ::= c\nc ::= \"z\" |\n", ErrLeftRecursion},
		{"elements", `root ::= ("` + strings.Repeat("x", 1000) + `"){0,1}` + strings.Repeat(` "`+strings.Repeat("y", 1000)+`"{300}`, 1), ErrLimit},
		{"bytes", `root ::= "` + strings.Repeat("a", 200<<10) + `"`, ErrLimit},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Check(tc.src, "root", lim)
			switch {
			case tc.wantErr == nil:
				if err != nil {
					t.Errorf("got %v, want nil", err)
				}
			case tc.wantErr == errSyntax:
				var se *SyntaxError
				if !errors.As(err, &se) {
					t.Errorf("got %v, want a *SyntaxError", err)
				}
			default:
				if !errors.Is(err, tc.wantErr) {
					t.Errorf("got %v, want %v", err, tc.wantErr)
				}
			}
		})
	}
}

var errSyntax = errors.New("syntax")

// TestRewrite pins the rules llama.cpp generates for groups and
// repetitions (llama_grammar_parser::print on the same text).
func TestRewrite(t *testing.T) {
	g, err := Check(`root ::= ("a" | [b-c])? "d"{2,3}`, "root", Limits{}.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	got := len(g.Rules)
	// root, the group root_1, its ? rule root_2, the {2,3} optional root_3.
	if got != 4 {
		t.Fatalf("got %d rules, want 4: %v", got, g.Rules)
	}
	want := []Element{{RuleRef, 2}, {Char, 'd'}, {Char, 'd'}, {RuleRef, 3}, {End, 0}}
	if r := g.Rules[0]; !equal(r, want) {
		t.Errorf("root: got %v, want %v", r, want)
	}
	wantGroup := []Element{{Char, 'a'}, {Alt, 0}, {Char, 'b'}, {CharRngUpper, 'c'}, {End, 0}}
	if r := g.Rules[1]; !equal(r, wantGroup) {
		t.Errorf("root_1: got %v, want %v", r, wantGroup)
	}
}

func equal(a, b []Element) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestLimitsValidate(t *testing.T) {
	if err := (Limits{}).Defaults().Validate(); err != nil {
		t.Errorf("defaults: got %v, want nil", err)
	}
	l := Limits{}.Defaults()
	l.MaxNesting = 0
	if err := l.Validate(); err == nil {
		t.Error("max_nesting 0: got nil, want an error")
	}
	if _, err := Check(`root ::= "a"`, "root", Limits{}); err == nil {
		t.Error("zero limits: got nil, want an error")
	}
}

func FuzzCheck(f *testing.F) {
	for _, s := range []string{`root ::= "yes" | "no"`, JSONObject, nestedGroups(70), ruleChain(20), doubling(4),
		optionalTree(3), `root ::= "a"{5,2}`, `root ::= [^\n]{0,240}`, `root ::= <[1]> !<[2]> <x>`, "root ::= (\"a\" |\r\n \"b\")+ # c"} {
		f.Add(s)
	}
	lim := Limits{}.Defaults()
	lim.MaxLeftDepth, lim.MaxNesting = 32, 16
	f.Fuzz(func(t *testing.T, src string) {
		g, err := Check(src, "root", lim)
		if err != nil {
			return
		}
		if len(g.Rules) > lim.MaxRules || g.Elements > lim.MaxElements {
			t.Fatalf("accepted %d rules, %d elements: beyond %+v", len(g.Rules), g.Elements, lim)
		}
		for r, rule := range g.Rules {
			if len(rule) == 0 || rule[len(rule)-1].Type != End {
				t.Fatalf("rule %d does not end with End: %v", r, rule)
			}
			for _, e := range rule {
				if e.Type == RuleRef && int(e.Value) >= len(g.Rules) {
					t.Fatalf("rule %d references undefined rule %d", r, e.Value)
				}
			}
		}
	})
}
