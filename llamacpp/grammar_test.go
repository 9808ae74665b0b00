package llamacpp

import (
	"bytes"
	"errors"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/omar-selfplay/omar/inference/gbnf"
)

// crashGrammars are the inputs of the adversarial pass on c2e13bd that
// killed the server with SIGSEGV inside llama_sampler_init_grammar.
var crashGrammars = map[string]func() string{
	// 18,000 nested groups: llama.cpp's parser recurses once per level.
	"nesting": func() string { return nested(18000) },
	// A chain of 150,000 rules (2.7 MiB): its left-recursion check
	// recurses once per rule.
	"chain": func() string {
		var b strings.Builder
		b.WriteString("root ::= r0\n")
		for i := range 149999 {
			b.WriteString("r" + strconv.Itoa(i) + " ::= r" + strconv.Itoa(i+1) + "\n")
		}
		b.WriteString(`r149999 ::= "a"` + "\n")
		return b.String()
	},
}

func nested(n int) string {
	return "root ::= " + strings.Repeat("(", n) + `"a"` + strings.Repeat(")", n) + "\n"
}

// TestGrammarCrashInputsRefused: before the Go check these calls killed
// the test binary.
func TestGrammarCrashInputsRefused(t *testing.T) {
	m := testModel(t)
	for name, src := range crashGrammars {
		t.Run(name, func(t *testing.T) {
			_, err := NewGrammarSampler(m.Vocab(), src(), "root")
			if !errors.Is(err, ErrGrammar) || !errors.Is(err, gbnf.ErrLimit) {
				t.Errorf("got %v, want ErrGrammar wrapping gbnf.ErrLimit", err)
			}
		})
	}
	for name, src := range map[string]string{
		// llama.cpp computes 2 − 5 unsigned and generates rules forever.
		"max below min": `root ::= "a"{5,2}`,
		// Left recursion through a rule that is empty only by way of
		// another: llama.cpp does not see it and expands stacks forever.
		"hidden left recursion": "root ::= a\na ::= b a \"x\" | \"y\"\nb ::= c\nc ::= \"z\" |\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := NewGrammarSampler(m.Vocab(), src, "root"); !errors.Is(err, ErrGrammar) {
				t.Errorf("got %v, want ErrGrammar", err)
			}
		})
	}
}

// TestGrammarCrashInputsKillLlamaCpp shows that the crash inputs still
// kill a process that hands them to llama.cpp unchecked: each runs in a
// child (this test binary, TestRawGrammarChild) which must die of SIGSEGV.
func TestGrammarCrashInputsKillLlamaCpp(t *testing.T) {
	testLib(t)
	if os.Getenv("OMAR_RAW_GRAMMAR") != "" {
		t.Skip("in the child")
	}
	for name := range crashGrammars {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestRawGrammarChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), "OMAR_RAW_GRAMMAR="+name)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("child: got %v, want it killed by llama.cpp; output:\n%s", err, lastOutput(out.String()))
			}
			ws, _ := ee.Sys().(syscall.WaitStatus)
			// The Go runtime turns a fault in C into "signal SIGSEGV" and
			// exit status 2; an uncaught one is the signal itself.
			segv := (ws.Signaled() && ws.Signal() == syscall.SIGSEGV) || strings.Contains(out.String(), "SIGSEGV")
			if !segv || strings.Contains(out.String(), "child survived") {
				t.Errorf("child: got %v, want death by SIGSEGV; output:\n%s", err, lastOutput(out.String()))
			}
		})
	}
}

func lastOutput(s string) string {
	if len(s) > 2000 {
		return "…" + s[len(s)-2000:]
	}
	return s
}

// TestRawGrammarChild is the child of TestGrammarCrashInputsKillLlamaCpp.
func TestRawGrammarChild(t *testing.T) {
	name := os.Getenv("OMAR_RAW_GRAMMAR")
	if name == "" {
		t.Skip("runs only as the child of TestGrammarCrashInputsKillLlamaCpp")
	}
	m := testModel(t)
	src := crashGrammars[name]()
	if name == "nesting" {
		// Where the stack ends depends on the thread: 18,000 levels
		// overflowed the server's, this binary's lasts to about 20,000.
		src = nested(100000)
	}
	s, err := initGrammar(m.Vocab(), src, "root")
	t.Logf("child survived: %v", err)
	if s != nil {
		s.Close()
	}
}

// refusedByBoth are syntax errors llama.cpp's own parser reports too.
var refusedByBoth = []string{
	`root ::= (`, `root ::= undefined`, `other ::= "a"`, `root ::= "\q"`, `root ::= "\x4"`, `root ::= *`,
	`root ::= "a"{2001}`, `root ::= ("a"{0,50}){0,50}`, `root ::= "a" ) "b"`, "root ::= \"a\"\n  | \"b\"\n",
	`root ::= root "a" | "b"`, `root ::= [a`, `root ::= "a"{,3}`, `root ::= <[x]>`,
}

// acceptedByBoth are grammars both parsers accept; the state reader must
// see llama.cpp's rules equal to gbnf's, element by element.
var acceptedByBoth = []string{
	`root ::= "yes" | "no"`,
	"root ::= say | say \"\\n\" move | move\nsay ::= \"SAY: \" [!-~] [^\\n]{0,240}\nmove ::= \"REJECT\" | \"WALK\"\n",
	`root ::= ("a" | [b-c])? "d"{2,3} [^x-z]* . "\u00e9\U0001F600" "\x41"`,
	"# comment\nroot ::= (\n  \"a\" # c\n  | \"b\"\n)+\n",
	`root ::= x{0,2000}` + "\nx ::= \"x\"",
	`root ::= <[1]> !<[2]>`,
	`root ::= ("a"{50}){40}`,
}

func TestGrammarParsersAgree(t *testing.T) {
	m := testModel(t)
	for _, src := range refusedByBoth {
		if _, err := gbnf.Check(src, "root", gbnf.Limits{}.Defaults()); err == nil {
			t.Errorf("gbnf accepts %q, want an error", src)
		}
		if s, err := initGrammar(m.Vocab(), src, "root"); err == nil {
			s.Close()
			t.Errorf("llama.cpp accepts %q, want an error", src)
		}
	}
	for _, src := range acceptedByBoth {
		s, err := NewGrammarSampler(m.Vocab(), src, "root")
		if err != nil {
			t.Errorf("%q: got %v, want nil", src, err)
			continue
		}
		if s.grammar == nil {
			t.Errorf("%q: the state reader does not see llama.cpp's rules equal to gbnf's", src)
		}
		s.Close()
	}
}

// TestGrammarState: equal states mask equal tokens, and the mask is what
// applying the sampler to real logits leaves.
func TestGrammarState(t *testing.T) {
	m := testModel(t)
	v := m.Vocab()
	n := v.NTokens()
	src := `root ::= "SAY: " [a-z ]{0,6} "!"`
	a, err := NewGrammarSampler(v, src, "root")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, _ := NewGrammarSampler(v, src, "root")
	defer b.Close()
	ka, stacks, ok := a.GrammarState(nil)
	if !ok || stacks != 1 {
		t.Fatalf("fresh state: got ok %v, %d stacks, want true, 1", ok, stacks)
	}
	logits := make([]float32, n)
	for i := range logits {
		logits[i] = float32(math.Sin(float64(i)))
	}
	cand, full := NewCandidates(n), NewCandidates(n)
	mask := make([]uint64, (n+63)/64)
	text := ""
	for step := range 12 {
		kb, _, _ := b.GrammarState(nil)
		ka, _, _ = a.GrammarState(ka[:0])
		if !bytes.Equal(ka, kb) {
			t.Fatalf("step %d: states differ after the same tokens", step)
		}
		cand.GrammarMask(a, n, mask)
		full.Fill(logits)
		full.Apply(a)
		var pick int32 = -1
		for _, td := range full.Data() {
			allowed := !math.IsInf(float64(td.Logit), -1)
			if got := mask[td.ID>>6]>>(td.ID&63)&1 == 1; got != allowed {
				t.Fatalf("step %d token %d: mask %v, apply leaves it %v", step, td.ID, got, allowed)
			}
			if allowed && pick < 0 {
				pick = td.ID
			}
		}
		if pick < 0 {
			break
		}
		text += v.Piece(pick, false)
		a.Accept(pick)
		b.Accept(pick)
		if kn, _, _ := a.GrammarState(nil); bytes.Equal(kn, ka) && !strings.HasSuffix(text, "!") && len(text) < 5 {
			t.Errorf("step %d: the state did not change after %q", step, v.Piece(pick, false))
		}
	}
	if !strings.HasPrefix(text, "SAY") {
		t.Errorf("generated %q, want it to start with SAY", text)
	}
	// A clone has no reader: it reports no state rather than a wrong one.
	c := a.Clone()
	defer c.Close()
	if _, _, ok := c.GrammarState(nil); ok {
		t.Error("clone: got a state, want none")
	}
}

// FuzzGrammarAgreement: every grammar gbnf accepts within small limits,
// llama.cpp accepts too with the very same rules.
func FuzzGrammarAgreement(f *testing.F) {
	for _, s := range acceptedByBoth {
		f.Add(s)
	}
	for _, s := range refusedByBoth {
		f.Add(s)
	}
	lim := gbnf.Limits{}.Defaults()
	lim.MaxBytes, lim.MaxNesting, lim.MaxLeftDepth, lim.MaxRules = 4096, 16, 32, 2048
	f.Fuzz(func(t *testing.T, src string) {
		m := testModel(t)
		g, err := gbnf.Check(src, "root", lim)
		if err != nil || g.Tokens {
			return // <text> tokens depend on the vocabulary
		}
		s, err := initGrammar(m.Vocab(), src, "root")
		if err != nil {
			t.Fatalf("gbnf accepts %q, llama.cpp refuses: %v", src, err)
		}
		defer s.Close()
		if newGrammarView(s, m.Vocab(), src, "root", g) == nil {
			t.Fatalf("%q: llama.cpp's rules differ from gbnf's", src)
		}
	})
}

// TestGrammarStateIgnoresLastChar: llama.cpp keeps the last code point in
// its partial-UTF-8 record even when no character is pending; two texts
// that leave the grammar at the same place have one state.
func TestGrammarStateIgnoresLastChar(t *testing.T) {
	m := testModel(t)
	v := m.Vocab()
	src := `root ::= [a-z]+`
	var states [][]byte
	for _, text := range []string{"a", "b", "ab"} {
		s, err := NewGrammarSampler(v, src, "root")
		if err != nil {
			t.Fatal(err)
		}
		toks, err := v.Tokenize(text, false, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, tok := range toks {
			s.Accept(tok)
		}
		st, _, ok := s.GrammarState(nil)
		if !ok {
			t.Fatal("no state")
		}
		states = append(states, st)
		s.Close()
	}
	for i := 1; i < len(states); i++ {
		if !bytes.Equal(states[i], states[0]) {
			t.Errorf("text %d: state %x, want %x (the same place in the grammar)", i, states[i], states[0])
		}
	}
}
