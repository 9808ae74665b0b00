// Package negotiationtest holds test helpers for the negotiation games:
// scripted replay agents, and a converter from the suite's GBNF subset to
// a regular expression so tests can check that every reply the grammar
// allows is one the parser accepts.
package negotiationtest

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/engine/enginetest"
	"github.com/omar-selfplay/omar/games/negotiation"
)

// Script is an agent that replies with texts in order and then REJECT.
func Script(texts ...string) engine.Agent {
	i := 0
	return engine.AgentFunc(func(ctx context.Context, t engine.Turn) (engine.Action, error) {
		text := "REJECT"
		if i < len(texts) {
			text = texts[i]
		}
		i++
		return engine.Action{NotificationID: t.Notification.ID, Text: text}, nil
	})
}

// Play runs one episode of g where each seat replies with its script.
func Play(t *testing.T, g engine.Game, seed uint64, p engine.Params, scripts [2][]string) *engine.Record {
	t.Helper()
	cast := func(s engine.Seat) (engine.Agent, string, error) {
		return Script(scripts[s.Index]...), "script", nil
	}
	rec, err := engine.Play(context.Background(), g, seed, p, cast, engine.DefaultOptions(), nil)
	if err != nil {
		t.Fatalf("play: %v", err)
	}
	return rec
}

// GrammarRegexp converts a GBNF grammar written with the subset the suite
// uses (string literals, character classes, groups, alternation, ?, *, +,
// {m,n} and non-recursive rule references) to an anchored regexp matching
// the same language. Matching it against a reply tells whether
// constrained decoding could have produced the reply.
func GrammarRegexp(g string) (*regexp.Regexp, error) {
	rules := map[string]string{}
	for line := range strings.SplitSeq(g, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		name, expr, ok := strings.Cut(line, "::=")
		if !ok {
			return nil, fmt.Errorf("line %q has no ::=", line)
		}
		rules[strings.TrimSpace(name)] = strings.TrimSpace(expr)
	}
	c := converter{rules: rules}
	re, err := c.rule("root", 0)
	if err != nil {
		return nil, err
	}
	return regexp.Compile(`^(?:` + re + `)$`)
}

type converter struct{ rules map[string]string }

func (c converter) rule(name string, depth int) (string, error) {
	if depth > 20 {
		return "", fmt.Errorf("rule %s: too deep (recursive?)", name)
	}
	expr, ok := c.rules[name]
	if !ok {
		return "", fmt.Errorf("undefined rule %q", name)
	}
	return c.expr(expr, depth)
}

func (c converter) expr(s string, depth int) (string, error) {
	var out strings.Builder
	for i := 0; i < len(s); {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t':
			i++
		case ch == '"':
			j := i + 1
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return "", fmt.Errorf("unterminated string in %q", s)
			}
			lit, err := strconv.Unquote(s[i : j+1])
			if err != nil {
				return "", fmt.Errorf("string %s: %w", s[i:j+1], err)
			}
			out.WriteString("(?:" + regexp.QuoteMeta(lit) + ")")
			i = j + 1
		case ch == '[':
			j := i + 1
			for j < len(s) && s[j] != ']' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return "", fmt.Errorf("unterminated class in %q", s)
			}
			out.WriteString(s[i : j+1])
			i = j + 1
		case ch == '(':
			out.WriteString("(?:")
			i++
		case ch == ')' || ch == '|' || ch == '?' || ch == '*' || ch == '+':
			out.WriteByte(ch)
			i++
		case ch == '{':
			j := strings.IndexByte(s[i:], '}')
			if j < 0 {
				return "", fmt.Errorf("unterminated repetition in %q", s)
			}
			out.WriteString(s[i : i+j+1])
			i += j + 1
		default:
			j := i
			for j < len(s) && (s[j] == '_' || s[j] == '-' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			if j == i {
				return "", fmt.Errorf("unexpected %q in %q", ch, s)
			}
			sub, err := c.rule(s[i:j], depth+1)
			if err != nil {
				return "", err
			}
			out.WriteString("(?:" + sub + ")")
			i = j
		}
	}
	return out.String(), nil
}

// CheckGrammar is the body of a move-parser fuzz test: whatever the turn
// grammar (with ACCEPT allowed) matches must parse, and parsed terms must
// be describable.
func CheckGrammar[T any](t *testing.T, rules negotiation.Rules[T], seat int, structured bool, text string) {
	t.Helper()
	terms, extra := rules.TermsGrammar(seat)
	re, err := cachedRegexp(negotiation.Grammar(terms, extra, true, structured))
	if err != nil {
		t.Fatal(err)
	}
	r, err := negotiation.ParseReply(text, structured)
	if err != nil {
		if re.MatchString(text) {
			t.Fatalf("the grammar allows %q but the parser says: %v", text, err)
		}
		return
	}
	if r.Kind != negotiation.KindPropose {
		return
	}
	v, err := rules.ParseTerms(seat, r.Terms)
	if err != nil {
		if re.MatchString(text) {
			t.Fatalf("the grammar allows %q but the terms are refused: %v", text, err)
		}
		return
	}
	if rules.Describe(seat, v) == "" {
		t.Fatalf("terms %q have an empty description", r.Terms)
	}
}

// CheckRepliesMatchGrammar checks that every reply an agent gave that was
// acknowledged also matches the grammar of its notification, so that
// constrained decoding does not forbid valid moves.
func CheckRepliesMatchGrammar(t *testing.T, rec *engine.Record) {
	t.Helper()
	grammar := map[string]string{}
	text := map[string]string{}
	for _, e := range rec.Events {
		switch e.Kind {
		case engine.KindNotification:
			grammar[e.NotificationID] = e.Grammar
		case engine.KindAction:
			text[e.NotificationID] = e.Text
		case engine.KindAck:
			g := grammar[e.NotificationID]
			if g == "" {
				continue
			}
			re, err := cachedRegexp(g)
			if err != nil {
				t.Fatalf("notification %s: %v", e.NotificationID, err)
			}
			if !re.MatchString(text[e.NotificationID]) {
				t.Errorf("seed %d: accepted reply %q does not match its grammar:\n%s", rec.Seed, text[e.NotificationID], g)
			}
		}
	}
}

var (
	reMu    sync.Mutex
	reCache = map[string]*regexp.Regexp{}
)

func cachedRegexp(g string) (*regexp.Regexp, error) {
	reMu.Lock()
	defer reMu.Unlock()
	if re, ok := reCache[g]; ok {
		return re, nil
	}
	re, err := GrammarRegexp(g)
	if err != nil {
		return nil, err
	}
	reCache[g] = re
	return re, nil
}

// Golden compares got with testdata/name, rewriting it when update is set.
func Golden(t *testing.T, name, got string, update bool) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (run go test -update if the change is intended):\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// Briefings returns the briefing text of each seat in rec.
func Briefings(rec *engine.Record) []string {
	out := make([]string, len(rec.Seats))
	for _, e := range rec.Events {
		if e.Kind == engine.KindBriefing && len(e.Audience.Seats) == 1 {
			out[e.Audience.Seats[0]] = e.Text
		}
	}
	return out
}

// CheckRecordRescore is CheckRescore on 10 sampled scenarios and on the
// first 5 curated ones.
func CheckRecordRescore[S, T any](t *testing.T, g engine.Game, rescore func(S, string, *T) ([2]float64, error)) {
	t.Helper()
	CheckRescore(t, g, nil, 10, rescore)
	CheckRescore(t, g, engine.Params{"scenario_set": "curated"}, 5, rescore)
}

// CheckRescore plays episodes of g for each agent pairing and seeds
// 1..seeds, writes each record as JSON, reads the scenario and the terms
// back into S and T, and checks that rescore recomputes the recorded
// rewards: the record alone must hold everything a reward needs.
func CheckRescore[S, T any](t *testing.T, g engine.Game, p engine.Params, seeds int, rescore func(S, string, *T) ([2]float64, error)) {
	t.Helper()
	for _, agents := range [][]string{{"strategic", "naive"}, {"naive", "strategic"}, {"random", "random"}, {"strategic", "strategic"}} {
		for seed := uint64(1); seed <= uint64(seeds); seed++ {
			rec := enginetest.PlayScripted(t, g, seed, p, agents...)
			b, err := json.Marshal(rec)
			if err != nil {
				t.Fatal(err)
			}
			var back struct {
				Scenario S
				Outcome  struct {
					Rewards []float64
					Result  string
					Terms   *T
				}
			}
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("seed %d: decode record: %v", seed, err)
			}
			got, err := rescore(back.Scenario, back.Outcome.Result, back.Outcome.Terms)
			if err != nil {
				t.Fatalf("seed %d %v: rescore: %v", seed, agents, err)
			}
			for i := range 2 {
				if math.Abs(got[i]-rec.Outcome.Rewards[i]) > 1e-12 {
					t.Errorf("seed %d %v: seat %d rescored %v, recorded %v", seed, agents, i, got[i], rec.Outcome.Rewards[i])
				}
			}
		}
	}
}
