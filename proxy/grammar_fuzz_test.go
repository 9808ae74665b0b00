package proxy

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/omar-selfplay/omar/inference/gbnf"
)

// grammarSeeds are grammars a chat call may carry: ordinary ones, broken
// ones, and the two that killed `omar serve --policy` with SIGSEGV inside
// llama.cpp in the adversarial pass on c2e13bd (18,000 nested groups in a
// 36 KB body; a chain of 150,000 rules, 2.7 MiB).
func grammarSeeds() []string {
	var chain strings.Builder
	chain.WriteString("root ::= r0\n")
	for i := range 149999 {
		chain.WriteString("r" + strconv.Itoa(i) + " ::= r" + strconv.Itoa(i+1) + "\n")
	}
	chain.WriteString(`r149999 ::= "a"` + "\n")
	return []string{
		`root ::= "yes" | "no"`,
		gbnf.JSONObject,
		`root ::= [^<\n]{1,40}`,
		"root ::= (",
		`root ::= undefined`,
		`root ::= root "a" | "b"`,
		`root ::= "a"{5,2}`,
		"root ::= a\na ::= b a \"x\" | \"y\"\nb ::= c\nc ::= \"z\" |\n",
		"root ::= " + strings.Repeat("(", 18000) + `"a"` + strings.Repeat(")", 18000),
		chain.String(),
	}
}

// FuzzGrammarRequest sends chat calls carrying arbitrary grammars through
// the proxy to the real llama.cpp backend: every call is answered — 200
// when gbnf accepts the grammar, else 400 naming the grammar — and the
// process survives (a grammar that crashed llama.cpp would end the fuzzer).
func FuzzGrammarRequest(f *testing.F) {
	for _, g := range grammarSeeds() {
		f.Add(g)
	}
	b := testBackend(f)
	_, srv := testProxy(f, b, nil, nil)
	f.Fuzz(func(t *testing.T, grammar string) {
		body := map[string]any{
			"model":       "omar",
			"messages":    []map[string]any{{"role": "user", "content": "Answer."}},
			"max_tokens":  2,
			"temperature": 1,
			"seed":        1,
			"grammar":     grammar,
		}
		status, out := post(t, srv.URL+"/v1/chat/completions", nil, body)
		_, checkErr := gbnf.Check(grammar, "root", gbnf.Limits{}.Defaults())
		switch {
		case grammar == "":
			// No grammar: an unconstrained call.
			if status != http.StatusOK {
				t.Fatalf("no grammar: got HTTP %d %s, want 200", status, out)
			}
		case status == http.StatusOK:
			if checkErr != nil {
				t.Fatalf("grammar %.200q: served, but gbnf refuses it: %v", grammar, checkErr)
			}
		case status == http.StatusBadRequest:
			var e ErrorBody
			if err := json.Unmarshal(out, &e); err != nil {
				t.Fatalf("400 body %s: %v", out, err)
			}
			if checkErr == nil && !strings.Contains(grammar, "<") {
				// Only a token named by text (<…>) can pass gbnf and fail
				// in llama.cpp, which resolves it with the vocabulary.
				t.Fatalf("grammar %.200q: refused (%s) though gbnf accepts it", grammar, out)
			}
			if e.Error.Param != "grammar" && status != http.StatusRequestEntityTooLarge {
				t.Fatalf("grammar %.200q: got %s, want the refusal to name the grammar", grammar, out)
			}
		case status == http.StatusRequestEntityTooLarge:
			// Bodies over MaxBodyBytes never reach the grammar.
		default:
			t.Fatalf("grammar %.200q: got HTTP %d %s, want 200 or 400", grammar, status, out)
		}
	})
}
